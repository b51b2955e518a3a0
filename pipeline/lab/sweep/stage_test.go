package sweep_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

func small(end uint64) sweep.Spec {
	s := sweep.DefaultSpec()
	s.Seeds = sweep.Range{Start: 0, End: end}
	return s
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A finished sweep is refused without --overwrite, and so is a directory
// of someone else's files; a refusal leaves no trace, neither in the
// directory nor beside it.
func TestStageRefusalsLeaveNoTrace(t *testing.T) {
	out := runSweep(t, small(10), sweep.Options{})
	before := entries(t, filepath.Dir(out))
	_, err := sweep.Stage(out, false, false)
	if !errors.Is(err, sweep.ErrFinished) || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("got %v, want ErrFinished naming --overwrite", err)
	}
	thesis := filepath.Join(t.TempDir(), "u")
	os.MkdirAll(thesis, 0o755)
	os.WriteFile(filepath.Join(thesis, "thesis.tex"), []byte("x"), 0o644)
	if _, err := sweep.Stage(thesis, false, false); err == nil || !strings.Contains(err.Error(), "thesis.tex") {
		t.Fatalf("got %v, want a refusal naming thesis.tex", err)
	}
	if got := entries(t, thesis); !slices.Equal(got, []string{"thesis.tex"}) {
		t.Fatalf("refused directory now holds %v", got)
	}
	if got := entries(t, filepath.Dir(thesis)); !slices.Equal(got, []string{"u"}) {
		t.Fatalf("a refusal left %v beside the directory", got)
	}
	if got := entries(t, filepath.Dir(out)); !slices.Equal(got, before) {
		t.Fatalf("a refusal changed %v to %v", before, got)
	}
	if _, err := sweep.Stage(filepath.Join(t.TempDir(), "none"), false, true); err == nil || !strings.Contains(err.Error(), "no interrupted sweep") {
		t.Fatalf("--resume of nothing: %v", err)
	}
}

// An overwrite that is interrupted leaves the old sweep whole; one that
// finishes replaces it at once, keeps the files forklab did not write and
// drops those it derived from the old sweep.
func TestOverwriteIsAtomic(t *testing.T) {
	out := runSweep(t, small(300), sweep.Options{})
	old := tableFiles(t, out)
	oldManifest, _ := os.ReadFile(filepath.Join(out, sweep.ManifestName))
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(out, "report.html"), []byte("old report"), 0o644)
	os.MkdirAll(filepath.Join(out, "rerun"), 0o755)
	for _, p := range []string{"report.html", "rerun"} {
		if err := sweep.RegisterDerived(filepath.Join(out, p)); err != nil {
			t.Fatal(err)
		}
	}

	// Interrupted: the old sweep stays as it was.
	big := small(2000000)
	r, err := big.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.Stage(out, true, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	progress := 0
	_, err = sweep.Run(ctx, r, st, sweep.Options{Workers: 1, Progress: func(n, _ int) {
		if progress += n; progress > 10000 {
			cancel()
		}
	}})
	st.Release()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	sameFiles(t, "after an interrupted overwrite", old, tableFiles(t, out))
	if m, _ := os.ReadFile(filepath.Join(out, sweep.ManifestName)); string(m) != string(oldManifest) {
		t.Fatal("an interrupted overwrite changed the manifest")
	}
	if b, _ := os.ReadFile(filepath.Join(out, "report.html")); string(b) != "old report" {
		t.Fatal("an interrupted overwrite dropped the old report")
	}

	// Finished: the new sweep, the user's file, no derived file.
	runSweep(t, small(50), sweep.Options{}, out)
	got := entries(t, out)
	for _, want := range []string{"notes.txt", sweep.ManifestName, "pairs"} {
		if !slices.Contains(got, want) {
			t.Fatalf("after the overwrite %v lacks %s", got, want)
		}
	}
	for _, gone := range []string{"report.html", "rerun", sweep.LockName} {
		if slices.Contains(got, gone) {
			t.Fatalf("after the overwrite %v still holds %s", got, gone)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "notes.txt")); string(b) != "mine" {
		t.Fatal("the user's file changed")
	}
	if _, err := os.Stat(sweep.StagingDir(out)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the staging directory survived the publish: %v", err)
	}
}

// A second sweep of the same output directory while one runs is refused.
func TestSecondSweepRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abandon()
	if _, err := sweep.Stage(out, true, false); err == nil || !strings.Contains(err.Error(), "another sweep is writing") {
		t.Fatalf("got %v", err)
	}
}

// A sweep interrupted at any point and resumed ends with the files an
// uninterrupted sweep writes, keeping the units it had finished.
func TestResumeIsByteIdentical(t *testing.T) {
	spec := noisySpec(3)
	want := tableFiles(t, runSweep(t, spec, sweep.Options{}))
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	kept := 0
	for _, stopAt := range []int{1, 2000, 9000} {
		st, err := sweep.Stage(out, false, stopAt != 1)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		seen := 0
		res, err := sweep.Run(ctx, r, st, sweep.Options{Workers: 1, Progress: func(n, _ int) {
			if seen += n; seen >= stopAt+kept {
				cancel()
			}
		}})
		st.Release()
		cancel()
		if err == nil {
			t.Fatalf("stop at %d: the sweep finished", stopAt)
		}
		kept = res.Resumed
	}
	st, err := sweep.Stage(out, false, true)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sweep.Run(context.Background(), r, st, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed == 0 {
		t.Fatal("the resumed sweep kept no unit")
	}
	sameFiles(t, "resumed against uninterrupted", want, tableFiles(t, out))
}

// The manifest carries the sweep's integrity: an edited manifest, a file
// removed, added, truncated or changed is found and named.
func TestVerify(t *testing.T) {
	out := runSweep(t, noisySpec(1), sweep.Options{})
	m, err := sweep.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := sweep.Verify(out, m, true); err != nil {
		t.Fatal(err)
	}
	edited := m
	edited.Rows = map[string]int64{"pairs": 999}
	for k, v := range m.Rows {
		if k != "pairs" {
			edited.Rows[k] = v
		}
	}
	if err := sweep.Verify(out, edited, false); !errors.Is(err, sweep.ErrMismatch) || !strings.Contains(err.Error(), "manifest.json was edited") {
		t.Fatalf("edited rows: %v", err)
	}
	// A manifest edited by hand, on disk.
	raw, _ := os.ReadFile(filepath.Join(out, sweep.ManifestName))
	var doc map[string]any
	json.Unmarshal(raw, &doc)
	doc["seeds_note"] = 1
	spec := doc["spec"].(map[string]any)
	spec["seeds"] = "0:5"
	b, _ := json.Marshal(doc)
	os.WriteFile(filepath.Join(out, sweep.ManifestName), b, 0o644)
	m2, err := sweep.ReadManifest(out)
	if err == nil {
		err = sweep.Verify(out, m2, false)
	}
	if err == nil || !strings.Contains(err.Error(), "was edited") {
		t.Fatalf("hand-edited manifest: %v", err)
	}
	os.WriteFile(filepath.Join(out, sweep.ManifestName), raw, 0o644)

	f := filepath.Join(out, filepath.FromSlash(m.Files[len(m.Files)-1].Path))
	content, _ := os.ReadFile(f)
	os.Remove(f)
	if err := sweep.Verify(out, m, false); err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("removed file: %v", err)
	}
	os.WriteFile(f, content[:len(content)-1], 0o644)
	if err := sweep.Verify(out, m, false); err == nil || !strings.Contains(err.Error(), "bytes, the manifest says") {
		t.Fatalf("truncated file: %v", err)
	}
	flipped := append([]byte{}, content...)
	flipped[len(flipped)/2] ^= 1
	os.WriteFile(f, flipped, 0o644)
	if err := sweep.Verify(out, m, false); err != nil {
		t.Fatalf("a quick check reads no content, but got %v", err)
	}
	if err := sweep.Verify(out, m, true); err == nil || !strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("changed byte: %v", err)
	}
	os.WriteFile(f, content, 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(f), "part-999999.parquet"), content, 0o644)
	if err := sweep.Verify(out, m, false); err == nil || !strings.Contains(err.Error(), "part-999999.parquet is not among its files") {
		t.Fatalf("added file: %v", err)
	}
}

// A static split: three shares write their units into one staging
// directory at once (StageShared, Options.Units), and the finishing step
// (Options.FinalizeOnly) publishes the same files an undivided sweep
// writes; with a share missing it refuses, naming the first missing unit.
func TestSharesThenFinalize(t *testing.T) {
	spec := noisySpec(1)
	want := tableFiles(t, runSweep(t, spec, sweep.Options{}))
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	share := func(i int) {
		st, err := sweep.StageShared(out, false)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if _, err := sweep.Run(context.Background(), r, st, sweep.Options{Units: func(u sweep.Unit) bool {
			n++
			return (n-1)%3 == i
		}}); err != nil {
			t.Fatal(err)
		}
	}
	finalize := func() error {
		st, err := sweep.Stage(out, false, true)
		if err != nil {
			return err
		}
		_, err = sweep.Run(context.Background(), r, st, sweep.Options{FinalizeOnly: true})
		if err != nil {
			st.Release()
		}
		return err
	}
	share(0)
	share(2)
	if err := finalize(); err == nil || !strings.Contains(err.Error(), "c0-s000001") || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("finalize without share 1: %v", err)
	}
	share(1)
	if err := finalize(); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "three shares against one sweep", want, tableFiles(t, out))
}

func readDerived(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, sweep.DerivedName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// What forklab writes into a results directory belongs to its sweep
// (issue 12 E): a new top-level entry is registered whole, a file in a
// folder of the user's by itself, nothing inside forklab's own folders or
// outside a results directory (a manifest.json of another tool does not
// make one). Replacing the sweep drops every derived file, a nested
// sweep's directory included, and keeps the user's files and folders.
func TestDerivedFilesGoWithTheirSweep(t *testing.T) {
	out := runSweep(t, small(20), sweep.Options{})
	os.WriteFile(filepath.Join(out, "mine.txt"), []byte("mine"), 0o644)
	os.MkdirAll(filepath.Join(out, "notes"), 0o755)
	os.WriteFile(filepath.Join(out, "notes", "n.txt"), []byte("mine too"), 0o644)
	for _, p := range []string{"report.html", "notes/r.html", "policies/policy-config-0-fork-3.json", "pairs/q.csv", "report.html"} {
		if err := sweep.RegisterDerived(filepath.Join(out, p)); err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(out, p)), 0o755)
		os.WriteFile(filepath.Join(out, p), []byte("derived"), 0o644)
	}
	// A sweep nested in this one registers itself when it starts.
	runSweep(t, small(10), sweep.Options{}, filepath.Join(out, "rerun"))
	if got, want := readDerived(t, out), "report.html\nnotes/r.html\npolicies\nrerun\n"; got != want {
		t.Fatalf("%s: %q, want %q", sweep.DerivedName, got, want)
	}
	// Not a results directory: another tool's manifest.json.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, sweep.ManifestName), []byte(`{"name": "an npm package"}`), 0o644)
	if err := sweep.RegisterDerived(filepath.Join(other, "report.html")); err != nil {
		t.Fatal(err)
	}
	if es := entries(t, other); !slices.Equal(es, []string{sweep.ManifestName}) {
		t.Fatalf("registered into another tool's directory: %v", es)
	}

	runSweep(t, small(30), sweep.Options{}, out)
	got := entries(t, out)
	for _, gone := range []string{"report.html", "policies", "rerun", sweep.DerivedName, ".rerun.forklab-staging"} {
		if slices.Contains(got, gone) {
			t.Errorf("after the overwrite %s is still there (%v)", gone, got)
		}
	}
	if es := entries(t, filepath.Join(out, "notes")); !slices.Equal(es, []string{"n.txt"}) {
		t.Errorf("the user's folder holds %v, want only n.txt", es)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "mine.txt")); string(b) != "mine" {
		t.Error("the user's file changed")
	}
	if _, err := os.Stat(filepath.Join(out, "pairs", "q.csv")); err == nil {
		t.Error("a file in the old sweep's table folder survived")
	}
}

// A derived file is published only beside the sweep it was made from: if
// another sweep replaced the directory meanwhile, the commit fails naming
// it, the path stays as it was and no temporary file is left (issue 12 E).
func TestDeriveOutputChecksTheSweep(t *testing.T) {
	out := runSweep(t, small(20), sweep.Options{})
	m, err := sweep.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "report.html")
	for _, tc := range []struct{ id, err string }{
		{m.SweepID, ""},
		{"0123456789abcdef", "was replaced by another sweep while forklab read it"},
	} {
		f, err := atomicfile.Output(path, true)
		if err != nil {
			t.Fatal(err)
		}
		sweep.DeriveOutput(f, out, tc.id)
		f.WriteString("report of " + tc.id)
		err = f.Commit()
		f.Abort()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Fatalf("sweep %s: %v, want %q", tc.id, err, tc.err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "report of "+m.SweepID {
		t.Fatalf("report.html holds %q", b)
	}
	for _, e := range entries(t, out) {
		if atomicfile.IsTemp(e) {
			t.Fatalf("temporary file left: %s", e)
		}
	}
	if got := readDerived(t, out); got != "report.html\n" {
		t.Fatalf("%s: %q", sweep.DerivedName, got)
	}
}

// An output directory that is a symbolic link is refused: publishing swaps
// directories and would replace the link. Nothing is created.
func TestStageRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real")
	os.Mkdir(target, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	for _, stage := range []func() error{
		func() error { _, err := sweep.Stage(link, true, false); return err },
		func() error { _, err := sweep.StageShared(link, true); return err },
	} {
		if err := stage(); err == nil || !strings.Contains(err.Error(), "is a symbolic link (to "+target+")") {
			t.Errorf("got %v", err)
		}
	}
	if es := entries(t, dir); !slices.Equal(es, []string{"link", "real"}) {
		t.Errorf("left %v", es)
	}
}
