//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts c in a process group of its own: a ^C at the
// terminal reaches forklab worker, which passes it on to its members, and
// not the members twice.
func ownProcessGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }
