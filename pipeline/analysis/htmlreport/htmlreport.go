// Package htmlreport renders a results directory's report as one
// self-contained HTML page that opens offline in any browser: no scripts,
// no fonts or styles fetched, no URL of any kind; the charts are gonum/plot
// drawings inlined as SVG and the styles sit in the page.
//
// The page shows what forklab report prints, from the same numbers
// (report.Collect), for any world: per treatment arm the headline
// (rescued, harmed, unchanged, net, with the Newcombe interval, McNemar's
// p and the cost against off); per-slice bars of rescued against harmed
// for every pre-decision feature the world declares (numbers by value or
// by quantile bucket), so rescues and harms that cancel in the net stand
// out; for every configuration and fork step the policy frontier, every
// candidate trigger as a point (harms against rescues) on the search seeds
// beside the held-out seeds, the chosen one marked, and the uplift (Qini)
// curve; for noisy sweeps how the counts and interval widths change with
// the number of replicas voted and of seeds; the Result paragraphs; the
// first rescued and harmed pairs of every slice, linked from its table to
// their side-by-side views (package pairview), embedded; and the sweep's
// parameters from its manifest.
package htmlreport

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/world"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/pairview"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

//go:embed page.html
var pageHTML string

//go:embed style.css
var styleCSS string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// Write collects the report of the results in db (report.Collect, and
// the pairs of every slice: report.CollectExamples) and writes it to w as
// an HTML page.
func Write(ctx context.Context, w io.Writer, db *results.DB) error {
	s, err := report.Collect(ctx, db)
	if err != nil {
		return err
	}
	if err := report.CollectExamples(ctx, db, s); err != nil {
		return err
	}
	return Render(w, s, db.Manifest, db.Dir)
}

// Render writes the HTML page of the report sections s of the results
// directory dir, whose manifest is m, with the pair views of s.Examples
// when they were collected. It fails only if a chart cannot be drawn or w
// fails.
func Render(w io.Writer, s *report.Sections, m sweep.Manifest, dir string) error {
	p, err := build(s, m, dir)
	if err != nil {
		return err
	}
	return pageTmpl.Execute(w, p)
}

// page is what the template shows.
type page struct {
	CSS         template.CSS
	Title       string
	Dir         string
	Facts       []string
	Noise       string
	Incomplete  string // report.IncompleteLine: the sweep has too many error pairs
	Replicas    string // report.ReplicasLine: a nondeterministic world's replicas
	Anywhere    string // sweep.PolicyAnywhereLine: a rule applied outside where it was chosen
	Headlines   []headline
	SliceGroups []sliceGroup
	Scored      bool // the world declares a score
	Policies    []policyView
	SearchNote  string
	Convergence []convGroup
	Result      []string
	Params      []kv
	Configs     table
	Outputs     table
	SpecJSON    string
	// Pairs are the views of the pairs the slice tables link to
	// (report.Examples), and PairCSS their style.
	Pairs   []pairEntry
	PairCSS template.CSS
}

// pairEntry is one embedded pair view.
type pairEntry struct {
	ID, Summary string
	View        template.HTML
}

type kv struct{ Key, Value string }

type table struct {
	Groups  []group // an optional header results.Row above Columns
	Columns []string
	Rows    [][]cell
}

// Labels names each column for a reader who sees one row at a time (a
// phone shows every row as a list of label: value): the column's name,
// after its group's when it has one ("held-out seeds: rescued").
func (t table) Labels() []string {
	labels := slices.Clone(t.Columns)
	i := 0
	for _, g := range t.Groups {
		for j := i; j < min(i+g.Span, len(labels)); j++ {
			if g.Text != "" {
				labels[j] = g.Text + ": " + labels[j]
			}
		}
		i += g.Span
	}
	return labels
}

type group struct {
	Text string
	Span int
}

type cell struct {
	Text  string
	Num   bool
	Class string
	// Links follow Text: in-page links (#ID) to embedded pair views.
	Links []link
}

type link struct{ Text, Href, Class string }

// Classes is the cell's class attribute: num for right-aligned numbers,
// then its own class.
func (c cell) Classes() string {
	return strings.TrimSpace(map[bool]string{true: "num"}[c.Num] + " " + c.Class)
}

type headline struct {
	Title                               string
	Rescued, Harmed, Unchanged, Net     int64
	NetText, NetClass                   string
	SureThing, LostCause, Discordant    int64
	NetRate, NetLo, NetHi, P            string
	RescueRate, RescueLo, RescueHi      string
	HarmRate, HarmLo, HarmHi            string
	FlipRate, FlipLo, FlipHi            string
	Cost, Errors                        string
	Score                               string // report.ScoreLine, for a scored world
	Sample                              string // report.SampleTag: the policy arm in-sample or not
	Bar                                 []segment
	Arm                                 string
	Primary                             bool
	RescuedPct, HarmedPct, UnchangedPct string
}

type segment struct {
	Class, Label string
	Pct          float64
}

type chart struct {
	Title string
	SVG   template.HTML
}

type sliceGroup struct {
	Title  string
	Open   bool
	Charts []chart
	Table  table
}

// policyView is the policy search of one configuration and fork step.
type policyView struct {
	Title      string
	Open       bool
	Skipped    string
	Header     string
	Chosen     string
	Search     template.HTML
	Holdout    template.HTML
	Table      table
	Candidates int
	Qini       *qiniView
}

type qiniView struct {
	SVG     template.HTML
	Caption string
	Table   table
}

type convGroup struct {
	Title          string
	Open           bool
	NetRate, Width template.HTML
	Legend         []legendItem
	Table          table
}

func build(s *report.Sections, m sweep.Manifest, dir string) (*page, error) {
	p := &page{CSS: template.CSS(styleCSS), Title: "forklab report · " + filepath.Base(filepath.Clean(dir)), Dir: dir, Result: s.Result, SearchNote: s.SearchNote,
		Incomplete: report.IncompleteLine(m), Replicas: report.ReplicasLine(m), Noise: report.ParamsLine(m),
		Anywhere: sweep.PolicyAnywhereLine(m.Spec, m.Declaration, m.Configs)}
	configs := len(m.Configs) > 1
	p.Facts = []string{"world " + m.Spec.World, m.Spec.PopulationText(), "fork at " + report.List(m.Spec.ForkAt),
		"arms " + report.List(m.Spec.Arms), fmt.Sprintf("replicas %d", m.Spec.Replicas)}
	if configs {
		p.Facts = append(p.Facts, fmt.Sprintf("%d configurations", len(m.Configs)))
	}
	summary := s.Summary.Records()
	costs := s.Costs.Records()
	primary := primaryArm(summary)
	for _, r := range summary {
		h := headlineOf(r, configs, r.Str("arm") == primary)
		h.Cost = report.CostLine(report.CostsOf(costs, r))
		h.Sample = report.SampleTag(m, r)
		if e := r.Int("errors"); e > 0 {
			h.Errors = plural.Count(e, "pair") + " errored (a checkpoint or branch failed): not labelled, not counted"
		}
		p.Headlines = append(p.Headlines, h)
	}
	var err error
	p.Scored = s.World.Score != nil
	var links map[string][]link
	if s.Examples != nil {
		if p.Pairs, links, err = pairs(s.Examples, dir, len(m.Configs)); err != nil {
			return nil, err
		}
		p.PairCSS = template.CSS(pairview.CSS)
	}
	if p.SliceGroups, err = sliceGroups(s.Slices.Records(), configs, primary, links, p.Scored); err != nil {
		return nil, err
	}
	if s.Search != nil {
		if p.Policies, err = policies(s.Search, m, s.Qini); err != nil {
			return nil, err
		}
	}
	if s.Convergence != nil {
		if p.Convergence, err = convGroups(s.Convergence.Records(), configs, primary); err != nil {
			return nil, err
		}
	}
	p.Params, p.Configs, p.Outputs, p.SpecJSON = parameters(m)
	return p, nil
}

// primaryArm is the arm shown open: on when the sweep has it.
func primaryArm(summary []results.Row) string {
	for _, r := range summary {
		if r.Str("arm") == "on" {
			return "on"
		}
	}
	if len(summary) > 0 {
		return summary[0].Str("arm")
	}
	return ""
}

func groupTitle(r results.Row, configs bool) string {
	t := fmt.Sprintf("%s vs off · fork step %d", r.Str("arm"), r.Int("fork_step"))
	if configs {
		t += fmt.Sprintf(" · config %d", r.Int("config_id"))
	}
	return t
}

func netClass(n int64) string {
	switch {
	case n > 0:
		return "pos"
	case n < 0:
		return "neg"
	}
	return ""
}

func headlineOf(r results.Row, configs, primary bool) headline {
	pairs := float64(max(r.Int("pairs"), 1))
	h := headline{
		Title:   groupTitle(r, configs) + " · " + plural.Count(r.Int("pairs"), "pair"),
		Rescued: r.Int("rescued"), Harmed: r.Int("harmed"), Unchanged: r.Int("unchanged"), Net: r.Int("net"),
		NetText: signed(r.Int("net")), NetClass: netClass(r.Int("net")),
		SureThing: r.Int("sure_thing"), LostCause: r.Int("lost_cause"), Discordant: r.Int("rescued") + r.Int("harmed"),
		NetRate: pct(r.Float("net_rate")), NetLo: pct(r.Float("net_lo")), NetHi: pct(r.Float("net_hi")), P: report.PEquals(r.Float("mcnemar_p")),
		RescueRate: pct(r.Float("rescue_rate")), RescueLo: pct(r.Float("rescue_lo")), RescueHi: pct(r.Float("rescue_hi")),
		HarmRate: pct(r.Float("harm_rate")), HarmLo: pct(r.Float("harm_lo")), HarmHi: pct(r.Float("harm_hi")),
		FlipRate: pct(r.Float("flip_rate")), FlipLo: pct(r.Float("flip_lo")), FlipHi: pct(r.Float("flip_hi")),
		Arm: r.Str("arm"), Primary: primary, Score: report.ScoreLine(r),
	}
	for _, seg := range []struct {
		class, name string
		n           int64
	}{{"rescued", "rescued", h.Rescued}, {"harmed", "harmed", h.Harmed},
		{"sure", "sure things", h.SureThing}, {"lost", "lost causes", h.LostCause}} {
		if seg.n > 0 {
			h.Bar = append(h.Bar, segment{Class: seg.class, Pct: 100 * float64(seg.n) / pairs,
				Label: fmt.Sprintf("%s %d (%s)", seg.name, seg.n, pct(float64(seg.n)/pairs))})
		}
	}
	return h
}

// runs splits rows into runs of consecutive rows with the same key.
func runs(rs []results.Row, key func(results.Row) string) [][]results.Row {
	var out [][]results.Row
	for _, r := range rs {
		if n := len(out); n > 0 && key(out[n-1][0]) == key(r) {
			out[n-1] = append(out[n-1], r)
			continue
		}
		out = append(out, []results.Row{r})
	}
	return out
}

// armKey groups rows by configuration, fork step and arm.
func armKey(r results.Row) string {
	return fmt.Sprint(r.Int("config_id"), "/", r.Int("fork_step"), "/", r.Str("arm"))
}

// sliceKey names a slice: configuration, fork step, arm, feature, value.
func sliceKey(r results.Row) string {
	return fmt.Sprint(r.Int("config_id"), "/", r.Int("fork_step"), "/", r.Str("arm"), "/", r.Str("feature"), "/", r.Str("value"))
}

// pairs renders the views of ex and the links to them of every slice (by
// sliceKey): rescued seeds, then harmed ones.
func pairs(ex *report.Examples, dir string, configs int) ([]pairEntry, map[string][]link, error) {
	var out []pairEntry
	for _, v := range ex.Views {
		id := report.ID(v.Config, v.ForkStep, v.Arm, v.RunName())
		h, err := pairview.Fragment(v, "", dir, configs)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, pairEntry{ID: id, Summary: v.Title(configs) + " — " + v.Pair.Label, View: h})
	}
	links := map[string][]link{}
	for _, r := range ex.Slices.Records() {
		k := sliceKey(r)
		for _, run := range report.RunIDs(r) {
			links[k] = append(links[k], link{Text: run, Class: r.Str("label"),
				Href: "#" + report.ID(int(r.Int("config_id")), int(r.Int("fork_step")), fork.Arm(r.Str("arm")), run)})
		}
	}
	return out, links, nil
}

func sliceGroups(rs []results.Row, configs bool, primary string, links map[string][]link, scored bool) ([]sliceGroup, error) {
	var groups []sliceGroup
	for _, cur := range runs(rs, armKey) {
		g := sliceGroup{Title: groupTitle(cur[0], configs), Open: cur[0].Str("arm") == primary,
			Table: table{Columns: []string{"feature", "value", "pairs", "rescued", "harmed", "unchanged", "net", "net rate [95% CI]", "McNemar p", "Holm-adjusted"}}}
		if scored {
			g.Table.Columns = append(g.Table.Columns, "score diff [95% CI]", "Wilcoxon p", "Holm-adjusted")
		}
		if links != nil {
			g.Table.Columns = append(g.Table.Columns, "pairs to look at (rescued, harmed)")
		}
		lo, hi := sliceRange(cur)
		for _, feat := range runs(cur, func(r results.Row) string { return r.Str("feature") }) {
			svg, err := sliceCharts(feat[0].Str("feature"), feat, lo, hi)
			if err != nil {
				return nil, err
			}
			g.Charts = append(g.Charts, chart{Title: feat[0].Str("feature"), SVG: svg})
		}
		for _, r := range cur {
			g.Table.Rows = append(g.Table.Rows, []cell{{Text: r.Str("feature")}, {Text: r.Str("value")}, num(r.Int("pairs")),
				num(r.Int("rescued")), num(r.Int("harmed")), num(r.Int("unchanged")), {Text: signed(r.Int("net")), Num: true, Class: netClass(r.Int("net"))},
				{Text: fmt.Sprintf("%s [%s, %s]", pct(r.Float("net_rate")), pct(r.Float("net_lo")), pct(r.Float("net_hi"))), Num: true},
				{Text: pval(r.Float("mcnemar_p")), Num: true}, {Text: pval(r.Float("mcnemar_p_adj")), Num: true}})
			if scored {
				row := &g.Table.Rows[len(g.Table.Rows)-1]
				*row = append(*row, cell{Text: report.ScoreInterval(r), Num: true}, cell{Text: pvalOrNA(r, "wilcoxon_p"), Num: true},
					cell{Text: pvalOrNA(r, "wilcoxon_p_adj"), Num: true})
			}
			if links != nil {
				row := &g.Table.Rows[len(g.Table.Rows)-1]
				*row = append(*row, cell{Links: links[sliceKey(r)]})
			}
		}
		groups = append(groups, g)
	}
	if len(groups) <= 2 {
		for i := range groups {
			groups[i].Open = true
		}
	}
	return groups, nil
}

// pvalOrNA is column c's p-value, "n/a" when it is NULL (a slice whose
// score differences are all 0).
func pvalOrNA(r results.Row, c string) string {
	if r[c] == nil {
		return report.NA
	}
	return pval(r.Float(c))
}

// oneDecimal formats x with one decimal, never "-0.0".
func oneDecimal(x float64) string {
	if s := fmt.Sprintf("%.1f", x); s != "-0.0" {
		return s
	}
	return "0.0"
}

func num(n int64) cell { return cell{Text: fmt.Sprint(n), Num: true} }

// policies is the policy search of every configuration and fork step,
// each with its frontier charts, the chosen trigger and the baselines, and
// its uplift (Qini) curve.
func policies(r *search.Result, m sweep.Manifest, qini *results.Table) ([]policyView, error) {
	o := r.Options
	var views []policyView
	costs := []int{}
	for i, f := range world.CostFields {
		if r.World.Cost.Reports(f) {
			costs = append(costs, i)
		}
	}
	for gi := range r.Groups {
		g := &r.Groups[gi]
		v := policyView{Title: report.GroupTitle(m, g.ConfigID, g.ForkStep), Open: gi == 0 || len(r.Groups) <= 2, Skipped: g.Skipped}
		if g.Skipped != "" {
			views = append(views, v)
			continue
		}
		v.Header = fmt.Sprintf("arm on · %s · cap: at most %s %s · %d search / %d held-out pairs (%.0f%% of %s held out)",
			v.Title, plural.Count(int64(o.MaxHarm), "harm"), report.ScopeText(o.Scope, r.World), g.Chosen.Search.Pairs, g.Chosen.Holdout.Pairs, 100*o.Holdout, report.Runs(m))
		v.Chosen, v.Candidates = g.Chosen.Trigger, len(g.Candidates)
		v.Table = table{Groups: []group{{"", 2}, {"search " + report.Runs(m), 5}, {"held-out " + report.Runs(m), 6 + len(costs)}},
			Columns: []string{"trigger", "cap", "fires", "rescued", "harmed", "harmed clean", "net",
				"fires", "rescued", "harmed", "harmed clean", "net", "harm rate ≤ (95%)"}}
		for _, k := range costs {
			v.Table.Columns = append(v.Table.Columns, "extra "+world.CostFields[k])
		}
		for i, c := range report.Shown(g) {
			name, class := c.Trigger, ""
			if i == 0 {
				name, class = "▶ "+name+" (chosen)", "chosen"
			}
			capOK := "ok"
			if !c.WithinCap {
				capOK = "over"
			}
			row := []cell{{Text: name, Class: class}, {Text: capOK},
				num(c.Search.Fires), num(c.Search.Rescued), num(c.Search.Harmed), num(c.Search.HarmedClean),
				{Text: signed(c.Search.Net()), Num: true, Class: netClass(c.Search.Net())},
				num(c.Holdout.Fires), num(c.Holdout.Rescued), num(c.Holdout.Harmed), num(c.Holdout.HarmedClean),
				{Text: signed(c.Holdout.Net()), Num: true, Class: netClass(c.Holdout.Net())},
				{Text: report.PctUp(c.Holdout.HarmUpper()), Num: true}}
			for _, k := range costs {
				x := c.Holdout.Extra[k]
				if math.IsNaN(x) {
					x = 0
				}
				row = append(row, cell{Text: report.CostTotalSigned(k, x), Num: true})
			}
			v.Table.Rows = append(v.Table.Rows, row)
		}
		var err error
		if v.Search, err = frontierCharts(g, false); err != nil {
			return nil, err
		}
		if v.Holdout, err = frontierCharts(g, true); err != nil {
			return nil, err
		}
		if qini != nil {
			if rows := report.QiniRows(qini, g.ConfigID, g.ForkStep); len(rows) > 0 {
				if v.Qini, err = qiniOf(rows); err != nil {
					return nil, err
				}
			}
		}
		views = append(views, v)
	}
	return views, nil
}

func qiniOf(rs []results.Row) (*qiniView, error) {
	svg, err := qiniChart(rs)
	if err != nil {
		return nil, err
	}
	v := &qiniView{SVG: svg, Caption: report.QiniCaption(rs[0].Float("qini")),
		Table: table{Columns: []string{"fired", "pairs fired", "rescued", "harmed", "net", "random net"}}}
	for _, r := range rs {
		v.Table.Rows = append(v.Table.Rows, []cell{{Text: fmt.Sprintf("%.0f%%", 100*r.Float("fire_rate")), Num: true}, num(r.Int("fired")),
			{Text: report.Num(r.Float("rescued")), Num: true}, {Text: report.Num(r.Float("harmed")), Num: true},
			{Text: report.Signed(r.Float("net")), Num: true, Class: netClass(int64(math.Round(r.Float("net"))))},
			{Text: oneDecimal(r.Float("random_net")), Num: true}})
	}
	return v, nil
}

func convGroups(rs []results.Row, configs bool, primary string) ([]convGroup, error) {
	var groups []convGroup
	for _, cur := range runs(rs, armKey) {
		netRate, width, legend, err := convergenceCharts(cur)
		if err != nil {
			return nil, err
		}
		g := convGroup{Title: groupTitle(cur[0], configs), Open: cur[0].Str("arm") == primary, NetRate: netRate, Width: width, Legend: legend,
			Table: table{Columns: []string{"replicas voted", "seeds", "rescued", "harmed", "net", "net rate [95% CI]", "CI width", "McNemar p"}}}
		for _, r := range cur {
			g.Table.Rows = append(g.Table.Rows, []cell{num(r.Int("replicas_voted")), num(r.Int("seeds")), num(r.Int("rescued")), num(r.Int("harmed")),
				{Text: signed(r.Int("net")), Num: true, Class: netClass(r.Int("net"))},
				{Text: fmt.Sprintf("%s [%s, %s]", pct(r.Float("net_rate")), pct(r.Float("net_lo")), pct(r.Float("net_hi"))), Num: true},
				{Text: pct(r.Float("ci_width")), Num: true}, {Text: pval(r.Float("mcnemar_p")), Num: true}})
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// parameters lists the manifest: the spec, the configurations, the tables
// written, and the spec as JSON (forklab sweep --spec accepts it).
func parameters(m sweep.Manifest) ([]kv, table, table, string) {
	s := m.Spec
	kvs := []kv{
		{"world", s.World}, {"seeds", s.Seeds.String() + " (" + plural.Count(s.Seeds.Len(), "seed") + ")"},
		{"fork at", report.List(s.ForkAt)}, {"arms", report.List(s.Arms)}, {"replicas", fmt.Sprint(s.Replicas)},
	}
	if r := s.Runs; r != nil {
		kvs[1] = kv{"runs", fmt.Sprintf("%d recorded runs: %s (%s, %d bytes, crc32c %s)", r.Count, r.Source, r.Format, r.Bytes, r.CRC32C)}
	}
	for _, prm := range m.Declaration.Params {
		kvs = append(kvs, kv{prm.Name, s.Params.Text(prm.Name)})
	}
	kvs = append(kvs, kv{"temperature", fmt.Sprint(s.Model.Temperature)}, kv{"no_tool", fmt.Sprint(s.Model.NoTool)})
	if len(s.Grid) > 0 {
		b, _ := json.Marshal(s.Grid)
		kvs = append(kvs, kv{"grid", string(b)})
	}
	if s.Policy != nil {
		kvs = append(kvs, kv{"policy arm's rule", s.Policy.String()})
	}
	kvs = append(kvs, kv{"forklab version", m.ForklabVersion}, kv{"schema version", fmt.Sprint(m.SchemaVersion)},
		kv{"started", m.StartedAt.UTC().Format(time.RFC3339)},
		kv{"finished", m.FinishedAt.UTC().Format(time.RFC3339) + fmt.Sprintf(" (%s)", m.FinishedAt.Sub(m.StartedAt).Round(time.Millisecond))})

	configs := table{Columns: []string{"config_id"}}
	for _, prm := range m.Declaration.Params {
		configs.Columns = append(configs.Columns, prm.Name)
	}
	configs.Columns = append(configs.Columns, "temperature", "no_tool")
	for _, c := range m.Configs {
		row := []cell{num(int64(c.ID))}
		for _, prm := range m.Declaration.Params {
			row = append(row, cell{Text: c.Params.Text(prm.Name), Num: prm.Kind.Scalar() && prm.Kind != world.ParamEnum && prm.Kind != world.ParamBool})
		}
		row = append(row, cell{Text: fmt.Sprint(c.Model.Temperature), Num: true}, cell{Text: fmt.Sprint(c.Model.NoTool), Num: true})
		configs.Rows = append(configs.Rows, row)
	}
	files := map[string]int64{}
	for _, f := range m.Files {
		files[strings.Split(f.Path, "/")[0]]++
	}
	outputs := table{Columns: []string{"table", "rows", "files"}}
	for _, t := range []string{"configs", "params", "tasks", "checkpoints", "branches", "pairs"} {
		if n, ok := m.Rows[t]; ok {
			outputs.Rows = append(outputs.Rows, []cell{{Text: t}, num(n), num(files[t])})
		}
	}
	spec, _ := json.MarshalIndent(s, "", "  ")
	return kvs, configs, outputs, string(spec)
}
