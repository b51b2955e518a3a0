package sweep_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/jsonkeys"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// The manifest's cost object has snake_case keys like every other key
// (issue 12, a finding of the QA pass). A manifest of the same schema
// version written before (testdata/manifests/legacy-cost: a 5-seed sweep
// whose cost object reads {"Steps": 58, "Tokens": 0, …}) is still read and
// verifies, its checksum included; edited, it still fails.
func TestManifestCostKeys(t *testing.T) {
	for _, bad := range jsonkeys.Check(reflect.TypeFor[sweep.Manifest]()) {
		t.Errorf("%s: not snake_case", bad)
	}
	legacy := "../../../testdata/manifests/legacy-cost"
	raw, err := os.ReadFile(filepath.Join(legacy, sweep.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"Steps": 58`)) {
		t.Fatalf("the legacy manifest is not legacy:\n%s", raw)
	}
	m, err := sweep.ReadManifest(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if m.Cost.Steps != 58 {
		t.Errorf("legacy cost: %+v, want 58 steps", m.Cost)
	}
	if err := sweep.Verify(legacy, m, true); err != nil {
		t.Errorf("legacy manifest: %v", err)
	}
	// A hand edit of a legacy manifest is still caught, the cost's too.
	for _, edit := range [][2]string{{`"Steps": 58`, `"Steps": 59`}, {`"pairs": 5`, `"pairs": 6`}} {
		dir := t.TempDir()
		copyDir(t, legacy, dir)
		b := bytes.Replace(raw, []byte(edit[0]), []byte(edit[1]), 1)
		if bytes.Equal(b, raw) {
			t.Fatalf("edit %q did not apply", edit)
		}
		if err := os.WriteFile(filepath.Join(dir, sweep.ManifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := sweep.ReadManifest(dir)
		if err == nil {
			err = sweep.Verify(dir, m, false)
		}
		if !errors.Is(err, sweep.ErrMismatch) || !strings.Contains(err.Error(), "was edited") {
			t.Errorf("legacy manifest edited %q: %v, want the edit found", edit, err)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
