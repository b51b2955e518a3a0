package sweep_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// Registering derived files is safe under concurrency (issue 12, a finding
// of the QA pass: two commands registering at once could lose an entry, and
// the lost file then outlived its sweep). Many registrations at once — of
// top-level files, of files in a user's folder, and outputs committed
// through DeriveOutput — all end up in the list, each once.
func TestRegisterDerivedConcurrently(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, "../../../testdata/manifests/legacy-cost", dir)
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	if err := os.Mkdir(filepath.Join(dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 24
	var want []string
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		top, nested, out := fmt.Sprintf("report-%d.html", i), fmt.Sprintf("notes/policy-%d.json", i), fmt.Sprintf("query-%d.csv", i)
		want = append(want, top, nested, out)
		wg.Add(3)
		go func() {
			defer wg.Done()
			errs <- sweep.RegisterDerived(filepath.Join(dir, top))
		}()
		go func() {
			defer wg.Done()
			errs <- sweep.RegisterDerived(filepath.Join(dir, filepath.FromSlash(nested)))
		}()
		go func() {
			defer wg.Done()
			f, err := atomicfile.Output(filepath.Join(dir, out), false)
			if err != nil {
				errs <- err
				return
			}
			defer f.Abort()
			f.WriteString("k,v\n")
			sweep.DeriveOutput(f, dir, m.SweepID)
			errs <- f.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, sweep.DerivedName))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%d entries registered, want %d; missing %v", len(got), len(want), missing(want, got))
	}
	// Nothing left behind by the lock: only the sweep, the user's folder,
	// the list and the outputs.
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(before)+2+n {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v", names)
	}
}

func missing(want, got []string) []string {
	var m []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			m = append(m, w)
		}
	}
	return m
}
