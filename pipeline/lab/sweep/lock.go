package sweep

import (
	"errors"
	"fmt"

	"github.com/forklab/forklab/internal/dirlock"
)

// LockName is the lock file a sweep holds in its output directory while it
// writes there.
const LockName = ".forklab.lock"

// ErrLocked reports an output directory another sweep is writing.
var ErrLocked = dirlock.ErrLocked

// Lock takes dir for one sweep, creating it if needed: a second sweep into
// the same directory gets ErrLocked instead of interleaving its files with
// this one's. The lock is released by the returned function, or by the
// process's exit however it ends.
func Lock(dir string) (release func(), err error) {
	release, err = dirlock.Lock(dir, LockName)
	if errors.Is(err, dirlock.ErrLocked) {
		return nil, fmt.Errorf("output %w: another forklab sweep is writing there; wait for it or choose another --out", err)
	}
	if err != nil {
		return nil, fmt.Errorf("output %w", err)
	}
	return release, nil
}
