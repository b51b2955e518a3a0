package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/forklab/forklab/"

// TestStreamNeverImportsPipeline parses every Go file under stream/, tests
// included, and fails on an import of pipeline/.
func TestStreamNeverImportsPipeline(t *testing.T) {
	checked := 0
	err := filepath.WalkDir("../../stream", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module+"pipeline/") || p == module+"pipeline" {
				t.Errorf("%s imports %s: the log must not depend on the lab; move what both use to internal/", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files under stream/: the walk is broken", checked)
	}
}
