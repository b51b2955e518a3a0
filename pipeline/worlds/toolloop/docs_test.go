package toolloop_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// docs/worlds.md states toolloop's parameters and numbers; this keeps them
// true: a row per parameter with its type and default, and the arm table
// and separation numbers of testdata/toolloop/golden.json.
func TestDocsMatchTheWorld(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "worlds.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	d := toolloop.Declaration()
	resolved, _ := d.Resolve(nil)
	for _, p := range d.Params {
		row := fmt.Sprintf("| `%s` | %s | %s | ", p.Name, p.Kind, resolved.Text(p.Name))
		if !strings.Contains(doc, row) {
			t.Errorf("docs/worlds.md has no row starting %q", row)
		}
	}
	for _, f := range d.Features {
		if !strings.Contains(doc, fmt.Sprintf("| `%s` | %s", f.Name, f.Kind)) {
			t.Errorf("docs/worlds.md does not list feature %s", f.Name)
		}
	}
	gb, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	n := func(x int) string { // 3,122
		s := fmt.Sprint(x)
		if x >= 1000 {
			s = s[:len(s)-3] + "," + s[len(s)-3:]
		}
		return s
	}
	signed := func(x int) string {
		if x > 0 {
			return "+" + n(x)
		}
		if x < 0 {
			return "−" + n(-x)
		}
		return "0"
	}
	for name, arm := range map[string]string{"on (verify)": "on", "placebo (ping)": "placebo", "aa": "aa", "aa, temperature 0.1": "aa_noisy"} {
		c := g.Tables[arm]
		row := fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", name, n(c["rescued"]), n(c["harmed"]), n(c["clean_harmed"]),
			n(c["unchanged"]), signed(c["rescued"]-c["harmed"]))
		if !strings.Contains(doc, row) {
			t.Errorf("docs/worlds.md has no row %q", row)
		}
	}
	sep := g.Separation
	for _, row := range []string{
		fmt.Sprintf("| oracle: fire exactly on the rescued pairs | %s | 100%% |", n(sep.Oracle)),
		fmt.Sprintf("| best single condition: `%s` | %s | %.1f%% |", sep.Single, n(sep.SingleRescued), 100*float64(sep.SingleRescued)/float64(sep.Oracle)),
		fmt.Sprintf("| best conjunction of two: `%s` | %s | %.1f%% |", sep.Pair, n(sep.PairRescued), 100*float64(sep.PairRescued)/float64(sep.Oracle)),
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("docs/worlds.md has no row %q", row)
		}
	}
}
