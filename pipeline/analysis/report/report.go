// Package report turns a results directory into the text report forklab
// prints, every number read through DuckDB from the embedded queries: per
// treatment arm a headline (rescued, harmed, unchanged, net, with the
// interval and McNemar's p), the slices by pre-decision feature, for noisy
// sweeps how counts and intervals move with replicas and seeds, the guard
// policy search with its held-out check and the uplift (Qini) curve, and a
// closing "Result" paragraph written from the numbers.
package report

import (
	"context"
	"errors"
	"fmt"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
)

// Sections is everything Write prints, for other renderers (the HTML report).
type Sections struct {
	Summary     *results.Table
	Slices      *results.Table
	Convergence *results.Table // nil unless the sweep is noisy
	Search      *search.Result // nil when there is no arm on or too few pairs
	SearchNote  string         // why Search is nil
	Qini        *results.Table
	Result      []string // paragraphs
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

// Collect runs every query the report needs.
func Collect(ctx context.Context, db *results.DB) (*Sections, error) {
	s := &Sections{}
	var err error
	if s.Summary, err = db.Run(ctx, "summary"); err != nil {
		return nil, err
	}
	if s.Slices, err = db.Run(ctx, "slices"); err != nil {
		return nil, err
	}
	if Noisy(db) {
		if s.Convergence, err = db.Run(ctx, "convergence"); err != nil {
			return nil, err
		}
	}
	opt := search.Defaults()
	s.Search, err = search.Run(ctx, db, opt)
	if errors.Is(err, search.ErrInput) {
		s.Search, s.SearchNote = nil, err.Error()
	} else if err != nil {
		return nil, err
	} else if s.Qini, err = search.Qini(ctx, db, opt); err != nil {
		return nil, err
	}
	s.Result = resultParagraphs(s)
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
	m := db.Manifest
	fmt.Fprintf(w, "forklab report · %s · world %s · seeds %s · fork at %s · arms %s · replicas %d",
		db.Dir, m.Spec.World, m.Spec.Seeds, List(m.Spec.ForkAt), List(m.Spec.Arms), m.Spec.Replicas)
	if len(m.Configs) > 1 {
		fmt.Fprintf(w, " · %d configurations", len(m.Configs))
	}
	fmt.Fprintln(w)
	if c := m.Configs[0]; len(m.Configs) == 1 {
		var parts []string
		if c.Model.Temperature > 0 {
			parts = append(parts, fmt.Sprintf("temperature %g", c.Model.Temperature))
		}
		for _, p := range m.Declaration.Params {
			if def, err := p.Parse(p.Default); err == nil && fmt.Sprint(def) != fmt.Sprint(c.Params[p.Name]) {
				parts = append(parts, p.Name+" "+c.Params.Text(p.Name))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintln(w, strings.Join(parts, " · "))
		}
	}
	fmt.Fprintln(w)
	for _, r := range s.Summary.Records() {
		writeHeadline(w, r, ConfigLabel(m, r.Int("config_id")))
	}
	fmt.Fprintln(w, "SLICES (pre-decision features; net rate with Newcombe 95% CI; McNemar exact p)")
	if err := writeSlices(w, s.Slices); err != nil {
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
		if err := WritePolicy(w, s.Search); err != nil {
			return err
		}
		fmt.Fprintln(w, "\nUPLIFT (QINI) CURVE on held-out pairs of arm on, best-scored first")
		if err := WriteTable(w, s.Qini); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "POLICY SEARCH skipped: %s\n", s.SearchNote)
	}
	fmt.Fprintln(w, "\nRESULT")
	for _, p := range s.Result {
		fmt.Fprintln(w, wrap(p, 80))
		fmt.Fprintln(w)
	}
	return nil
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

func writeHeadline(w io.Writer, r results.Row, config string) {
	suffix := ""
	if config != "" {
		suffix = " · " + config
	}
	fmt.Fprintf(w, "%s vs off · fork step %d%s · %d pairs\n", r.Str("arm"), r.Int("fork_step"), suffix, r.Int("pairs"))
	fmt.Fprintf(w, "  rescued %d   harmed %d   unchanged %d   net %+d\n", r.Int("rescued"), r.Int("harmed"), r.Int("unchanged"), r.Int("net"))
	fmt.Fprintf(w, "  sure things %d · lost causes %d · net rate %s (95%% CI %s to %s, Newcombe) · McNemar exact p = %s on %d discordant pairs\n",
		r.Int("sure_thing"), r.Int("lost_cause"), Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")),
		PValue(r.Float("mcnemar_p")), r.Int("rescued")+r.Int("harmed"))
	fmt.Fprintf(w, "  rescue rate %s [%s, %s] · harm rate %s [%s, %s] · flip rate %s [%s, %s] (Wilson 95%%)\n\n",
		Pct(r.Float("rescue_rate")), Pct(r.Float("rescue_lo")), Pct(r.Float("rescue_hi")),
		Pct(r.Float("harm_rate")), Pct(r.Float("harm_lo")), Pct(r.Float("harm_hi")),
		Pct(r.Float("flip_rate")), Pct(r.Float("flip_lo")), Pct(r.Float("flip_hi")))
}

func writeSlices(w io.Writer, t *results.Table) error {
	out := &results.Table{Columns: []string{"config_id", "fork_step", "arm", "feature", "value", "pairs", "rescued", "harmed", "unchanged", "net", "net rate [95% CI]", "mcnemar_p"}}
	for _, r := range t.Records() {
		out.Rows = append(out.Rows, []any{r["config_id"], r["fork_step"], r["arm"], r["feature"], r["value"], r["pairs"],
			r["rescued"], r["harmed"], r["unchanged"], r["net"],
			fmt.Sprintf("%s [%s, %s]", Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi"))), PValue(r.Float("mcnemar_p"))})
	}
	return WriteTable(w, out)
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

// Pct formats a rate as a percentage with one decimal, two below 1% in
// magnitude, never "-0.0%": -0.0267 is "-2.7%", 0.00052 is "0.05%".
func Pct(x float64) string {
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
	if x != 0 && math.Abs(x) < 0.01 {
		return fmt.Sprintf("%.2f%%", math.Ceil(x*1e4-1e-9)/100)
	}
	return fmt.Sprintf("%.1f%%", math.Ceil(x*1e3-1e-9)/10)
}

// PValue formats a p-value: "1" near one, three decimals down to 0.001,
// two significant digits below (5.3e-23).
func PValue(p float64) string {
	switch {
	case p <= 0:
		return "< 1e-300" // the exact tail underflows a float64
	}
	switch {
	case p >= 0.9995:
		return "1"
	case p >= 0.001:
		return fmt.Sprintf("%.3f", p)
	}
	return fmt.Sprintf("%.2g", p)
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
