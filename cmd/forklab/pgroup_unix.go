//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup puts c in a process group of its own: a ^C at the
// terminal reaches forklab worker, which passes it on to its members, and
// not the members twice.
func ownProcessGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// closeOnExec keeps f, a pipe a member process inherited from its
// supervisor, out of the processes it starts (an agent holding it would
// keep the supervisor waiting for its end).
func closeOnExec(f *os.File) { syscall.CloseOnExec(int(f.Fd())) }
