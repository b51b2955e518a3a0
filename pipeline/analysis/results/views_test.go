package results_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/analysistest"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/queries"
)

func rows(t *testing.T, db *results.DB, q string) string {
	t.Helper()
	tab, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return fmt.Sprint(tab.Rows)
}

// The views follow the declaration of whatever world made the sweep: a
// toolloop sweep has every declared feature in features, every hidden field
// in hidden, the catalog in declaration order with enum values, the world's
// parameters as typed columns of pairs, and the cost fields the world does
// not report (usd, seconds), which its files leave out, as NULL columns.
func TestViewsFollowTheDeclaration(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.World, spec.ForkAt, spec.Params = "toolloop", []int{2}, world.Params{}
	spec.Seeds = sweep.Range{Start: 0, End: 200}
	spec.Arms = []fork.Arm{fork.Off, fork.On}
	db := resultstest.Open(t, spec)
	d := db.Manifest.Declaration

	var want []string
	for _, f := range d.Features {
		want = append(want, fmt.Sprintf("[%s 200]", f.Name))
	}
	sort.Strings(want)
	if got := rows(t, db, "SELECT feature, count(*) FROM features GROUP BY ALL ORDER BY feature"); got != "["+strings.Join(want, " ")+"]" {
		t.Errorf("features view: %s, want %v", got, want)
	}
	if got := rows(t, db, "SELECT count(DISTINCT feature), count(*) FROM hidden"); got != fmt.Sprintf("[[%d %d]]", len(d.Hidden), 200*len(d.Hidden)) {
		t.Errorf("hidden view: %s", got)
	}
	if got := rows(t, db, "SELECT feature_order, feature, type FROM feature_catalog WHERE feature_order = 1"); got != "[[1 last_outcome enum]]" {
		t.Errorf("catalog: %s", got)
	}
	if got := rows(t, db, "SELECT enum_values FROM feature_catalog WHERE type = 'enum'"); got != "[[[none fresh repeated error]]]" {
		t.Errorf("enum values: %s", got)
	}
	if got := rows(t, db, "SELECT typeof(p_fault), typeof(max_turns), count(*) FROM pairs GROUP BY ALL"); got != "[[DOUBLE BIGINT 200]]" {
		t.Errorf("parameters as columns of pairs: %s", got)
	}
	if got := rows(t, db, "SELECT count(extra_tokens), count(extra_usd), count(extra_seconds), count(error) FROM pairs"); got != "[[200 0 0 0]]" {
		t.Errorf("reported and left-out columns: %s", got)
	}
	if got := rows(t, db, "SELECT count(cost_usd), count(details), count(cost_tokens) FROM branches"); got != "[[0 0 400]]" {
		t.Errorf("branches' left-out columns: %s", got)
	}
	// The value_text of a float is its shortest text, of an int its digits.
	if got := rows(t, db, "SELECT bool_and(value_text = CAST(value_num AS VARCHAR) OR type <> 'float' OR value_num <> trunc(value_num)) FROM features"); got != "[[true]]" {
		t.Errorf("value_text: %s", got)
	}
	if got := rows(t, db, "SELECT count(*) FROM features WHERE type = 'int' AND value_text <> CAST(CAST(value_num AS BIGINT) AS VARCHAR)"); got != "[[0]]" {
		t.Errorf("int value_text: %s", got)
	}
}

// queries.Views fails, naming the problem, for a declaration that is not
// valid, and quotes every declared name.
func TestViewsOfBadDeclaration(t *testing.T) {
	if _, err := queries.Views(world.Declaration{Name: "x", Version: "1"}); err == nil || !strings.Contains(err.Error(), "declares no features") {
		t.Errorf("got %v", err)
	}
}

// Materialize reads the pairs once; another holdout recomputes the split.
func TestMaterializeHoldout(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	ctx := context.Background()
	for _, holdout := range []float64{0.3, 0.5, 0.3} {
		if err := db.Materialize(ctx, holdout); err != nil {
			t.Fatal(err)
		}
		held := 0
		for seed := int64(0); seed < 300; seed++ {
			if analysistest.HeldOut(seed, holdout) {
				held++
			}
		}
		want := fmt.Sprintf("[[holdout %d] [search %d]]", held, 300-held)
		if got := rows(t, db, "SELECT split, sum(n)::BIGINT FROM pair_cells GROUP BY ALL ORDER BY ALL"); got != want {
			t.Errorf("holdout %v: %s, want %s", holdout, got, want)
		}
	}
	if err := db.Materialize(ctx, 1); err == nil {
		t.Error("holdout 1 accepted")
	}
}

// The pass Materialize runs (queries.PairGroups, narrow ints grouped as
// integers) counts the same cells as the view pair_groups does (a CASE per
// row), for a world with narrow ints, wide ints and a float.
func TestMaterializedPassEqualsView(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.World, spec.ForkAt, spec.Params = "toolloop", []int{2}, world.Params{}
	spec.Seeds = sweep.Range{Start: 0, End: 600}
	db := resultstest.Open(t, spec)
	view := rows(t, db, "SELECT * EXCLUDE (n), n FROM main.pair_groups ORDER BY ALL")
	cells := rows(t, db, "SELECT * FROM main.pair_cells ORDER BY ALL")
	if err := db.Materialize(context.Background(), 0.3); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db, "SELECT * EXCLUDE (n), n FROM temp.pair_groups ORDER BY ALL"); got != view {
		t.Errorf("materialised pair_groups differs from the view")
	}
	if got := rows(t, db, "SELECT * FROM temp.pair_cells ORDER BY ALL"); got != cells {
		t.Errorf("materialised pair_cells differs from the view")
	}
	if got := rows(t, db, "SELECT count(*) FILTER (WHERE small), count(*) FILTER (WHERE NOT small) FROM feature_ranges"); got != "[[6 2]]" {
		t.Errorf("toolloop's narrow and wide ints: %s", got)
	}
}
