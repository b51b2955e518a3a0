package results_test

import (
	"context"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// On a 17-seed A/A sweep nothing is harmed, and the report's interval for
// the harm rate starts at 0 exactly: wilson_lo(0, 17) was 1.39e-17, so
// WHERE harm_lo > 0 called a zero-harm arm significant (issue 12 C). Every
// interval of summary and slices holds its estimate.
func TestAAIntervalsAtZero(t *testing.T) {
	s := sweep.DefaultSpec()
	s.Seeds = sweep.Range{Start: 0, End: 17}
	s.Arms = []fork.Arm{fork.Off, fork.AA}
	db := resultstest.Open(t, s)
	ctx := context.Background()
	if err := db.AddReportViews(ctx); err != nil {
		t.Fatal(err)
	}
	sum, err := db.Query(ctx, "SELECT pairs, harmed, harm_rate, harm_lo, rescue_lo, flip_lo, net_lo, net_hi, mcnemar_p FROM summary WHERE arm = 'aa'")
	if err != nil {
		t.Fatal(err)
	}
	rs := sum.Records()
	if len(rs) != 1 {
		t.Fatalf("summary has %d aa rows", len(rs))
	}
	r := rs[0]
	if r.Int("pairs") != 17 || r.Int("harmed") != 0 || r.Float("harm_rate") != 0 || r["harm_lo"] != 0.0 ||
		r["rescue_lo"] != 0.0 || r["flip_lo"] != 0.0 || r["mcnemar_p"] != 1.0 {
		t.Errorf("A/A over 17 seeds: %v; want 17 pairs, no harm, harm_lo, rescue_lo and flip_lo exactly 0, McNemar's p exactly 1", r)
	}
	if r.Float("net_lo") >= 0 || r.Float("net_hi") <= 0 {
		t.Errorf("net interval of an arm that flips nothing: [%v, %v], want it around 0", r["net_lo"], r["net_hi"])
	}
	for _, q := range []string{
		"SELECT count(*) FROM summary WHERE NOT (net_lo <= net_rate AND net_rate <= net_hi AND rescue_lo <= rescue_rate AND rescue_rate <= rescue_hi AND harm_lo <= harm_rate AND harm_rate <= harm_hi AND flip_lo <= flip_rate AND flip_rate <= flip_hi AND mcnemar_p BETWEEN 0 AND 1)",
		"SELECT count(*) FROM slices WHERE NOT (net_lo <= net_rate AND net_rate <= net_hi AND rescue_lo <= rescued / pairs AND rescued / pairs <= rescue_hi AND harm_lo <= harmed / pairs AND harmed / pairs <= harm_hi AND mcnemar_p BETWEEN 0 AND 1)",
		"SELECT count(*) FROM slices WHERE (harmed = 0) <> (harm_lo = 0) OR (rescued = 0) <> (rescue_lo = 0) OR (harmed = pairs) <> (harm_hi = 1)",
	} {
		tab, err := db.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if n := tab.Records()[0].Int("count_star()"); n != 0 {
			t.Errorf("%d rows break: %s", n, q)
		}
	}
}
