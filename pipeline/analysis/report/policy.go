package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// ScopeText says which harms the cap counts: "on clean runs (fault =
// false)", or "on all runs".
func ScopeText(scope string, d world.Declaration) string {
	switch {
	case scope == "all":
		return "on all runs"
	case d.FaultFlag == "":
		return "on clean runs (world " + d.Name + " declares no fault flag, so every harm counts)"
	}
	return "on clean runs (" + d.FaultFlag + " = false)"
}

// cleanText names the runs the harm cap on clean runs counts: "on runs
// without a fault (fault = false)"; every run for a world without a fault
// flag.
func cleanText(d world.Declaration) string {
	if d.FaultFlag == "" {
		return "on any run (world " + d.Name + " declares no fault flag)"
	}
	return "on runs without a fault (" + d.FaultFlag + " = false)"
}

// GroupTitle names a searched configuration and fork step: "config 1
// (p_stall 0.2) · fork step 3"; "fork step 3" for a sweep of one
// configuration.
func GroupTitle(m sweep.Manifest, configID, forkStep int) string {
	t := fmt.Sprintf("fork step %d", forkStep)
	if l := ConfigLabel(m, int64(configID)); l != "" {
		t = l + " · " + t
	}
	return t
}

// Shown lists the candidates the report shows for a group: the chosen one,
// then the baselines (always, never, each feature's best single condition).
func Shown(g *search.Group) []search.Candidate {
	rows := []search.Candidate{g.Chosen}
	for _, b := range g.Baselines {
		if b.Trigger != g.Chosen.Trigger {
			rows = append(rows, b)
		}
	}
	return rows
}

// reported lists the indexes (into world.CostFields) of the cost fields d
// reports.
func reported(d world.Declaration) []int {
	var out []int
	for i, f := range world.CostFields {
		if d.Cost.Reports(f) {
			out = append(out, i)
		}
	}
	return out
}

// WritePolicy prints, for every configuration and fork step searched, the
// chosen trigger and the baselines on both sides of the split, with the
// exact upper bound on the held-out harm rate and the held-out extra cost,
// and, when qini is not nil, the group's uplift (Qini) curve.
func WritePolicy(w io.Writer, r *search.Result, m sweep.Manifest, qini *results.Table) error {
	o := r.Options
	costs := reported(r.World)
	for gi := range r.Groups {
		g := &r.Groups[gi]
		if gi > 0 {
			fmt.Fprintln(w)
		}
		title := GroupTitle(m, g.ConfigID, g.ForkStep)
		if g.Skipped != "" {
			fmt.Fprintf(w, "POLICY SEARCH · %s: skipped, %s\n", title, g.Skipped)
			continue
		}
		fmt.Fprintf(w, "POLICY SEARCH · arm on · %s (cap: at most %s %s; %d search / %d held-out pairs, %.0f%% of %s held out)\n",
			title, plural.Count(int64(o.MaxHarm), "harm"), ScopeText(o.Scope, r.World), g.Chosen.Search.Pairs, g.Chosen.Holdout.Pairs, 100*o.Holdout, Runs(m))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := "trigger\tcap\tsearch fires\trescued\tharmed\tharmed clean\tnet\theld-out fires\trescued\tharmed\tharmed clean\tnet\tharm rate ≤ (95%)"
		for _, i := range costs {
			head += "\textra " + world.CostFields[i]
		}
		fmt.Fprintln(tw, head)
		for i, c := range Shown(g) {
			name := c.Trigger
			if i == 0 {
				name = "▶ " + name + " (chosen)"
			}
			capOK := "ok"
			if !c.WithinCap {
				capOK = "over"
			}
			line := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d\t%+d\t%d\t%d\t%d\t%d\t%+d\t%s", name, capOK,
				c.Search.Fires, c.Search.Rescued, c.Search.Harmed, c.Search.HarmedClean, c.Search.Net(),
				c.Holdout.Fires, c.Holdout.Rescued, c.Holdout.Harmed, c.Holdout.HarmedClean, c.Holdout.Net(),
				PctUp(c.Holdout.HarmUpper()))
			for _, k := range costs {
				line += "\t" + CostTotalSigned(k, zeroNaN(c.Holdout.Extra[k]))
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, wrap(fmt.Sprintf("%d candidate triggers (single conditions and conjunctions of two); shown: the chosen one, always, never, and each feature's best single condition. "+
			"fires: the pairs the trigger fires on; harmed clean: its harms %s, what the cap on clean runs (--harm-scope clean, the default) counts; harm rate ≤: the exact (Clopper–Pearson) 95%% upper bound on its held-out harm rate; "+
			"extra cost: held-out, summed over the pairs it fires on.", len(g.Candidates), cleanText(r.World)), 100))
		if qini != nil {
			if err := writeQini(w, qini, m, g.ConfigID, g.ForkStep); err != nil {
				return err
			}
		}
	}
	return nil
}

func zeroNaN(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// QiniRows returns the rows of qini.sql of one configuration and fork step.
func QiniRows(t *results.Table, configID, forkStep int) []results.Row {
	var out []results.Row
	for _, r := range t.Records() {
		if r.Int("config_id") == int64(configID) && r.Int("fork_step") == int64(forkStep) {
			out = append(out, r)
		}
	}
	return out
}

// QiniCaption explains the Qini coefficient of a curve.
func QiniCaption(q float64) string {
	return fmt.Sprintf("Qini coefficient %s: the area between the curve and random firing (random_net), with both axes as shares of the held-out pairs; 0 is no better than random, positive means the score fires on rescues before harms.", Format(q))
}

func writeQini(w io.Writer, t *results.Table, m sweep.Manifest, configID, forkStep int) error {
	rows := QiniRows(t, configID, forkStep)
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nUPLIFT (QINI) CURVE · arm on · %s: held-out pairs fired best-scored first (score: the net rate of the pair's feature buckets on the search %s; random_net: the net of firing as many pairs at random)\n", GroupTitle(m, configID, forkStep), Runs(m))
	out := &results.Table{Columns: []string{"fired", "pairs fired", "rescued", "harmed", "net", "random_net"}}
	for _, r := range rows {
		out.Rows = append(out.Rows, []any{fmt.Sprintf("%.0f%%", 100*r.Float("fire_rate")), r.Int("fired"),
			Num(r.Float("rescued")), Num(r.Float("harmed")), Signed(r.Float("net")), Num(r.Float("random_net"))})
	}
	if err := WriteTable(w, out); err != nil {
		return err
	}
	fmt.Fprintln(w, wrap(QiniCaption(rows[0].Float("qini")), 100))
	return nil
}

// ruleText is a rule as the Result paragraph writes it.
func ruleText(c search.Candidate) string {
	return strings.TrimSpace(c.Rule.String())
}

// Runs names what the sweep's population is made of, as the report's
// lines about its split say it: "seeds", or "runs" for a recorded
// population (split by run, docs/recorded-runs.md).
func Runs(m sweep.Manifest) string {
	if m.Spec.Runs != nil {
		return "runs"
	}
	return "seeds"
}
