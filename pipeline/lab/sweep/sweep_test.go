package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/schemas"
)

func runSweep(t *testing.T, spec Spec, workers int) string {
	t.Helper()
	out := t.TempDir()
	if err := Prepare(out, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), spec, Options{Out: out, Workers: workers, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return out
}

// tableFiles maps each Parquet file's path relative to dir to its bytes.
func tableFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".parquet" {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The files, not only the rows, are the same whatever the worker count, for
// a sweep with several shards, fork steps, arms, noisy replicas and a grid.
func TestOutputIndependentOfWorkers(t *testing.T) {
	spec := DefaultSpec()
	spec.ForkAt = []int{1, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	spec.Replicas = 3
	spec.Model.Temperature = 0.1
	spec.Grid = map[string][]float64{"p_stall": {0, 0.2}}
	spec.Seeds = Range{100, 100 + 3*spec.ShardSeeds() + 17}
	if spec.ShardSeeds() >= spec.Seeds.Len() {
		t.Fatalf("want several shards, shard size %d", spec.ShardSeeds())
	}
	a := tableFiles(t, runSweep(t, spec, 1))
	b := tableFiles(t, runSweep(t, spec, 3))
	if len(a) < 20 || len(a) != len(b) {
		t.Fatalf("file counts: %d with 1 worker, %d with 3", len(a), len(b))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s differs between 1 and 3 workers", name)
		}
	}
}

func TestPrepareRefusesFinishedSweep(t *testing.T) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, 10}
	out := runSweep(t, spec, 1)
	err := Prepare(out, false)
	if !errors.Is(err, ErrFinished) || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("got %v, want ErrFinished naming --overwrite", err)
	}
	if err := Prepare(out, true); err != nil {
		t.Fatal(err)
	}
	// An overwrite in progress never looks finished.
	if _, err := os.Stat(filepath.Join(out, ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("manifest survived Prepare with overwrite: %v", err)
	}
	if files := tableFiles(t, out); len(files) != 0 {
		t.Fatalf("old table files survived: %v", files)
	}
}

func TestCancelledSweepLeavesNothingComplete(t *testing.T) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, 50000}
	out := t.TempDir()
	if err := Prepare(out, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, spec, Options{Out: out}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(out, ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a cancelled sweep wrote a manifest")
	}
	if files := tableFiles(t, out); len(files) != 0 {
		t.Fatalf("a cancelled sweep left table files: %v", files)
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		err  string
	}{
		{"0:300", Range{0, 300}, ""},
		{"300", Range{0, 300}, ""},
		{" 5 : 9 ", Range{5, 9}, ""},
		{"9:5", Range{}, "empty"},
		{"5:5", Range{}, "empty"},
		{"a:b", Range{}, "malformed"},
		{"-1:5", Range{}, "malformed"},
		{"0:9223372036854775808", Range{}, "malformed"},
		{"", Range{}, "malformed"},
	} {
		got, err := ParseRange(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRange(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"3", "[3]", ""},
		{"3,1,2,3", "[1 2 3]", ""},
		{"1-4", "[1 2 3 4]", ""},
		{"1-2,5", "[1 2 5]", ""},
		{"0", "", "below 1"},
		{"-1", "", "malformed"},
		{"4-2", "", "upwards"},
		{"x", "", "malformed"},
		{"1,,2", "", "malformed"},
	} {
		got, err := ParseSteps(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSteps(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("ParseSteps(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// A directory with files forklab did not write is refused without
// --overwrite, and with it only forklab's folders go.
func TestPrepareKeepsOthersFiles(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "pairs"), 0o755)
	os.WriteFile(filepath.Join(dir, "pairs", "mine.csv"), []byte("precious"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	err := Prepare(dir, false)
	if err == nil || !strings.Contains(err.Error(), "is not an unfinished forklab sweep (it holds notes.txt)") {
		t.Fatalf("got %v", err)
	}
	os.Remove(filepath.Join(dir, "notes.txt"))
	if err := Prepare(dir, false); err == nil || !strings.Contains(err.Error(), "pairs/mine.csv") {
		t.Fatalf("a user's file in a table folder: got %v", err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	if err := Prepare(dir, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Fatal("--overwrite removed a file forklab did not write")
	}
	// An interrupted sweep's leftovers are taken over without --overwrite.
	spec := DefaultSpec()
	spec.Seeds = Range{0, 10}
	fresh := t.TempDir()
	Prepare(fresh, false)
	os.MkdirAll(filepath.Join(fresh, "pairs", "config_id=0", "fork_step=3"), 0o755)
	os.WriteFile(filepath.Join(fresh, "pairs", "config_id=0", "fork_step=3", ".part-000000.parquet.tmp"), nil, 0o644)
	if err := Prepare(fresh, false); err != nil {
		t.Fatalf("an interrupted sweep's directory: %v", err)
	}
}

func TestLockRefusesASecondSweep(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	release()
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
	if err := Prepare(dir, false); err != nil {
		t.Fatalf("the lock file is forklab's own: %v", err)
	}
}

// A spec file writes fork_at as the flag does, and its errors name keys.
func TestReadSpecFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want, err string }{
		{"a.yaml", "fork_at: 3\nseeds: \"0:50\"\n", "[3] 0:50", ""},
		{"b.yaml", "fork_at: \"1-3\"\n", "[1 2 3] 0:300", ""},
		{"c.json", `{"fork_at": [4, 2]}`, "[2 4] 0:300", ""},
		{"d.yaml", "params:\n  p_stal: 0.1\n", "", `unknown key "p_stal"`},
		{"e.yaml", "replicas: five\n", "", "key replicas: a string cannot be read as a number"},
		{"f.json", `{"fork_at": [3],}`, "", "invalid character"},
		{"g.yaml", "- 1\n- 2\n", "", "want a mapping of keys"},
		{"h.toml", "", "", "want a .json, .yaml or .yml file"},
	} {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, []byte(tc.text), 0o644)
		s, err := ReadSpecFile(p, DefaultSpec())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(s.ForkAt, " ", s.Seeds) != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, s.ForkAt, err, tc.want)
		}
	}
}

// With a greedy model the A/A arm is off again, replica for replica: its
// flip rate, the noise floor, is exactly zero — also in an imperfect world,
// whose randomness belongs to the task, not to the arm.
func TestAAWithGreedyModelNeverFlips(t *testing.T) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, 2000}
	spec.ForkAt = []int{2, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.AA}
	spec.Replicas = 3
	spec.Params.PStall, spec.Params.PObsNoise, spec.Params.PRefreshFail = 0.2, 0.1, 0.3
	out := runSweep(t, spec, 2)
	pairs := readRows[schemas.Pair](t, filepath.Join(out, "pairs", "*", "*", "*.parquet"))
	n, flips := len(pairs), 0
	for _, p := range pairs {
		if p.Label != "unchanged" || p.ControlWins != p.TreatmentWins {
			flips++
		}
	}
	if n != 4000 || flips != 0 {
		t.Fatalf("%d aa pairs, %d flips; want 4000 and 0", n, flips)
	}
}
