package schemas_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/schemas"
)

// Every fixed column of every table is named in README.md, in its
// table's section, with its type.
func TestReadmeNamesEveryColumn(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	section := func(name string) string {
		i := strings.Index(readme, "\n## "+name+"\n")
		if i < 0 {
			t.Fatalf("README.md has no section %q", name)
		}
		rest := readme[i+len(name)+5:]
		if j := strings.Index(rest, "\n## "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	d := world.Declaration{}
	for _, tc := range []struct {
		table string
		cols  []schemas.Column
	}{
		{"configs", schemas.Configs()}, {"params", schemas.Params()},
		{"tasks", schemas.Tasks(d)}, {"checkpoints", schemas.Checkpoints(d)},
		{"branches", schemas.Branches(d)}, {"pairs", schemas.Pairs(d)},
	} {
		sec := section(tc.table)
		for _, c := range tc.cols {
			if !regexp.MustCompile(`\| ([a-z_]+, )*` + c.Name + `(, [a-z_]+)* \|`).MatchString(sec) {
				t.Errorf("README.md section %s does not name column %s", tc.table, c.Name)
			}
		}
	}
}
