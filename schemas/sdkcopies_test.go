package schemas

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each SDK bundles copies of agent-protocol/*.schema.json, against which it
// checks its own replies (sdk/node/schemas/agent-protocol,
// sdk/python/forklab_agent/schemas, and any other directory named
// agent-protocol under sdk/): a copy that differs from
// its source, a schema missing from a copy and a copy of no schema each
// fail, naming the command that re-syncs them.
func TestSDKSchemaCopies(t *testing.T) {
	src, err := fs.Glob(AgentProtocol, "agent-protocol/*.schema.json")
	if err != nil || len(src) == 0 {
		t.Fatalf("no schemas in agent-protocol: %v", err)
	}
	var dirs []string
	err = filepath.WalkDir("../sdk", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if d.IsDir() && (d.Name() == "agent-protocol" || filepath.ToSlash(path) == "../sdk/python/forklab_agent/schemas") {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sdk := range []string{"node/schemas/agent-protocol", "python/forklab_agent/schemas"} {
		if !slices.Contains(dirs, filepath.Join("..", "sdk", filepath.FromSlash(sdk))) {
			t.Fatalf("no sdk/%s among the SDKs' copies %v", sdk, dirs)
		}
	}
	const fix = "run make sdk-schemas to copy schemas/agent-protocol into every SDK"
	for _, dir := range dirs {
		rel := strings.TrimPrefix(filepath.ToSlash(dir), "../")
		copies, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, c := range copies {
			have[filepath.Base(c)] = true
		}
		for _, s := range src {
			name := filepath.Base(s)
			want, _ := fs.ReadFile(AgentProtocol, s)
			got, err := os.ReadFile(filepath.Join(dir, name))
			switch {
			case err != nil:
				t.Errorf("%s/%s: missing: %s", rel, name, fix)
			case !bytes.Equal(got, want):
				t.Errorf("%s/%s differs from schemas/agent-protocol/%s: %s", rel, name, name, fix)
			}
			delete(have, name)
		}
		for name := range have {
			t.Errorf("%s/%s is a copy of no schema in schemas/agent-protocol: %s", rel, name, fix)
		}
	}
}
