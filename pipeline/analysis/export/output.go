package export

import (
	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// ErrExists reports an output file that already exists when replacing it
// was not asked for (atomicfile.ErrExists).
var ErrExists = atomicfile.ErrExists

// ErrBadOutput reports an output path that cannot be written: a missing
// parent folder, no permission (atomicfile.ErrBadOutput); a directory, a
// symbolic link or a device node at the path is refused with
// atomicfile.ErrNotRegular.
var ErrBadOutput = atomicfile.ErrBadOutput

// Output is a file being written under a temporary name in the folder of
// its final path (atomicfile.Output): Commit renames it into place, Abort
// removes it, and a signal's cleanup removes it too. Readers of the final
// path never see a half-written file.
type Output = atomicfile.File

// CreateOutput starts writing path (atomicfile.Output): it refuses a path
// inside a results directory's own files (sweep.CheckOutput: its manifest,
// its tables' partitions, …), a path that is not a regular file, an
// existing file unless overwrite, and a folder that takes no file. The temporary name keeps the final name's
// extensions (DuckDB picks compression from them: .csv.gz is gzipped).
func CreateOutput(path string, overwrite bool) (*Output, error) {
	if err := sweep.CheckOutput(path); err != nil {
		return nil, err
	}
	return atomicfile.Output(path, overwrite)
}
