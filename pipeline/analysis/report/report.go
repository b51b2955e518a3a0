// Package report turns a results directory into the text report forklab
// prints, every number read through DuckDB from the embedded queries, for
// any world: per configuration, fork step and treatment arm a headline
// (rescued, harmed, unchanged, net, with the interval, McNemar's p, the
// mean cost against off and the cost per net rescue), the slices by every
// pre-decision feature the world declares, for noisy sweeps how counts and
// intervals move with replicas and seeds, the guard policy search of every
// configuration and fork step with its held-out check and uplift (Qini)
// curve, and a closing "Result" paragraph written from the numbers.
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// Sections is everything Write prints, for other renderers (the HTML report).
type Sections struct {
	Summary     *results.Table
	Slices      *results.Table
	Costs       *results.Table
	Convergence *results.Table // nil unless the sweep is noisy
	Search      *search.Result // nil when there is no arm on
	SearchNote  string         // why Search is nil
	Qini        *results.Table // every searched configuration and fork step
	Result      []string       // paragraphs
	// World is the sweep's world.
	World world.Declaration
	// Examples are a few rescued and harmed pairs of every slice and
	// their views: nil unless CollectExamples ran (the HTML report).
	Examples *Examples
}

// Noisy reports whether a sweep's replicas can differ: a model with
// temperature above zero in any configuration.
func Noisy(db *results.DB) bool {
	for _, c := range db.Manifest.Configs {
		if c.Model.Temperature > 0 {
			return true
		}
	}
	return db.Manifest.Spec.Replicas > 1
}

// Collect runs every query the report needs. The pairs are read once
// (results.DB.Materialize); every query reads the small table of cells.
func Collect(ctx context.Context, db *results.DB) (*Sections, error) {
	s := &Sections{World: db.Manifest.Declaration}
	opt := search.Defaults()
	if err := db.Materialize(ctx, opt.Holdout); err != nil {
		return nil, err
	}
	var err error
	for _, q := range []struct {
		name string
		t    **results.Table
	}{{"summary", &s.Summary}, {"slices", &s.Slices}, {"costs", &s.Costs}} {
		if *q.t, err = db.Run(ctx, q.name); err != nil {
			return nil, err
		}
	}
	if Noisy(db) {
		if s.Convergence, err = db.Run(ctx, "convergence"); err != nil {
			return nil, err
		}
	}
	s.Search, err = search.Run(ctx, db, opt)
	if errors.Is(err, search.ErrInput) {
		s.Search, s.SearchNote = nil, strings.TrimPrefix(err.Error(), search.ErrInput.Error()+": ")
	} else if err != nil {
		return nil, err
	} else if s.Qini, err = search.Qini(ctx, db, opt); err != nil {
		return nil, err
	}
	s.Result = resultParagraphs(s, db.Manifest)
	return s, nil
}

// Write prints the report of the results in db to w.
func Write(ctx context.Context, w io.Writer, db *results.DB) error {
	s, err := Collect(ctx, db)
	if err != nil {
		return err
	}
	return WriteSections(w, db, s)
}

// WriteSections prints the report of already collected sections s of the
// results in db to w.
func WriteSections(w io.Writer, db *results.DB, s *Sections) error {
	writeHeader(w, db)
	fmt.Fprintln(w, wrap(Legend+" "+FlipLegend, 100))
	fmt.Fprintln(w)
	writeHeadlines(w, db, s, false)
	fmt.Fprintln(w, SlicesTitle(s.World))
	if err := writeSlices(w, s.Slices, s.World.Score != nil); err != nil {
		return err
	}
	if s.Convergence != nil {
		fmt.Fprintln(w, "\nREPLICAS AND SEEDS (majority of the first k replicas; first n seeds)")
		if err := WriteTable(w, project(s.Convergence, "config_id", "fork_step", "arm", "replicas_voted", "seeds",
			"rescued", "harmed", "net", "net_rate", "net_lo", "net_hi", "ci_width", "mcnemar_p")); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if s.Search != nil {
		if err := WritePolicy(w, s.Search, db.Manifest, s.Qini); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "POLICY SEARCH skipped: %s\n", s.SearchNote)
	}
	writeResult(w, s)
	return nil
}

// WriteBrief prints the short form of the report, to be read in one
// screen (issue 26: make sweep printed 111 lines): the header, the legend,
// each arm's counts and significance in two lines, and the Result
// paragraphs (without the in-sample sentence, which the policy arm's
// headline says in a line of its own); the tables, rates and costs are in the whole report
// (forklab report DIR) and its HTML page. forklab report --brief; make
// sweep prints the rerun's report so.
func WriteBrief(w io.Writer, db *results.DB, s *Sections) error {
	writeBriefHeader(w, db)
	fmt.Fprintln(w, wrap(Legend, 80))
	fmt.Fprintln(w)
	writeHeadlines(w, db, s, true)
	fmt.Fprintln(w, "RESULT")
	inSample := inSampleSentence(db.Manifest.Spec)
	for _, p := range s.Result {
		if inSample != "" {
			p = strings.Replace(p, inSample, "", 1)
		}
		fmt.Fprintln(w, wrap(p, 80))
		fmt.Fprintln(w)
	}
	return nil
}

// Legend explains the words of every headline the first time a report
// shows them (issue 26: "sure things", "lost causes" and "flip rate" were
// never explained on screen).
const Legend = "A pair: one checkpoint finished with off and with the arm. " +
	"rescued: off fails, the arm succeeds; harmed: the reverse; unchanged: both succeed (sure things) or both fail (lost causes); " +
	"net = rescued − harmed."

// FlipLegend explains the rates of the whole report's headlines.
const FlipLegend = "net rate, rescue, harm and flip rate: net, rescued, harmed and both (the discordant pairs, which McNemar's test reads) over the pairs."

// writeBriefHeader is writeHeader within 80 columns: the arms are in the
// headlines, and one replica goes without saying.
func writeBriefHeader(w io.Writer, db *results.DB) {
	m := db.Manifest
	fmt.Fprintf(w, "forklab report · %s · world %s %s · seeds %s · fork at %s", db.Dir, m.Declaration.Name, m.Declaration.Version, m.Spec.Seeds, List(m.Spec.ForkAt))
	if m.Spec.Replicas > 1 {
		fmt.Fprintf(w, " · replicas %d", m.Spec.Replicas)
	}
	if len(m.Configs) > 1 {
		fmt.Fprintf(w, " · %d configurations", len(m.Configs))
	}
	fmt.Fprintln(w)
	writeWarnings(w, m)
}

func writeHeader(w io.Writer, db *results.DB) {
	m := db.Manifest
	fmt.Fprintf(w, "forklab report · %s · world %s %s · %s · fork at %s · arms %s · replicas %d",
		db.Dir, m.Declaration.Name, m.Declaration.Version, m.Spec.PopulationText(), List(m.Spec.ForkAt), List(m.Spec.Arms), m.Spec.Replicas)
	if len(m.Configs) > 1 {
		fmt.Fprintf(w, " · %d configurations", len(m.Configs))
	}
	fmt.Fprintln(w)
	writeWarnings(w, m)
}

// writeWarnings writes the header's lines under its first: the parameters
// set away from the defaults, and the incomplete-sweep and replicas
// warnings, those that apply.
func writeWarnings(w io.Writer, m sweep.Manifest) {
	if line := ParamsLine(m); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := IncompleteLine(m); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := ReplicasLine(m); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := sweep.PolicyAnywhereLine(m.Spec, m.Declaration, m.Configs); line != "" {
		fmt.Fprintln(w, wrap(line, 100))
	}
}

// ReplicasLine is the warning a report of a nondeterministic world swept
// with one replica, or an even number, carries under its header: the
// warning forklab sweep printed (sweep.ReplicasWarning), read from the
// manifest so that whoever reads the report later sees it too; "" when
// there is nothing to say.
func ReplicasLine(m sweep.Manifest) string {
	if w := sweep.ReplicasWarning(m.Declaration, m.Spec.Replicas); w != "" {
		return "WARNING: " + w
	}
	return ""
}

// IncompleteLine is the warning a report of an incomplete sweep (more
// error pairs than its max_error_rate: forklab sweep exited 5) starts
// with, as forklab sweep words it; "" for a complete sweep. A few error
// pairs within the rate are only counted, beside each headline.
func IncompleteLine(m sweep.Manifest) string {
	if !m.Incomplete {
		return ""
	}
	return fmt.Sprintf("INCOMPLETE: %s, not labels, above the sweep's --max-error-rate %g%%: "+
		"the numbers below count only the other %d; fix the cause and run the same sweep with --resume (only the units with errors are played again)",
		m.ErrorsText(), 100*m.MaxErrorRate, m.Rows["pairs"]-m.Errors)
}

// ParamsLine names what a one-configuration sweep set away from the
// world's defaults, and a noisy model: "temperature 0.1 · p_stall 0.2"; ""
// when nothing was.
func ParamsLine(m sweep.Manifest) string {
	if len(m.Configs) != 1 {
		return ""
	}
	c := m.Configs[0]
	var parts []string
	if c.Model.Temperature > 0 {
		parts = append(parts, fmt.Sprintf("temperature %g", c.Model.Temperature))
	}
	for _, p := range m.Declaration.Params {
		if def, err := p.Parse(p.Default); err == nil && fmt.Sprint(def) != fmt.Sprint(c.Params[p.Name]) {
			parts = append(parts, p.Name+" "+c.Params.Text(p.Name))
		}
	}
	return strings.Join(parts, " · ")
}

func writeHeadlines(w io.Writer, db *results.DB, s *Sections, brief bool) {
	costs := s.Costs.Records()
	for _, r := range s.Summary.Records() {
		config, sample := ConfigLabel(db.Manifest, r.Int("config_id")), SampleTag(db.Manifest, r)
		if brief {
			writeBriefHeadline(w, r, config, sample)
			continue
		}
		writeHeadline(w, r, config, CostsOf(costs, r), sample)
	}
}

// SampleTag is what stands beside the policy arm's headline: whether its
// seeds are those its rule was searched on (sweep.PolicySample); "" for
// other arms.
func SampleTag(m sweep.Manifest, r results.Row) string {
	if r.Str("arm") != "policy" {
		return ""
	}
	return sweep.PolicySample(m.Spec)
}

func writeResult(w io.Writer, s *Sections) {
	fmt.Fprintln(w, "\nRESULT")
	for _, p := range s.Result {
		fmt.Fprintln(w, wrap(p, 80))
		fmt.Fprintln(w)
	}
}

// ConfigLabel names configuration id of a grid sweep by its grid values,
// "config 1 (p_stall 0.2, temperature 0)"; "" for a sweep without a grid.
func ConfigLabel(m sweep.Manifest, id int64) string {
	if len(m.Configs) <= 1 || id < 0 || int(id) >= len(m.Configs) {
		return ""
	}
	keys := make([]string, 0, len(m.Spec.Grid))
	for k := range m.Spec.Grid {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c := m.Configs[id]
	parts := make([]string, len(keys))
	for i, k := range keys {
		switch k {
		case "temperature":
			parts[i] = fmt.Sprintf("%s %g", k, c.Model.Temperature)
		case "no_tool":
			parts[i] = fmt.Sprintf("%s %g", k, c.Model.NoTool)
		default:
			parts[i] = k + " " + c.Params.Text(k)
		}
	}
	return fmt.Sprintf("config %d (%s)", id, strings.Join(parts, ", "))
}

// headlineTitle writes an arm's first line: "on vs off · fork step 3 ·
// 300 pairs", with the configuration and the errored pairs if any, and
// under it the policy arm's in-sample or out-of-sample line (sample).
func headlineTitle(w io.Writer, r results.Row, config, sample string) {
	suffix := ""
	if config != "" {
		suffix = " · " + config
	}
	fmt.Fprintf(w, "%s vs off · fork step %d%s · %s", r.Str("arm"), r.Int("fork_step"), suffix, plural.Count(r.Int("pairs"), "pair"))
	if e := r.Int("errors"); e > 0 {
		fmt.Fprintf(w, " (and %s that errored, not labelled)", plural.Count(e, "pair"))
	}
	fmt.Fprintln(w)
	if sample != "" {
		fmt.Fprintf(w, "  %s\n", sample)
	}
}

// writeBriefHeadline writes an arm's headline in three lines: the title,
// the counts, and the net rate with its interval and McNemar's p (and the
// score line of a world that declares a score, the sample line of the
// policy arm).
func writeBriefHeadline(w io.Writer, r results.Row, config, sample string) {
	headlineTitle(w, r, config, sample)
	if r.Int("pairs") == 0 {
		fmt.Fprintf(w, "  no labelled pair (every pair errored)\n\n")
		return
	}
	fmt.Fprintf(w, "  rescued %d   harmed %d   unchanged %d   net %+d\n", r.Int("rescued"), r.Int("harmed"), r.Int("unchanged"), r.Int("net"))
	fmt.Fprintf(w, "  net rate %s (95%% CI %s to %s, Newcombe) · McNemar exact p %s\n",
		Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")), PEquals(r.Float("mcnemar_p")))
	if line := ScoreLine(r); line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintln(w)
}

func writeHeadline(w io.Writer, r results.Row, config string, costs []results.Row, sample string) {
	headlineTitle(w, r, config, sample)
	if r.Int("pairs") == 0 {
		fmt.Fprintf(w, "  no labelled pair: rates, intervals and McNemar's test are %s (every pair errored)\n", NA)
		if line := CostLine(costs); line != "" {
			fmt.Fprintf(w, "  %s\n", line)
		}
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "  rescued %d   harmed %d   unchanged %d   net %+d\n", r.Int("rescued"), r.Int("harmed"), r.Int("unchanged"), r.Int("net"))
	fmt.Fprintf(w, "  sure things %d · lost causes %d · net rate %s (95%% CI %s to %s, Newcombe) · McNemar exact p %s on %d discordant pairs\n",
		r.Int("sure_thing"), r.Int("lost_cause"), Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")),
		PEquals(r.Float("mcnemar_p")), r.Int("rescued")+r.Int("harmed"))
	fmt.Fprintf(w, "  rescue rate %s [%s, %s] · harm rate %s [%s, %s] · flip rate %s [%s, %s] (Wilson 95%%)\n",
		Pct(r.Float("rescue_rate")), Pct(r.Float("rescue_lo")), Pct(r.Float("rescue_hi")),
		Pct(r.Float("harm_rate")), Pct(r.Float("harm_lo")), Pct(r.Float("harm_hi")),
		Pct(r.Float("flip_rate")), Pct(r.Float("flip_lo")), Pct(r.Float("flip_hi")))
	if line := ScoreLine(r); line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if line := CostLine(costs); line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintln(w)
}

// SlicesTitle is the slices table's title in the text report: what each
// column holds, and which p-value to read when many slices are tested at
// once (the Holm-adjusted one).
func SlicesTitle(d world.Declaration) string {
	t := "SLICES (every pre-decision feature, by value or by quantile bucket; net rate with Newcombe 95% CI; " +
		"McNemar exact p, and p adj: Holm-adjusted over the slices of each arm, the one to read with this many slices"
	if d.Score != nil {
		t += "; mean score difference with paired t 95% CI; Wilcoxon signed-rank p, and its Holm-adjusted p adj"
	}
	return t + ")"
}

// ScoreLine is a headline's graded-outcome line for a world that declares
// a score: "score: mean paired difference +0.0421 (95% CI +0.031 to
// +0.0532, paired t) · Wilcoxon signed-rank p = 0.003 on 412 nonzero
// differences"; "" for a pass/fail world.
func ScoreLine(r results.Row) string {
	if r["mean_score_diff"] == nil {
		return ""
	}
	l := "score: mean paired difference " + ScoreSigned(r.Float("mean_score_diff"))
	if r["score_diff_lo"] != nil {
		l += fmt.Sprintf(" (95%% CI %s to %s, paired t)", ScoreSigned(r.Float("score_diff_lo")), ScoreSigned(r.Float("score_diff_hi")))
	}
	if n := r.Int("wilcoxon_n"); n > 0 {
		l += fmt.Sprintf(" · Wilcoxon signed-rank p %s on %s", PEquals(r.Float("wilcoxon_p")), plural.Count(n, "nonzero difference"))
	} else {
		l += " · every difference is 0: no Wilcoxon test"
	}
	return l
}

// ScoreSigned formats a score difference with its sign and three
// significant digits: +0.0421, -0.29, +1.5, 0.
func ScoreSigned(x float64) string {
	if !finite(x) {
		return NA
	}
	if x == 0 {
		return "0"
	}
	s := strconv.FormatFloat(x, 'g', 3, 64)
	if strings.Contains(s, "e") {
		s = strconv.FormatFloat(x, 'f', -1, 64)
		if r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64); err == nil {
			s = strconv.FormatFloat(r, 'f', -1, 64)
		}
	}
	if x > 0 {
		s = "+" + s
	}
	return s
}

// CostsOf returns the rows of costs.sql for summary row r's configuration,
// fork step and arm; none for the A/A arm, which is off again: what it
// "costs" against off is noise, and a cost per net rescue of it would read
// as a price of nothing (issue 26).
func CostsOf(costs []results.Row, r results.Row) []results.Row {
	if r.Str("arm") == "aa" {
		return nil
	}
	var out []results.Row
	for _, c := range costs {
		if c.Int("config_id") == r.Int("config_id") && c.Int("fork_step") == r.Int("fork_step") && c.Str("arm") == r.Str("arm") {
			out = append(out, c)
		}
	}
	return out
}

// CostLine says what an arm costs, one cost field after another, each
// naming its unit: "cost: 4.49 steps per branch against off's 4.38 (+0.11
// per run), +0.5 steps per net rescue; 552.00 seconds per branch against
// off's 549.00 (+3.00 per run), +27.00 seconds per net rescue". Without a
// net rescue (the same for every field) it says so once, at the end. ""
// without cost rows.
func CostLine(rows []results.Row) string {
	var parts []string
	netRescue := false
	for _, c := range rows {
		unit := c.Str("cost")
		p := fmt.Sprintf("%s %s per branch against off's %s (%s per run)", CostNum(c.Float("mean")), unit, CostNum(c.Float("mean_off")), CostSigned(c.Float("extra")))
		if c["per_net_rescue"] != nil {
			netRescue = true
			p += fmt.Sprintf(", %s %s per net rescue", CostSigned(c.Float("per_net_rescue")), unit)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	line := "cost: " + strings.Join(parts, "; ")
	if !netRescue {
		line += ", no net rescue to pay for"
	}
	return line
}

func writeSlices(w io.Writer, t *results.Table, scored bool) error {
	out := &results.Table{Columns: []string{"config_id", "fork_step", "arm", "feature", "value", "pairs", "rescued", "harmed", "unchanged", "net", "net rate [95% CI]", "mcnemar_p", "p adj"}}
	if scored {
		out.Columns = append(out.Columns, "score diff [95% CI]", "wilcoxon_p", "p adj")
	}
	for _, r := range t.Records() {
		row := []any{r["config_id"], r["fork_step"], r["arm"], r["feature"], r["value"], r["pairs"],
			r["rescued"], r["harmed"], r["unchanged"], r["net"],
			fmt.Sprintf("%s [%s, %s]", Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi"))),
			PValue(r.Float("mcnemar_p")), PValue(r.Float("mcnemar_p_adj"))}
		if scored {
			row = append(row, ScoreInterval(r), PValue(nullNaN(r, "wilcoxon_p")), PValue(nullNaN(r, "wilcoxon_p_adj")))
		}
		out.Rows = append(out.Rows, row)
	}
	return WriteTable(w, out)
}

// ScoreInterval writes a row's mean score difference and its interval,
// "+0.0421 [+0.031, +0.0532]"; the mean alone when there is no interval;
// NA when there is no score.
func ScoreInterval(r results.Row) string {
	if r["mean_score_diff"] == nil {
		return NA
	}
	if r["score_diff_lo"] == nil {
		return ScoreSigned(r.Float("mean_score_diff"))
	}
	return fmt.Sprintf("%s [%s, %s]", ScoreSigned(r.Float("mean_score_diff")), ScoreSigned(r.Float("score_diff_lo")), ScoreSigned(r.Float("score_diff_hi")))
}

// nullNaN is column c of r, NaN when it is NULL (PValue prints NA).
func nullNaN(r results.Row, c string) float64 {
	if r[c] == nil {
		return math.NaN()
	}
	return r.Float(c)
}

// project keeps the named columns of t, in that order.
func project(t *results.Table, cols ...string) *results.Table {
	idx := columnIndex(t)
	out := &results.Table{Columns: cols}
	for _, r := range t.Rows {
		nr := make([]any, len(cols))
		for i, c := range cols {
			nr[i] = r[idx[c]]
		}
		out.Rows = append(out.Rows, nr)
	}
	return out
}

func columnIndex(t *results.Table) map[string]int {
	m := make(map[string]int, len(t.Columns))
	for i, c := range t.Columns {
		m[c] = i
	}
	return m
}

// NA is what the report prints for a number that does not exist — a rate
// of no pairs, a mean of no branches — where the arithmetic would give NaN
// or an infinity: no report, page or message prints "NaN" or "Inf".
const NA = "n/a"

// finite reports whether x is a number a reader can be shown.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Pct formats a rate as a percentage with one decimal, two below 1% in
// magnitude, never "-0.0%": -0.0267 is "-2.7%", 0.00052 is "0.05%"; NA for
// NaN or an infinity (the rate of no pairs).
func Pct(x float64) string {
	if !finite(x) {
		return NA
	}
	s := fmt.Sprintf("%.1f%%", 100*x)
	if x != 0 && math.Abs(x) < 0.01 {
		s = fmt.Sprintf("%.2f%%", 100*x)
	}
	if s == "-0.0%" {
		return "0.0%"
	}
	return s
}

// PctUp formats an upper confidence bound like Pct but rounded up, so that
// the printed "at most" is never below the bound: 0.0002496 is "0.03%".
func PctUp(x float64) string {
	if !finite(x) {
		return NA
	}
	if x != 0 && math.Abs(x) < 0.01 {
		return fmt.Sprintf("%.2f%%", math.Ceil(x*1e4-1e-9)/100)
	}
	return fmt.Sprintf("%.1f%%", math.Ceil(x*1e3-1e-9)/10)
}

// PValue formats a p-value, the one rule every table, headline and page
// uses: "1" near one, three decimals down to 0.001, two significant digits
// below (5.3e-23), and "< 1e-300" below 1e-300, where a float64 keeps no
// precision (subnormal) or the exact tail underflowed to 0.
func PValue(p float64) string {
	switch {
	case math.IsNaN(p):
		return NA
	case p < 1e-300:
		return "< 1e-300"
	case p >= 0.9995:
		return "1"
	case p >= 0.001:
		return fmt.Sprintf("%.3f", p)
	}
	return fmt.Sprintf("%.2g", p)
}

// PEquals is PValue after "p": "= 0.578", or "< 1e-300" (never "= <
// 1e-300").
func PEquals(p float64) string {
	s := PValue(p)
	if strings.HasPrefix(s, "<") || s == NA {
		return s
	}
	return "= " + s
}

// Num formats a mean or a count that may be fractional (the Qini
// table's rescued and harmed): at most two decimals, no trailing zeros:
// 4.49, 1927.8, 12; NA for NaN or an infinity.
func Num(x float64) string {
	if !finite(x) {
		return NA
	}
	s := fmt.Sprintf("%.2f", x)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// CostNum formats a cost — a mean, a difference, a total of steps,
// tokens, US dollars or seconds — by the one rule the text report, the HTML
// report and forklab's cost messages use (docs/agent-protocol.md, "Cost"):
// exactly two decimals from 0.1 up in magnitude (4.60, 4.26, 1927.80,
// 12.00), three significant digits below, trailing zeros kept (0.00200,
// -0.0000790, 0.00312), so that a small cost does not round to 0 and
// numbers side by side have the same precision; "0" for zero (and for a
// value that rounds to it); NA for NaN or an infinity.
func CostNum(x float64) string {
	if !finite(x) {
		return NA
	}
	a := math.Abs(x)
	decimals := 2
	if a < 0.1 && a > 0 {
		decimals = 2 - int(math.Floor(math.Log10(a)))
	}
	s := strconv.FormatFloat(x, 'f', decimals, 64)
	if a < 0.1 && a > 0 && strings.Trim(s, "-0.") != "" {
		// Rounding may carry into a new digit (0.09996 -> 0.100): keep
		// three significant digits of what it became.
		if r, _ := strconv.ParseFloat(s, 64); math.Abs(r) >= 0.1 {
			s = strconv.FormatFloat(r, 'f', 2, 64)
		} else if sig := strings.TrimLeft(strings.Trim(s, "-"), "0."); len(sig) > 3 {
			s = strconv.FormatFloat(r, 'f', decimals-1, 64)
		}
	}
	if strings.Trim(s, "-0.") == "" {
		return "0"
	}
	return s
}

// CostSigned is CostNum with its sign: +0.00111, -0.50, 0, n/a.
func CostSigned(x float64) string {
	s := CostNum(x)
	if s != "0" && s != NA && !strings.HasPrefix(s, "-") {
		return "+" + s
	}
	return s
}

// CostTotal formats a total — a sum over pairs, as the policy table's
// extra cost — of cost field world.CostFields[k]: steps and tokens are
// counted in whole units, so a whole total prints as an integer (-13, not
// -13.00); any other total, and a mean, prints by CostNum's rule.
func CostTotal(k int, x float64) string {
	if k >= 0 && k < len(world.CostFields) && (world.CostFields[k] == "steps" || world.CostFields[k] == "tokens") &&
		x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return CostNum(x)
}

// CostTotalSigned is CostTotal with its sign: +7, -13, 0, +0.00312.
func CostTotalSigned(k int, x float64) string {
	s := CostTotal(k, x)
	if s != "0" && s != NA && !strings.HasPrefix(s, "-") {
		return "+" + s
	}
	return s
}

// Signed is Num with its sign: +0.11, -0.5, 0, n/a.
func Signed(x float64) string {
	s := Num(x)
	if s != "0" && s != NA && !strings.HasPrefix(s, "-") {
		return "+" + s
	}
	return s
}

// List joins values with commas as the report prints lists of fork steps
// and arms: "1,2,3", "off,on".
func List[T any](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// wrap breaks text into lines of at most width runes at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(text) {
		n := len([]rune(word))
		if i > 0 && line+1+n > width {
			b.WriteByte('\n')
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += n
	}
	return b.String()
}
