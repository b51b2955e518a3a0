package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplacesWholeAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	for _, want := range []string{"first\n", "second, longer\n"} {
		if err := WriteFile(p, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
			t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
		}
	}
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	f.Abort()
	if got, _ := os.ReadFile(p); string(got) != "second, longer\n" {
		t.Fatalf("an aborted write changed the file: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "b"), nil); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "a"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatalf("sync %s: %v", dir, err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("sync of a missing directory: %v", err)
	}
}

// A symlink, a device node or a directory at the path is refused, not
// replaced by a regular file, and nothing is left behind.
func TestRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	for _, p := range []string{link, sub, "/dev/null"} {
		err := WriteFile(p, []byte("new"))
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: got %v, want ErrNotRegular", p, err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatal("the link's target changed")
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("left behind: %v", entries)
	}
}

// Output refuses, leaving nothing behind: an existing file without
// overwrite (also one that appears while the file is written), a path that
// is not a regular file, a folder that does not exist.
func TestOutputRefusals(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.csv")
	os.WriteFile(old, []byte("keep"), 0o644)
	if _, err := Output(old, false); !errors.Is(err, ErrExists) || err.Error() != "output "+old+" already exists; pass --overwrite to replace it" {
		t.Errorf("existing file: %v", err)
	}
	if _, err := Output(filepath.Join(dir, "no", "x.csv"), true); !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("missing folder: %v", err)
	}
	for _, p := range []string{dir, "/dev/null"} {
		if _, err := Output(p, true); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A file that appears at the path meanwhile is not replaced.
	late := filepath.Join(dir, "late.csv")
	f, err := Output(late, false)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	os.WriteFile(late, []byte("someone else's"), 0o644)
	if err := f.Commit(); !errors.Is(err, ErrExists) {
		t.Errorf("a file that appeared meanwhile: %v", err)
	}
	if b, _ := os.ReadFile(late); string(b) != "someone else's" {
		t.Errorf("it was replaced: %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Errorf("left behind: %v", es)
	}
	if b, _ := os.ReadFile(old); string(b) != "keep" {
		t.Errorf("old.csv changed: %q", b)
	}
}

// Cleanup — what a signal runs — removes every temporary file and folder in
// flight, those DuckDB creates under a reserved name included, and refuses
// new ones; a commit after it fails and leaves the final path as it was.
func TestCleanupRemovesWhatIsInFlight(t *testing.T) {
	defer inFlight.reset()
	dir := t.TempDir()
	f, err := Output(filepath.Join(dir, "big.csv"), false)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	name, release, err := TempName(filepath.Join(dir, "results.duckdb"), ".wal")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	os.WriteFile(name, []byte("db"), 0o644)
	os.WriteFile(name+".wal", []byte("log"), 0o644)
	scratch, remove, err := TempDir(dir, ".forklab-sql-")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	os.WriteFile(filepath.Join(scratch, "spill"), []byte("x"), 0o644)
	if es, _ := os.ReadDir(dir); len(es) != 4 {
		t.Fatalf("in flight: %v", es)
	}
	for _, e := range []string{filepath.Base(f.TempPath()), filepath.Base(name)} {
		if target, ok := TempTarget(e); !ok || (target != "big.csv" && target != "results.duckdb") {
			t.Errorf("TempTarget(%s) = %q, %v", e, target, ok)
		}
	}
	Cleanup()
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("left after Cleanup: %v", es)
	}
	if err := f.Commit(); !errors.Is(err, ErrInterrupted) {
		t.Errorf("commit after Cleanup: %v", err)
	}
	if _, err := Output(filepath.Join(dir, "b"), false); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Output after Cleanup: %v", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("left: %v", es)
	}
}

// A failed write names the final path, not the temporary one, and the
// temporary name keeps the final name's extensions.
func TestTempNames(t *testing.T) {
	dir := t.TempDir()
	f, err := Output(filepath.Join(dir, "x.csv.gz"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	base := filepath.Base(f.TempPath())
	if !strings.HasPrefix(base, ".x.csv.gz.forklab.tmp-") || strings.HasSuffix(base, ".gz") || !IsTemp(base) {
		t.Errorf("temporary name %s", base)
	}
	for _, n := range []string{"x.csv", ".forklab-derived", ".forklab-sql-123", ".x.csv.tmp-1", "a.forklab.tmp-1"} {
		if IsTemp(n) {
			t.Errorf("IsTemp(%s)", n)
		}
	}
	f.File.Close() // a write now fails
	_, err = f.Write([]byte("x"))
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "x.csv.gz") {
		t.Errorf("write error %v names %v", err, pe)
	}
}
