//go:build unix

package main

import (
	"os/signal"
	"syscall"
)

// ignoreFileSizeSignal makes a write past the file size limit (ulimit -f)
// fail with EFBIG, as a full disk fails with ENOSPC, instead of killing the
// process with SIGXFSZ mid-write: forklab then removes what it was writing
// and exits 1.
func ignoreFileSizeSignal() { signal.Ignore(syscall.SIGXFSZ) }
