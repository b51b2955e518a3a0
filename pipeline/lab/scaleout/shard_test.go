package scaleout_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
)

// gridSpec is a noisy counter sweep over two configurations of three units
// each.
func gridSpec() sweep.Spec {
	spec := sweep.DefaultSpec()
	spec.ForkAt = []int{1, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	spec.Replicas = 3
	spec.Model.Temperature = 0.1
	spec.Params = world.Params{"p_obs_noise": 0.05}
	spec.Grid = map[string][]any{"p_stall": {0.0, 0.2}}
	spec.Seeds = sweep.Range{Start: 100, End: 100 + 2*spec.ShardSeeds() + 17}
	return spec
}

// singleProcess runs spec undivided and returns its output directory.
func singleProcess(t testing.TB, spec sweep.Spec) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "single")
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(context.Background(), r, st, sweep.Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return out
}

// tableFiles maps each file under dir but the manifest to its bytes.
func tableFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == sweep.ManifestName {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles fails unless the two directories hold the same files with the
// same bytes (the manifests aside: they differ in sweep id and times).
func sameFiles(t testing.TB, what string, want, got map[string][]byte) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: no files", what)
	}
	for name, b := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: %s is missing", what, name)
		} else if !bytes.Equal(g, b) {
			t.Errorf("%s: %s differs", what, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s is extra", what, name)
		}
	}
}

// sameManifestRows fails unless the manifests list the same files, rows
// and checksums.
func sameManifestRows(t testing.TB, a, b string) {
	t.Helper()
	ma, err := sweep.ReadManifest(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := sweep.ReadManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ma.Files) != len(mb.Files) {
		t.Fatalf("manifests list %d and %d files", len(ma.Files), len(mb.Files))
	}
	for i := range ma.Files {
		if ma.Files[i] != mb.Files[i] {
			t.Fatalf("manifest file %d: %+v against %+v", i, ma.Files[i], mb.Files[i])
		}
	}
	for k, v := range ma.Rows {
		if mb.Rows[k] != v {
			t.Fatalf("manifest rows.%s: %d against %d", k, v, mb.Rows[k])
		}
	}
	if err := sweep.Verify(b, mb, true); err != nil {
		t.Fatal(err)
	}
}

func TestParseShare(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"0/3", "0/3", ""},
		{" 2 / 3 ", "2/3", ""},
		{"3/3", "", "out of range"},
		{"-1/3", "", "out of range"},
		{"0/0", "", "out of range"},
		{"1", "", "malformed"},
		{"a/3", "", "malformed"},
	} {
		s, err := scaleout.ParseShare(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseShare(%q) = %v, %v; want an error saying %s", c.in, s, err, c.err)
			}
			continue
		}
		if err != nil || s.String() != c.want {
			t.Errorf("ParseShare(%q) = %v, %v; want %s", c.in, s, err, c.want)
		}
	}
}

// Three shares run at once into one directory, then finalize: the files of
// the single-process sweep, byte for byte, and its manifest's rows and
// checksums. Finalizing before the last share has run names that share
// and changes nothing; a share run again keeps its finished units.
func TestSharesThenFinalize(t *testing.T) {
	spec := gridSpec()
	single := singleProcess(t, spec)
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, i := range []int{0, 2} {
		wg.Go(func() {
			res, err := scaleout.RunShare(ctx, r, out, scaleout.Share{I: i, N: 3}, false, sweep.Options{Version: "test"})
			if err != nil {
				t.Error(err)
			}
			if res.Units != 2 || res.Kept != 0 {
				t.Errorf("share %d/3: %+v, want 2 units, none kept", i, res)
			}
		})
	}
	wg.Wait()
	_, err = scaleout.Finalize(ctx, out, scaleout.FinalizeOptions{Version: "test"})
	if !errors.Is(err, scaleout.ErrIncomplete) || !strings.Contains(err.Error(), "2 of 6 units are missing, of share 1/3 (c0-s000001 (config 0, seeds 7396:14692), c1-s000001") {
		t.Fatalf("finalize without share 1/3: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, sweep.ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused finalize published")
	}
	res, err := scaleout.RunShare(ctx, r, out, scaleout.Share{I: 1, N: 3}, false, sweep.Options{Version: "test"})
	if err != nil || res.Units != 2 {
		t.Fatalf("share 1/3: %+v %v", res, err)
	}
	if res, err = scaleout.RunShare(ctx, r, out, scaleout.Share{I: 1, N: 3}, false, sweep.Options{Version: "test"}); err != nil || res.Kept != 2 {
		t.Fatalf("share 1/3 again: %+v %v, want both units kept", res, err)
	}
	if _, err := scaleout.Finalize(ctx, out, scaleout.FinalizeOptions{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "three shares against one process", tableFiles(t, single), tableFiles(t, out))
	sameManifestRows(t, single, out)
	if _, err := scaleout.Finalize(ctx, out, scaleout.FinalizeOptions{Version: "test"}); err == nil || !strings.Contains(err.Error(), "nothing to finalize") {
		t.Fatalf("finalize of a finished sweep: %v", err)
	}
}

// Shares of two forklab versions are not finalized together.
func TestFinalizeRefusesMixedVersions(t *testing.T) {
	spec := gridSpec()
	spec.Grid = nil
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for i, v := range []string{"v1", "v2"} {
		if _, err := scaleout.RunShare(context.Background(), r, out, scaleout.Share{I: i, N: 2}, false, sweep.Options{Version: v}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = scaleout.Finalize(context.Background(), out, scaleout.FinalizeOptions{Version: "v2"})
	if err == nil || !strings.Contains(err.Error(), "run every share with one version") {
		t.Fatalf("got %v", err)
	}
}
