package queries

import (
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// Views is one CREATE OR REPLACE VIEW statement per view of ViewDefs, in
// order, each after a comment naming it; the base views, and only they,
// read files.
func TestViewsText(t *testing.T) {
	d := counter.Declaration()
	defs, err := ViewDefs(d)
	if err != nil {
		t.Fatal(err)
	}
	text, err := Views(d)
	if err != nil {
		t.Fatal(err)
	}
	stmts := Split(text)
	if len(stmts) != len(defs) {
		t.Fatalf("%d statements for %d views", len(stmts), len(defs))
	}
	for i, v := range defs {
		if !strings.Contains(stmts[i], "-- "+v.Name+": ") || !strings.Contains(stmts[i], "CREATE OR REPLACE VIEW "+v.Name+" AS\n") {
			t.Errorf("statement %d is not view %s:\n%.200s", i, v.Name, stmts[i])
		}
		if reads := strings.Contains(v.Select, "read_parquet(") || strings.Contains(v.Select, "parquet_metadata("); reads != v.Base {
			t.Errorf("view %s: reads files %v, base %v", v.Name, reads, v.Base)
		}
	}
	// The counter's declared names appear, quoted, in the generated views.
	for _, want := range []string{`p."same_obs"`, `"budget_left"`, `'p_stall'`, `"hidden_fault"`} {
		if !strings.Contains(text, want) {
			t.Errorf("views lack %s", want)
		}
	}
}
