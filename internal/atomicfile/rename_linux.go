package atomicfile

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to unless to exists (ErrExists):
// renameat2(2) with RENAME_NOREPLACE, so that a file created at to after
// the check in Output is not replaced either.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.EEXIST):
		return ErrExists
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		// A file system without RENAME_NOREPLACE.
		return renameIfAbsent(from, to)
	}
	return err
}
