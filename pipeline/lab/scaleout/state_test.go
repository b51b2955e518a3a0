package scaleout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// A worker skips a unit only when its directory plainly holds no more of
// its sweep; when the record is missing but nothing says the sweep is
// over (a network file system's stale view), it looks again later; when
// the record cannot be read, it stops rather than drop the unit.
func TestStateOf(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	msg := UnitMsg{Sweep: "s1", Out: out}
	st := sweep.StagingDir(out)
	check := func(what string, want sweepState, wantErr bool) {
		t.Helper()
		got, err := stateOf(msg)
		if got != want || (err != nil) != wantErr {
			t.Fatalf("%s: state %d, error %v; want %d, error %v", what, got, err, want, wantErr)
		}
	}
	check("nothing there", gone, false)
	os.MkdirAll(st, 0o755)
	check("a staging directory without a record", unsure, false)
	if err := writeRecord(st, sweepRecord{Sweep: "s1", Spec: sweep.DefaultSpec()}); err != nil {
		t.Fatal(err)
	}
	check("its record", active, false)
	writeRecord(st, sweepRecord{Sweep: "s2", Spec: sweep.DefaultSpec()})
	check("another sweep's record", gone, false)
	os.Remove(recordPath(st))
	os.MkdirAll(recordPath(st), 0o755) // unreadable as a file
	check("an unreadable record", active, true)
	os.Remove(recordPath(st))
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, sweep.ManifestName), []byte("{}"), 0o644)
	check("a published sweep", gone, false)
}
