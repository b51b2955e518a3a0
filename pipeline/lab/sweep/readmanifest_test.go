package sweep_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// A first sweep into a directory that was interrupted leaves only its
// staging directory beside it (testdata/interrupted/.first.forklab-staging).
// Reading the directory (forklab report, sql, policy) said it "does not
// exist or is not a directory", as for a typo, and not that the sweep can
// be resumed.
func TestReadManifestOfInterrupted(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"../../../testdata/interrupted/first", "../../../testdata/interrupted/first does not exist yet: its first sweep was interrupted (resume it with forklab sweep --resume --out ../../../testdata/interrupted/first; an external agent's sweep: with the command it was started with, adding --resume)"},
		// The shares of a split, or a distributed sweep's workers, are
		// finalized, not resumed: "resume it with forklab sweep --resume"
		// sent the reader of a sweep still being written to a command
		// that has nothing to resume.
		{"../../../testdata/interrupted/shared", "../../../testdata/interrupted/shared is not published yet: its units are written by shares or workers (forklab sweep --shard I/N, --distributed); once they are done, forklab sweep finalize ../../../testdata/interrupted/shared publishes it"},
		{"../../../testdata/interrupted/workers", "forklab sweep finalize ../../../testdata/interrupted/workers publishes it"},
		{"../../../testdata/interrupted/never", "../../../testdata/interrupted/never does not exist or is not a directory"},
		{"../../../testdata/interrupted/README.md", "is a file, not a results directory"},
	} {
		_, err := sweep.ReadManifest(tc.dir)
		if !errors.Is(err, sweep.ErrNotResults) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadManifest(%s) = %v; want ErrNotResults saying %q", tc.dir, err, tc.want)
		}
	}
}
