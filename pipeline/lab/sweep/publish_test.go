package sweep_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"golang.org/x/sys/unix"
)

// userFiles puts a file and a folder with a file of someone else's in dir
// and returns a check that both are still there, unmoved (same inode) and
// unchanged.
func userFiles(t *testing.T, dir string) func(when string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("also mine"), 0o644)
	var before []fs.FileInfo
	for _, p := range []string{"a.txt", "sub", "sub/b.txt"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, fi)
	}
	return func(when string) {
		t.Helper()
		for i, p := range []string{"a.txt", "sub", "sub/b.txt"} {
			fi, err := os.Stat(filepath.Join(dir, p))
			if err != nil || !os.SameFile(fi, before[i]) {
				t.Fatalf("%s: %s was moved or removed (%v)", when, p, err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "sub", "b.txt")); string(b) != "also mine" {
			t.Fatalf("%s: sub/b.txt changed", when)
		}
	}
}

// stageRun stages out and runs spec into it: the sweep's error, if any.
func stageRun(t *testing.T, spec sweep.Spec, out string, overwrite, resume bool) error {
	t.Helper()
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.Stage(out, overwrite, resume)
	if err != nil {
		return err
	}
	_, err = sweep.Run(context.Background(), r, st, sweep.Options{Version: "test"})
	if err != nil {
		st.Release()
	}
	return err
}

// A sweep into a directory that holds files forklab did not write is
// refused without --overwrite; with it, the sweep is published beside
// them and they never move, neither then nor when it is replaced. A
// folder named as a sweep's table in a directory that holds no sweep is
// the user's: refused even with --overwrite, without a trace.
func TestPublishBesideUserFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mixed")
	unmoved := userFiles(t, out)
	if err := stageRun(t, small(10), out, false, false); err == nil || !strings.Contains(err.Error(), "a.txt") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("without --overwrite: %v; want a refusal naming a.txt and --overwrite", err)
	}
	for _, n := range []int{10, 50} {
		if err := stageRun(t, small(uint64(n)), out, true, false); err != nil {
			t.Fatalf("sweep of %d seeds: %v", n, err)
		}
		unmoved("after the sweep")
		m, err := sweep.ReadManifest(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := sweep.Verify(out, m, true); err != nil {
			t.Fatal(err)
		}
		if m.Rows["tasks"] != int64(n) {
			t.Fatalf("tasks: %d rows, want %d", m.Rows["tasks"], n)
		}
		if _, err := os.Stat(sweep.StagingDir(out)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the staging directory survived the publish: %v", err)
		}
	}
	sameFiles(t, "published beside the user's files", tableFiles(t, runSweep(t, small(50), sweep.Options{})), tableFiles(t, out))

	theirs := filepath.Join(t.TempDir(), "theirs")
	os.MkdirAll(filepath.Join(theirs, "tasks"), 0o755)
	os.WriteFile(filepath.Join(theirs, "tasks", "todo.txt"), []byte("x"), 0o644)
	err := stageRun(t, small(10), theirs, true, false)
	if err == nil || !strings.Contains(err.Error(), "holds tasks, which forklab did not write") {
		t.Fatalf("a folder tasks/ of the user's: %v", err)
	}
	if got := entries(t, filepath.Dir(theirs)); len(got) != 1 {
		t.Fatalf("the refusal left %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(theirs, "tasks", "todo.txt")); string(b) != "x" {
		t.Fatal("the user's tasks/todo.txt changed")
	}
}

// --out . names the working directory, which cannot be swapped away (the
// rename of "." fails with EBUSY: issue 25 E saw a.txt and sub/ moved into
// a hidden folder, then the swap fail): the staging directory is beside
// it, and the sweep is published in place, the user's files unmoved.
func TestPublishIntoWorkingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "here")
	unmoved := userFiles(t, dir)
	t.Chdir(dir)
	if got, want := sweep.StagingDir("."), filepath.Join(filepath.Dir(dir), ".here.forklab-staging"); got != want {
		t.Fatalf("StagingDir(.) = %s, want %s", got, want)
	}
	for range 2 {
		if err := stageRun(t, small(10), ".", true, false); err != nil {
			t.Fatal(err)
		}
		unmoved("after a sweep --out .")
		if _, err := sweep.ReadManifest("."); err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, filepath.Dir(dir)); len(got) != 1 {
		t.Fatalf("beside the working directory: %v", got)
	}
	// An empty working directory too.
	empty := filepath.Join(t.TempDir(), "empty")
	os.Mkdir(empty, 0o755)
	t.Chdir(empty)
	if err := stageRun(t, small(10), ".", false, false); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "--out . against --out new", tableFiles(t, runSweep(t, small(10), sweep.Options{})), tableFiles(t, "."))
}

// A publish in place cut short (here: the second staged entry fails to
// move in) leaves out without a manifest — an unfinished sweep, which
// readers refuse, saying to resume — and the user's files where they
// were; --resume (no --overwrite needed) then publishes the sweep, byte
// for byte the uninterrupted one.
func TestInterruptedPublishInPlaceResumes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mixed")
	unmoved := userFiles(t, out)
	if err := stageRun(t, small(10), out, true, false); err != nil {
		t.Fatal(err)
	}
	moves := 0
	*sweep.MoveIn = func(from, to string) error {
		if moves++; moves == 2 {
			return &fs.PathError{Op: "rename", Path: from, Err: unix.EIO}
		}
		return os.Rename(from, to)
	}
	defer func() { *sweep.MoveIn = os.Rename }()
	err := stageRun(t, small(50), out, true, false)
	if err == nil || !strings.Contains(err.Error(), "forklab sweep --resume --out "+out) {
		t.Fatalf("a publish cut short: %v; want an error saying to resume", err)
	}
	unmoved("after a publish cut short")
	if _, err := sweep.ReadManifest(out); !errors.Is(err, sweep.ErrNotResults) || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("ReadManifest of a publish cut short: %v", err)
	}
	*sweep.MoveIn = os.Rename
	if err := stageRun(t, small(50), out, false, true); err != nil {
		t.Fatalf("--resume: %v", err)
	}
	unmoved("after the resume")
	sameFiles(t, "resumed publish against uninterrupted", tableFiles(t, runSweep(t, small(50), sweep.Options{})), tableFiles(t, out))
}

// A mount point cannot take a sweep staged beside it on another file
// system: refused before anything is written, saying where to write.
func TestStageRefusesMountPoint(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, 0) })
	_, err := sweep.Stage(mnt, true, false)
	if err == nil || !strings.Contains(err.Error(), "is a mount point") || !strings.Contains(err.Error(), filepath.Join(mnt, "out")) {
		t.Fatalf("Stage of a mount point: %v", err)
	}
	if got := entries(t, filepath.Dir(mnt)); len(got) != 1 {
		t.Fatalf("the refusal left %v", got)
	}
}
