package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
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
