package agent

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/stream/client"
)

func sweepInto(t *testing.T, spec sweep.Spec, runs sweep.Runs) map[string][]byte {
	t.Helper()
	out := t.TempDir()
	if err := sweep.Prepare(out, false); err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(context.Background(), spec, sweep.Options{Out: out, Runs: runs}); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".parquet" {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(out, p)
			files[rel] = b
		}
		return err
	})
	return files
}

// The proof that the agent's state can be copied: a sweep whose runs and
// branches are sessions on the log, forked from their offsets, writes the
// same tables, byte for byte, as the in-memory sweep — for the seed's
// experiment and for a noisy one with every arm and several replicas.
func TestSweepFromLogEqualsInMemory(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	seedSpec := sweep.DefaultSpec()
	noisySpec := sweep.DefaultSpec()
	noisySpec.Seeds = sweep.Range{Start: 1000, End: 1040}
	noisySpec.ForkAt = []int{2, 3}
	noisySpec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	noisySpec.Replicas = 3
	noisySpec.Params.PStall, noisySpec.Params.PObsNoise = 0.15, 0.05
	noisySpec.Model.Temperature = 0.2
	for name, spec := range map[string]sweep.Spec{"seed": seedSpec, "noisy": noisySpec} {
		t.Run(name, func(t *testing.T) {
			runs, err := PlaySweep(context.Background(), c, spec, PlayOptions{Prefix: "test-" + name, Parallel: 24})
			if err != nil {
				t.Fatal(err)
			}
			fromLog := sweepInto(t, spec, runs)
			inMemory := sweepInto(t, spec, nil)
			if len(fromLog) == 0 || len(fromLog) != len(inMemory) {
				t.Fatalf("%d files from the log, %d in memory", len(fromLog), len(inMemory))
			}
			for f, b := range inMemory {
				if !bytes.Equal(b, fromLog[f]) {
					t.Errorf("%s differs between the sweep from the log and the in-memory sweep", f)
				}
			}
		})
	}
	// A second play with the same prefix refuses to reuse the streams.
	if _, err := PlaySweep(context.Background(), c, seedSpec, PlayOptions{Prefix: "test-seed"}); err == nil {
		t.Fatal("reusing a prefix was accepted")
	}
}
