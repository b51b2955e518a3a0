package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/forklab/forklab/pipeline/analysis/search"
)

// WritePolicy prints the chosen trigger and the baselines on both sides of
// the split, with the exact upper bound on the held-out harm rate.
func WritePolicy(w io.Writer, r *search.Result) error {
	o := r.Options
	fmt.Fprintf(w, "POLICY SEARCH (arm on; cap: at most %d harms on %s runs; %d search / %d held-out pairs, %.0f%% of seeds held out)\n",
		o.MaxHarm, map[string]string{"clean": "clean", "all": "all"}[o.Scope], r.Chosen.Search.Pairs, r.Chosen.Holdout.Pairs, 100*o.Holdout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "trigger\tcap\tsearch fires\trescued\tharmed\tharmed clean\tnet\theld-out fires\trescued\tharmed\tharmed clean\tnet\tharm rate ≤ (95%)")
	rows := []search.Candidate{r.Chosen}
	for _, b := range r.Baselines {
		if b.Trigger != r.Chosen.Trigger {
			rows = append(rows, b)
		}
	}
	for i, c := range rows {
		name := c.Trigger
		if i == 0 {
			name = "▶ " + name + " (chosen)"
		}
		capOK := "ok"
		if !c.WithinCap {
			capOK = "over"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%+d\t%d\t%d\t%d\t%d\t%+d\t%s\n", name, capOK,
			c.Search.Fires, c.Search.Rescued, c.Search.Harmed, c.Search.HarmedClean, c.Search.Net(),
			c.Holdout.Fires, c.Holdout.Rescued, c.Holdout.Harmed, c.Holdout.HarmedClean, c.Holdout.Net(),
			PctUp(c.Holdout.HarmUpper()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d candidate triggers; baselines: always, never, and each feature's best single condition.\n", len(r.Candidates))
	return nil
}
