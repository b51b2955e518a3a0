//go:build !unix

package dirlock

import "os"

// flock is a no-op where flock(2) does not exist: concurrent sweeps into
// one directory are then not detected.
func flock(*os.File) error { return nil }

func funlock(*os.File) {}

// flockWait is a no-op where flock(2) does not exist.
func flockWait(*os.File) error { return nil }
