//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// ownProcessGroup does nothing where there are no process groups.
func ownProcessGroup(*exec.Cmd) {}

// closeOnExec does nothing here.
func closeOnExec(*os.File) {}
