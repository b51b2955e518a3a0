package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/queries"
	"github.com/forklab/forklab/schemas"

	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	_ "github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// A sweep reads two kinds of files it did not write itself: spec files
// (forklab sweep --spec) and, in a results directory anyone may have
// edited or damaged, the manifest. Seeds are the repository's
// testdata/specs and testdata/manifests, the f.Add calls and
// testdata/fuzz/<name>/ beside this file (a failing input found goes there).

// FuzzSpecFile: any bytes as a .yaml or .json spec are refused with a
// one-line error, or are a spec that resolves or is refused by Resolve;
// a spec that resolves, written back as JSON, reads and resolves to the
// same spec.
func FuzzSpecFile(f *testing.F) {
	for _, p := range []string{"noisy.yaml", "toolloop.yaml", "agent.yaml", "grid-stall.yaml", "grid-temperature.yaml", "duplicate-key.json", "unknown-key.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "specs", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, strings.HasSuffix(p, ".json"))
	}
	f.Add([]byte(`{"world":"counter","seeds":"0:10","fork_at":"1-3","params":{"p_stall":1e-400}}`), true)
	f.Add([]byte("world: toolloop\nfork_at: 2\ngrid: {temperature: [0, 0.5], p_flaky: [.nan]}\n"), false)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte, isJSON bool) {
		path := filepath.Join(dir, "spec.yaml")
		if isJSON {
			path = filepath.Join(dir, "spec.json")
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSpecFile(path, DefaultSpec())
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a spec error of several lines: %q", err)
			}
			return
		}
		if s.Agent != nil {
			return // an agent's spec resolves against the agent's declaration
		}
		r, err := s.Resolve()
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a resolve error of several lines: %q", err)
			}
			return
		}
		// Written back as JSON (as the manifest keeps it), it reads the same.
		j, err := json.Marshal(r.Spec)
		if err != nil {
			t.Fatalf("a resolved spec does not encode: %v", err)
		}
		back := filepath.Join(dir, "back.json")
		if err := os.WriteFile(back, j, 0o644); err != nil {
			t.Fatal(err)
		}
		s2, err := ReadSpecFile(back, DefaultSpec())
		if err != nil {
			t.Fatalf("the resolved spec %s, written back, does not read: %v", j, err)
		}
		r2, err := s2.Resolve()
		if err != nil {
			t.Fatalf("the resolved spec %s, written back, does not resolve: %v", j, err)
		}
		j2, _ := json.Marshal(r2.Spec)
		if string(j) != string(j2) {
			t.Fatalf("spec round trip:\n%s\n%s", j, j2)
		}
	})
}

// FuzzManifest: any bytes as a results directory's manifest.json — its
// checksum made right, as anyone can — are refused as not results, or
// checked against the directory without a panic; and the SQL views made
// from the world it declares are each one statement DuckDB parses, so
// that nothing a manifest declares (names, enum values, descriptions)
// reaches SQL unquoted. (json_serialize_sql takes SELECT statements only,
// so the view's SELECT is what is parsed: its names are constants.)
func FuzzManifest(f *testing.F) {
	src := filepath.Join("..", "..", "..", "testdata")
	matches, _ := filepath.Glob(filepath.Join(src, "manifests", "*", "manifest.json"))
	for _, p := range matches {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"schema_version":3,"spec":{"world":"counter","seeds":"0:1"},"declaration":{"name":"w","version":"1","features":[{"name":"f","type":"enum","values":["a'b","c"]}]},"files":[{"path":"../../etc/passwd","bytes":1}]}`))
	db, err := duck.Open("")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Manifest
		if json.Unmarshal(b, &m) == nil {
			// Anyone can compute a CRC-32C: the fuzzer's manifests carry
			// the right one, and this build's schema version, so that
			// what follows the checks is reached.
			m.SchemaVersion = schemas.SchemaVersion
			if sum, err := checksumOf(m); err == nil {
				m.Checksum = sum
				if fixed, err := json.Marshal(m); err == nil {
					b = fixed
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			if !errors.Is(err, ErrNotResults) {
				t.Fatalf("a damaged manifest is not ErrNotResults: %v", err)
			}
			return
		}
		Verify(dir, m, true)
		views, err := queries.ViewDefs(m.Declaration)
		if err != nil {
			return
		}
		for _, v := range views {
			var out string
			if err := db.QueryRowContext(context.Background(), "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", v.Select).Scan(&out); err != nil {
				t.Fatalf("view %s: %v", v.Name, err)
			}
			var parsed struct {
				Error      bool              `json:"error"`
				ErrorMsg   string            `json:"error_message"`
				Statements []json.RawMessage `json:"statements"`
			}
			if err := json.Unmarshal([]byte(out), &parsed); err != nil {
				t.Fatalf("view %s: json_serialize_sql: %v", v.Name, err)
			}
			if parsed.Error || len(parsed.Statements) != 1 {
				t.Fatalf("view %s of declaration %+v: %s\n%s", v.Name, m.Declaration, out, v.Select)
			}
		}
	})
}
