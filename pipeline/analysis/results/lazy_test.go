package results_test

import (
	"context"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/queries"
)

// views lists the views the database holds, in name order.
func views(t *testing.T, db *results.DB) string {
	t.Helper()
	tab, err := db.Query(context.Background(), "SELECT '[' || coalesce(string_agg(view_name, ', ' ORDER BY view_name), '') || ']' FROM duckdb_views() WHERE NOT internal")
	if err != nil {
		t.Fatal(err)
	}
	return tab.Rows[0][0].(string)
}

// Open creates no view; a query creates those it names and those they
// read, not the ones its comments or string literals name; SQL creates
// them all, and the queries give what they gave with every view there.
func TestViewsAreCreatedWhenNamed(t *testing.T) {
	ctx := context.Background()
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 300}
	db := resultstest.Open(t, spec)
	steps := []struct{ query, want string }{
		{"SELECT 1 -- FROM pairs, pair_cells", "[]"},
		{"SELECT 'feature_bins' /* tasks */", "[]"},
		{"SELECT count(*) FROM pair_counts", "[pair_counts, pair_rows]"},
		{`SELECT count(*) FROM "pairs"`, "[config_params, configs, pair_counts, pair_rows, pairs, params]"},
	}
	for _, s := range steps {
		if _, err := db.Query(ctx, s.query); err != nil {
			t.Fatalf("%s: %v", s.query, err)
		}
		if got := views(t, db); got != s.want {
			t.Errorf("after %s: views %s, want %s", s.query, got, s.want)
		}
	}
	summary, err := db.Run(ctx, "summary")
	if err != nil {
		t.Fatal(err)
	}
	db.SQL()
	all, err := db.Query(ctx, "SELECT count(*) FROM duckdb_views() WHERE NOT internal")
	if err != nil {
		t.Fatal(err)
	}
	// The 21 of queries.ViewDefs and the report's questions.
	if got, want := results.Int(all.Rows[0][0]), int64(21+len(queries.ReportViews(false))); got != want {
		t.Errorf("after SQL: %d views (%s), want the 21 of queries.ViewDefs and the %d report views", got, views(t, db), want-21)
	}
	again, err := db.Run(ctx, "summary")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := summary.Rows, again.Rows; len(a) != 1 || len(b) != 1 || results.Int(a[0][3]) != 300 || results.Int(b[0][3]) != 300 {
		t.Errorf("summary pairs before and after every view: %v, %v; want 300", a, b)
	}
}
