// Package analysistest holds, for tests, pairs made by hand and the
// analysis of them computed a second, independent way: in Go, pair by pair,
// without DuckDB, cells or grids. The report's numbers are pinned to these
// references (issue 12 K: not to goldens the product wrote itself).
//
// Open loads hand-made pairs of any declared world into an in-memory
// DuckDB under the views of queries.Views, with the file-reading views
// replaced by tables, so the queries of package queries run on them as on a
// results directory. Summary, Slices, Search and Qini compute what
// summary.sql, slices.sql, policy_search.sql and qini.sql compute, from
// the same pairs, by brute force: every condition evaluated on every pair.
// Numeric features are cut into buckets by the rule feature_bins documents
// (by value when few, else at rounded deciles), computed here again in Go.
package analysistest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/queries"
)

// Pair is one row of the pairs table.
type Pair struct {
	ConfigID, ForkStep int
	Seed               int64
	Arm                string
	// Error marks a pair whose checkpoint or branch failed: status
	// 'error', no label, features null.
	Error bool
	// Control and Treatment are the two sides' outcomes.
	Control, Treatment bool
	// Fault is the declared fault flag (nil when the world has none).
	Fault *bool
	// Features are the declared features, in declaration order.
	Features []world.Value
	// Extra is the treatment's mean cost minus the control's, per cost
	// field (world.CostFields order); nil where not reported.
	Extra [4]*float64
	// Score is score_control, score_treated and score_diff for a world
	// that declares a score; nil otherwise (and on an error pair). Open
	// stores Score[2] as given: make it with ScoreOf.
	Score *[3]float64
}

// ScoreOf is the Score of a pair whose sides' mean scores are control and
// treated in world d: the difference rounded as the sweep stores it
// (world.ScoreSpec.RoundDiff).
func ScoreOf(d world.Declaration, control, treated float64) *[3]float64 {
	return &[3]float64{control, treated, d.Score.RoundDiff(treated - control)}
}

// Label is the pair's label: rescued, harmed or unchanged ("" for an
// error pair).
func (p Pair) Label() string {
	switch {
	case p.Error:
		return ""
	case p.Treatment && !p.Control:
		return "rescued"
	case p.Control && !p.Treatment:
		return "harmed"
	}
	return "unchanged"
}

func (p Pair) quadrant() string {
	switch {
	case p.Error:
		return ""
	case p.Treatment && !p.Control:
		return "persuadable"
	case p.Control && !p.Treatment:
		return "sleeping_dog"
	case p.Control:
		return "sure_thing"
	}
	return "lost_cause"
}

// HeldOut is the split the policy search documents: a seed is held out
// when ((seed × 2654435761) mod 2^32) / 2^32 < holdout.
func HeldOut(seed int64, holdout float64) bool {
	h := (uint64(seed) * 2654435761) & (1<<32 - 1)
	return float64(h)/(1<<32) < holdout
}

func sqlType(k world.Kind) string {
	switch k {
	case world.Bool:
		return "BOOLEAN"
	case world.Int:
		return "BIGINT"
	case world.Float:
		return "DOUBLE"
	}
	return "VARCHAR"
}

// goValue is v as the appender takes it for a column of f's type.
func goValue(f world.Field, v world.Value) driver.Value {
	if v.Null {
		return nil
	}
	switch f.Kind {
	case world.Bool:
		return v.I != 0
	case world.Int:
		return v.I
	case world.Float:
		return v.F
	}
	return v.S
}

// Open loads pairs of world d into an in-memory DuckDB: tables configs,
// params, tasks, checkpoints and branches (empty but for one
// configuration row per config_id), pair_rows (the pairs), and every other
// view of queries.ViewDefs(d) over them, with the macros of stats.sql. The
// database is closed when the test ends.
func Open(t testing.TB, d world.Declaration, pairs []Pair) *sql.DB {
	t.Helper()
	views, err := queries.ViewDefs(d)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v\n%.400s", err, q)
		}
	}
	var fcols, hcols []string
	for _, f := range d.Features {
		fcols = append(fcols, fmt.Sprintf("%q %s", f.Name, sqlType(f.Kind)))
	}
	for _, h := range d.Hidden {
		hcols = append(hcols, fmt.Sprintf("%q %s", "hidden_"+h.Name, sqlType(h.Kind)))
	}
	exec("CREATE TABLE configs (config_id INTEGER, world VARCHAR, world_version VARCHAR, params VARCHAR, temperature DOUBLE, no_tool DOUBLE)")
	exec("CREATE TABLE params (config_id INTEGER, param VARCHAR, type VARCHAR, value_num DOUBLE, value_text VARCHAR)")
	exec("CREATE TABLE tasks (config_id INTEGER, seed BIGINT, status VARCHAR, error VARCHAR, run_id VARCHAR, metadata VARCHAR)")
	exec("CREATE TABLE checkpoints (config_id INTEGER, fork_step INTEGER, seed BIGINT, status VARCHAR, error VARCHAR, over BOOLEAN, " +
		strings.Join(append(append([]string{}, fcols...), hcols...), ", ") +
		", cost_steps BIGINT, cost_tokens BIGINT, cost_usd DOUBLE, cost_seconds DOUBLE, checkpoint VARCHAR, run_id VARCHAR)")
	exec("CREATE TABLE branches (config_id INTEGER, fork_step INTEGER, seed BIGINT, arm VARCHAR, replica INTEGER, status VARCHAR, error VARCHAR, " +
		"intervened BOOLEAN, success BOOLEAN, score DOUBLE, cost_steps BIGINT, cost_tokens BIGINT, cost_usd DOUBLE, cost_seconds DOUBLE, details VARCHAR, run_id VARCHAR)")
	exec("CREATE TABLE pair_rows (config_id INTEGER, fork_step INTEGER, seed BIGINT, arm VARCHAR, replicas INTEGER, status VARCHAR, error VARCHAR, " +
		"control_wins INTEGER, treatment_wins INTEGER, control_success BOOLEAN, treatment_success BOOLEAN, label VARCHAR, quadrant VARCHAR, fault BOOLEAN, " +
		"score_control DOUBLE, score_treated DOUBLE, score_diff DOUBLE, " +
		strings.Join(fcols, ", ") + ", extra_steps DOUBLE, extra_tokens DOUBLE, extra_usd DOUBLE, extra_seconds DOUBLE, run_id VARCHAR)")
	configs := map[int]bool{}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(dc any) error {
		a, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", "pair_rows")
		if err != nil {
			return err
		}
		for _, p := range pairs {
			configs[p.ConfigID] = true
			row := []driver.Value{int32(p.ConfigID), int32(p.ForkStep), p.Seed, p.Arm, int32(1)}
			if p.Error {
				row = append(row, "error", "failed", int32(0), int32(0), nil, nil, nil, nil, nil, nil, nil, nil)
			} else {
				var fault driver.Value
				if p.Fault != nil {
					fault = *p.Fault
				}
				row = append(row, "ok", nil, int32(0), int32(0), p.Control, p.Treatment, p.Label(), p.quadrant(), fault)
				if p.Score != nil {
					row = append(row, p.Score[0], p.Score[1], p.Score[2])
				} else {
					row = append(row, nil, nil, nil)
				}
			}
			for i, f := range d.Features {
				v := world.NullValue()
				if !p.Error {
					v = p.Features[i]
				}
				row = append(row, goValue(f, v))
			}
			for _, x := range p.Extra {
				if x == nil || p.Error {
					row = append(row, nil)
				} else {
					row = append(row, *x)
				}
			}
			row = append(row, fmt.Sprint(p.Seed)) // run_id: a seed's run is its decimal seed
			if err := a.AppendRow(row...); err != nil {
				a.Close()
				return err
			}
		}
		return a.Close()
	})
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	for c := range configs {
		exec(fmt.Sprintf("INSERT INTO configs VALUES (%d, '%s', '%s', '{}', 0, 0.5)", c, d.Name, d.Version))
	}
	// feature_ranges reads the files' statistics; here, the table.
	var ranges []string
	for i, f := range d.Features {
		if f.Kind == world.Int {
			ranges = append(ranges, fmt.Sprintf("{'feature_order': %d, 'small': coalesce(max(%q) - min(%q) < 12, false)}", i+1, f.Name, f.Name))
		}
	}
	if len(ranges) > 0 {
		exec("CREATE VIEW feature_ranges AS SELECT CAST(r.feature_order AS INTEGER) AS feature_order, r.small FROM (SELECT unnest([" +
			strings.Join(ranges, ", ") + "]) AS r FROM pair_rows)")
	} else {
		exec("CREATE VIEW feature_ranges AS SELECT CAST(NULL AS INTEGER) AS feature_order, CAST(NULL AS BOOLEAN) AS small WHERE false")
	}
	for _, v := range views {
		if v.Base && v.Name != "pair_rows" && v.Name != "feature_ranges" && v.Name != "configs" && v.Name != "params" && v.Name != "tasks" && v.Name != "checkpoints" && v.Name != "branches" {
			t.Fatalf("unexpected base view %s", v.Name)
		}
		if !v.Base {
			exec("CREATE VIEW " + v.Name + " AS " + v.Select)
		}
	}
	exec(queries.MustGet("stats"))
	return db
}

// Query runs q and returns its rows as maps by column name.
func Query(t testing.TB, db *sql.DB, q string) []map[string]any {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%v\n%.300s", err, q)
	}
	cols, vals, err := duck.ScanAll(rows)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(vals))
	for r, row := range vals {
		out[r] = make(map[string]any, len(cols))
		for i, c := range cols {
			out[r][c] = row[i]
		}
	}
	return out
}

// Counts are a set of pairs counted by label.
type Counts struct {
	Pairs, Rescued, Harmed, SureThing, LostCause int64
}

func (c *Counts) add(p Pair) {
	c.Pairs++
	switch p.quadrant() {
	case "persuadable":
		c.Rescued++
	case "sleeping_dog":
		c.Harmed++
	case "sure_thing":
		c.SureThing++
	case "lost_cause":
		c.LostCause++
	}
}

// Group names a configuration, fork step and arm.
type Group struct {
	ConfigID, ForkStep int
	Arm                string
}

// Summary counts the ok pairs of each configuration, fork step and arm, and
// the error pairs apart.
func Summary(pairs []Pair) (ok map[Group]Counts, errors map[Group]int64) {
	ok, errors = map[Group]Counts{}, map[Group]int64{}
	for _, p := range pairs {
		g := Group{p.ConfigID, p.ForkStep, p.Arm}
		if p.Error {
			errors[g]++
			continue
		}
		c := ok[g]
		c.add(p)
		ok[g] = c
	}
	return ok, errors
}

// numText is a number's canonical text: an integral value below 10^15 as
// an integer, anything else as the shortest text that reads back.
func numText(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// Truncate truncates x towards minus infinity to three significant
// digits, as the views do to a wide int or a float before counting its
// values (with the same 1e-7 guard against 0.57 * 1000 =
// 569.9999999999999).
func Truncate(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	s := 2 - int(math.Floor(math.Log10(math.Abs(x))))
	if s >= 0 {
		m := math.Pow(10, float64(s))
		return math.Floor(x*m+1e-7) / m
	}
	m := math.Pow(10, float64(-s))
	return math.Floor(x/m+1e-7) * m
}

// Cut is how a feature is bucketed: by value, or at Edges (lower edges,
// ascending, the first the minimum).
type Cut struct {
	ByValue bool
	Edges   []float64
}

// Cuts computes every feature's cut from the ok pairs of every arm,
// configuration and fork step, as feature_bins documents it: bool and enum
// by value, and an int whose values span fewer than 12 integers; any other
// number at the deciles of its values truncated to three significant
// digits (the smallest value whose cumulative count reaches i/10 of all),
// above its minimum.
func Cuts(d world.Declaration, pairs []Pair) []Cut {
	cuts := make([]Cut, len(d.Features))
	for i, f := range d.Features {
		cuts[i].ByValue = true
		if f.Kind != world.Int && f.Kind != world.Float {
			continue
		}
		lo, hi, any := math.Inf(1), math.Inf(-1), false
		for _, p := range pairs {
			if !p.Error && !p.Features[i].Null {
				x := p.Features[i].Number(f.Kind)
				lo, hi, any = math.Min(lo, x), math.Max(hi, x), true
			}
		}
		if !any || (f.Kind == world.Int && hi-lo < 12) {
			continue
		}
		count := map[float64]int64{}
		for _, p := range pairs {
			if !p.Error && !p.Features[i].Null {
				count[Truncate(p.Features[i].Number(f.Kind))]++
			}
		}
		vals := make([]float64, 0, len(count))
		var total int64
		for v, n := range count {
			vals = append(vals, v)
			total += n
		}
		sort.Float64s(vals)
		cuts[i].ByValue = false
		edges := []float64{vals[0]}
		seen := map[float64]bool{}
		for q := int64(1); q < 10; q++ {
			var cum int64
			for _, v := range vals {
				cum += count[v]
				if float64(cum) >= float64(total*q)/10 {
					if v > vals[0] && !seen[v] {
						seen[v] = true
						edges = append(edges, v)
					}
					break
				}
			}
		}
		sort.Float64s(edges[1:])
		cuts[i].Edges = edges
	}
	return cuts
}

// Key is the bucket of value v of feature f: bool 0/1, an enum's position
// (0 when undeclared), a number cut by value itself, any other number the
// largest edge at or below it (the first edge below them all); false for
// a missing value.
func (c Cut) Key(f world.Field, v world.Value) (float64, bool) {
	if v.Null {
		return 0, false
	}
	switch f.Kind {
	case world.Bool:
		return float64(v.I), true
	case world.Enum:
		for i, x := range f.Values {
			if x == v.S {
				return float64(i + 1), true
			}
		}
		return 0, true
	}
	x := v.Number(f.Kind)
	if c.ByValue {
		return x, true
	}
	x = Truncate(x)
	k := c.Edges[0]
	for _, e := range c.Edges {
		if x >= e {
			k = e
		}
	}
	return k, true
}

// hi is the upper edge of the bucket whose key is k; false for the last.
func (c Cut) hi(k float64) (float64, bool) {
	for _, e := range c.Edges {
		if e > k {
			return e, true
		}
	}
	return 0, false
}

// Label is how slices write bucket k of feature f: the value ('true', '3',
// 'stale'), or '< 1440', '[1440, 1750)', '>= 3840'.
func (c Cut) Label(f world.Field, k float64) string {
	switch {
	case f.Kind == world.Bool:
		return strconv.FormatBool(k == 1)
	case f.Kind == world.Enum:
		if k >= 1 && int(k) <= len(f.Values) {
			return f.Values[int(k)-1]
		}
		return "other"
	case c.ByValue:
		return numText(k)
	}
	hi, ok := c.hi(k)
	switch {
	case !ok:
		return ">= " + numText(k)
	case k == c.Edges[0]:
		return "< " + numText(hi)
	}
	return "[" + numText(k) + ", " + numText(hi) + ")"
}

// SliceKey names one slice: a group, a feature and a bucket's label
// ("null" for a missing value).
type SliceKey struct {
	Group
	Feature, Value string
}

// Slices counts the ok pairs by every feature's bucket, leaving out a
// feature with one bucket in a group (constant there, as steps_used at a
// fixed fork step: its slice would be the group's headline).
func Slices(d world.Declaration, pairs []Pair) map[SliceKey]Counts {
	cuts := Cuts(d, pairs)
	out := map[SliceKey]Counts{}
	for _, p := range pairs {
		if p.Error {
			continue
		}
		for i, f := range d.Features {
			label := "null"
			if k, ok := cuts[i].Key(f, p.Features[i]); ok {
				label = cuts[i].Label(f, k)
			}
			k := SliceKey{Group{p.ConfigID, p.ForkStep, p.Arm}, f.Name, label}
			c := out[k]
			c.add(p)
			out[k] = c
		}
	}
	buckets := map[SliceKey]int{}
	for k := range out {
		buckets[SliceKey{Group: k.Group, Feature: k.Feature}]++
	}
	for k := range out {
		if buckets[SliceKey{Group: k.Group, Feature: k.Feature}] == 1 {
			delete(out, k)
		}
	}
	return out
}

// Side is a trigger's counts on one side of the split.
type Side struct {
	Pairs, Fires, Rescued, Harmed, HarmedClean int64
	// Extra sums the fired pairs' extra cost per cost field; NaN when no
	// fired pair reports it.
	Extra [4]float64
}

// Candidate is one trigger of the brute-force search.
type Candidate struct {
	Trigger    string
	Conditions int
	WithinCap  bool
	Search     Side
	Holdout    Side
	order      []float64
}

type condition struct {
	feature  int
	op       string
	opOrder  int
	key      float64
	text     string
	holds    func(world.Value) bool
	describe string
}

// SearchOptions are the brute-force search's settings.
type SearchOptions struct {
	MaxHarm int64
	Scope   string // "clean" or "all"
	Holdout float64
}

// Search enumerates, for every configuration and fork step, the triggers
// policy_search.sql documents over the ok pairs of arm on, evaluates each
// on every pair, and ranks them as it documents. The result maps
// (config_id, fork_step) to the candidates, best first.
func Search(d world.Declaration, pairs []Pair, o SearchOptions) map[[2]int][]Candidate {
	groups := map[[2]int][]Pair{}
	for _, p := range pairs {
		if p.Arm == "on" && !p.Error {
			k := [2]int{p.ConfigID, p.ForkStep}
			groups[k] = append(groups[k], p)
		}
	}
	cuts := Cuts(d, pairs)
	out := map[[2]int][]Candidate{}
	for k, ps := range groups {
		out[k] = searchGroup(d, cuts, ps, o)
	}
	return out
}

func conditionsOf(d world.Declaration, cuts []Cut, ps []Pair) []condition {
	var conds []condition
	for i, f := range d.Features {
		c := cuts[i]
		seen := map[float64]bool{}
		for _, p := range ps {
			if k, ok := c.Key(f, p.Features[i]); ok {
				seen[k] = true
			}
		}
		keys := make([]float64, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		sort.Float64s(keys)
		key := func(x world.Value) (float64, bool) { return c.Key(f, x) }
		numeric := f.Kind == world.Int || f.Kind == world.Float
		for _, k := range keys {
			k := k
			if c.ByValue {
				conds = append(conds, condition{feature: i, op: "=", opOrder: 1, key: k, text: c.Label(f, k),
					holds: func(x world.Value) bool { y, ok := key(x); return ok && y == k }})
			}
			if f.Kind == world.Enum && len(keys) > 2 {
				conds = append(conds, condition{feature: i, op: "!=", opOrder: 2, key: k, text: c.Label(f, k),
					holds: func(x world.Value) bool { y, ok := key(x); return ok && y != k }})
			}
			if numeric && k > keys[0] {
				conds = append(conds, condition{feature: i, op: ">=", opOrder: 3, key: k, text: numText(k),
					holds: func(x world.Value) bool { y, ok := key(x); return ok && y >= k }})
			}
			if numeric && k < keys[len(keys)-1] {
				op, text := "<=", numText(k)
				if !c.ByValue {
					hi, _ := c.hi(k)
					op, text = "<", numText(hi)
				}
				conds = append(conds, condition{feature: i, op: op, opOrder: 4, key: k, text: text,
					holds: func(x world.Value) bool { y, ok := key(x); return ok && y <= k }})
			}
		}
	}
	for j := range conds {
		conds[j].describe = d.Features[conds[j].feature].Name + " " + conds[j].op + " " + conds[j].text
	}
	return conds
}

func searchGroup(d world.Declaration, cuts []Cut, ps []Pair, o SearchOptions) []Candidate {
	total := int64(len(ps))
	score := func(name string, n int, order []float64, fires func(Pair) bool) Candidate {
		c := Candidate{Trigger: name, Conditions: n, order: order}
		for i := range c.Search.Extra {
			c.Search.Extra[i], c.Holdout.Extra[i] = math.NaN(), math.NaN()
		}
		for _, p := range ps {
			s := &c.Search
			if HeldOut(p.Seed, o.Holdout) {
				s = &c.Holdout
			}
			s.Pairs++
			if !fires(p) {
				continue
			}
			s.Fires++
			switch p.Label() {
			case "rescued":
				s.Rescued++
			case "harmed":
				s.Harmed++
				if p.Fault == nil || !*p.Fault {
					s.HarmedClean++
				}
			}
			for i, x := range p.Extra {
				if x != nil {
					if math.IsNaN(s.Extra[i]) {
						s.Extra[i] = 0
					}
					// The views sum extra costs to a millionth.
					s.Extra[i] += math.Round(*x*1e6) / 1e6
				}
			}
		}
		capped := c.Search.HarmedClean
		if o.Scope == "all" {
			capped = c.Search.Harmed
		}
		c.WithinCap = capped <= o.MaxHarm
		return c
	}
	var cands []Candidate
	cands = append(cands, score("always", 0, []float64{-1, 0, 0, 0, 0, 0}, func(Pair) bool { return true }))
	never := score("never", 0, []float64{0, 0, 0, 0, 0, 0}, func(Pair) bool { return false })
	for i := range never.Search.Extra {
		// never fires on nothing: its extra cost is 0 on a side where
		// some pair reports the field.
		if !math.IsNaN(cands[0].Search.Extra[i]) {
			never.Search.Extra[i] = 0
		}
		if !math.IsNaN(cands[0].Holdout.Extra[i]) {
			never.Holdout.Extra[i] = 0
		}
	}
	cands = append(cands, never)
	conds := conditionsOf(d, cuts, ps)
	var useful []condition
	for _, c := range conds {
		c := c
		cand := score(c.describe, 1, []float64{float64(c.feature + 1), float64(c.opOrder), c.key, 0, 0, 0},
			func(p Pair) bool { return c.holds(p.Features[c.feature]) })
		if cand.Search.Fires+cand.Holdout.Fires < total {
			cands = append(cands, cand)
			useful = append(useful, c)
		}
	}
	for _, a := range useful {
		for _, b := range useful {
			if a.feature >= b.feature {
				continue
			}
			a, b := a, b
			cand := score(a.describe+" AND "+b.describe, 2,
				[]float64{float64(a.feature + 1), float64(a.opOrder), a.key, float64(b.feature + 1), float64(b.opOrder), b.key},
				func(p Pair) bool { return a.holds(p.Features[a.feature]) && b.holds(p.Features[b.feature]) })
			if f := cand.Search.Fires + cand.Holdout.Fires; f > 0 && f < total {
				cands = append(cands, cand)
			}
		}
	}
	costOrder := []int{2, 1, 0, 3} // usd, tokens, steps, seconds
	zero := func(x float64) float64 {
		if math.IsNaN(x) {
			return 0
		}
		return math.Round(x*1e6) / 1e6
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.WithinCap != b.WithinCap {
			return a.WithinCap
		}
		if a.Search.Rescued != b.Search.Rescued {
			return a.Search.Rescued > b.Search.Rescued
		}
		if a.Conditions != b.Conditions {
			return a.Conditions < b.Conditions
		}
		if a.Search.Harmed != b.Search.Harmed {
			return a.Search.Harmed < b.Search.Harmed
		}
		for _, k := range costOrder {
			if x, y := zero(a.Search.Extra[k]), zero(b.Search.Extra[k]); x != y {
				return x < y
			}
		}
		for k := range a.order {
			if a.order[k] != b.order[k] {
				return a.order[k] < b.order[k]
			}
		}
		return false
	})
	return cands
}

// QiniPoint is one decile of the brute-force uplift curve.
type QiniPoint struct {
	FireRate                   float64
	Fired                      int64
	Rescued, Harmed, Net, Rand float64
}

// Qini computes, for one configuration and fork step, the uplift curve
// qini.sql documents: held-out ok pairs of arm on scored by the net rate of
// their feature buckets on the search pairs (0 when unseen), fired best
// first, pairs of equal score in every order equally likely (so counts
// inside a tie are expected values); and the Qini coefficient, the exact
// area between that curve and the random line over m².
func Qini(d world.Declaration, pairs []Pair, configID, forkStep int, holdout float64) ([]QiniPoint, float64) {
	cuts := Cuts(d, pairs)
	profile := func(p Pair) string {
		var b strings.Builder
		for i, f := range d.Features {
			if k, ok := cuts[i].Key(f, p.Features[i]); ok {
				fmt.Fprintf(&b, "%v|", k)
			} else {
				b.WriteString("null|")
			}
		}
		return b.String()
	}
	type acc struct{ n, net float64 }
	scores := map[string]*acc{}
	var held []Pair
	for _, p := range pairs {
		if p.Arm != "on" || p.Error || p.ConfigID != configID || p.ForkStep != forkStep {
			continue
		}
		if HeldOut(p.Seed, holdout) {
			held = append(held, p)
			continue
		}
		a := scores[profile(p)]
		if a == nil {
			a = &acc{}
			scores[profile(p)] = a
		}
		a.n++
		a.net += gain(p)
	}
	score := func(p Pair) float64 {
		if a := scores[profile(p)]; a != nil {
			return a.net / a.n
		}
		return 0
	}
	sort.SliceStable(held, func(i, j int) bool { return score(held[i]) > score(held[j]) })
	m := len(held)
	// Cumulative expected counts after k pairs, k = 0..m.
	resc, harm := make([]float64, m+1), make([]float64, m+1)
	for i := 0; i < m; {
		j := i
		var r, h float64
		for j < m && score(held[j]) == score(held[i]) {
			if held[j].Label() == "rescued" {
				r++
			}
			if held[j].Label() == "harmed" {
				h++
			}
			j++
		}
		n := float64(j - i)
		for k := i + 1; k <= j; k++ {
			resc[k] = resc[i] + r*float64(k-i)/n
			harm[k] = harm[i] + h*float64(k-i)/n
		}
		i = j
	}
	total := resc[m] - harm[m]
	var pts []QiniPoint
	for d := 0; d <= 10; d++ {
		f := float64(d) / 10
		k := int(math.Round(f * float64(m)))
		pts = append(pts, QiniPoint{FireRate: f, Fired: int64(k), Rescued: resc[k], Harmed: harm[k], Net: resc[k] - harm[k], Rand: f * total})
	}
	// The curve is linear between consecutive pairs (and inside ties), so
	// the trapezoid rule over every k is exact.
	area := 0.0
	for k := 1; k <= m; k++ {
		x0, x1 := float64(k-1), float64(k)
		n0, n1 := resc[k-1]-harm[k-1], resc[k]-harm[k]
		area += (n0+n1)/2 - total/float64(m)*(x1*x1-x0*x0)/2
	}
	if m == 0 {
		return pts, 0
	}
	return pts, area / float64(m*m)
}

func gain(p Pair) float64 {
	switch p.Label() {
	case "rescued":
		return 1
	case "harmed":
		return -1
	}
	return 0
}

// ReadPairs reads the rows of a results directory's pairs as they are
// stored (the view pair_rows: no analysis, only the files), for the
// references to recount.
func ReadPairs(t testing.TB, db *sql.DB, d world.Declaration) []Pair {
	t.Helper()
	cols := []string{"config_id", "fork_step", "seed", "arm", "status", "control_success", "treatment_success", "fault"}
	cols = append(cols, "score_control", "score_treated", "score_diff")
	for _, f := range d.Features {
		cols = append(cols, `"`+f.Name+`"`)
	}
	for _, c := range world.CostFields {
		cols = append(cols, "extra_"+c)
	}
	rows, err := db.Query("SELECT " + strings.Join(cols, ", ") + " FROM pair_rows")
	if err != nil {
		t.Fatal(err)
	}
	_, all, err := duck.ScanAll(rows)
	if err != nil {
		t.Fatal(err)
	}
	var out []Pair
	for _, vals := range all {
		p := Pair{ConfigID: int(vals[0].(int32)), ForkStep: int(vals[1].(int32)), Seed: vals[2].(int64), Arm: vals[3].(string),
			Error: vals[4] != "ok"}
		if !p.Error {
			p.Control, p.Treatment = vals[5].(bool), vals[6].(bool)
		}
		if b, ok := vals[7].(bool); ok {
			p.Fault = &b
		}
		if c, ok := vals[8].(float64); ok {
			p.Score = &[3]float64{c, vals[9].(float64), vals[10].(float64)}
		}
		vals = append(vals[:8], vals[11:]...)
		for i, f := range d.Features {
			v := vals[8+i]
			switch {
			case v == nil:
				p.Features = append(p.Features, world.NullValue())
			case f.Kind == world.Bool:
				p.Features = append(p.Features, world.BoolValue(v.(bool)))
			case f.Kind == world.Int:
				p.Features = append(p.Features, world.IntValue(v.(int64)))
			case f.Kind == world.Float:
				p.Features = append(p.Features, world.FloatValue(v.(float64)))
			default:
				p.Features = append(p.Features, world.EnumValue(v.(string)))
			}
		}
		for i := range world.CostFields {
			if x, ok := vals[8+len(d.Features)+i].(float64); ok {
				p.Extra[i] = &x
			}
		}
		out = append(out, p)
	}
	return out
}

// Scores are the paired score differences (Score[2]) of the ok pairs of a
// group or a slice, in the order of the pairs.
type Scores map[Group][]float64

// ScoreDiffs collects the score differences of the ok pairs of each
// configuration, fork step and arm, and of each slice (as Slices cuts
// them): what summary.sql's and slices.sql's mean_score_diff, paired t
// interval and Wilcoxon test read, for stats.PairedT and stats.Wilcoxon to
// compute again pair by pair.
func ScoreDiffs(d world.Declaration, pairs []Pair) (Scores, map[SliceKey][]float64) {
	cuts := Cuts(d, pairs)
	groups, slices := Scores{}, map[SliceKey][]float64{}
	for _, p := range pairs {
		if p.Error || p.Score == nil {
			continue
		}
		g := Group{p.ConfigID, p.ForkStep, p.Arm}
		groups[g] = append(groups[g], p.Score[2])
		for i, f := range d.Features {
			label := "null"
			if k, ok := cuts[i].Key(f, p.Features[i]); ok {
				label = cuts[i].Label(f, k)
			}
			k := SliceKey{g, f.Name, label}
			slices[k] = append(slices[k], p.Score[2])
		}
	}
	return groups, slices
}

// ScoresGolden is testdata/stats/scores.json, the reference values of the
// graded-outcome statistics that testdata/stats/gen_scores.py computes
// with SciPy, mpmath and statsmodels.
type ScoresGolden struct {
	// T975 holds [df, t(0.975; df)].
	T975 [][]float64 `json:"t975"`
	// Wilcoxon holds samples of differences, their nonzero count and
	// scipy.stats.wilcoxon's p (nil: every difference is 0).
	Wilcoxon []struct {
		Name string    `json:"name"`
		D    []float64 `json:"d"`
		N    int64     `json:"n"`
		P    *float64  `json:"p"`
	} `json:"wilcoxon"`
	// PairedT holds the same samples' mean and paired t interval (nil
	// ends: fewer than two differences).
	PairedT []struct {
		Name string    `json:"name"`
		D    []float64 `json:"d"`
		Mean float64   `json:"mean"`
		Lo   *float64  `json:"lo"`
		Hi   *float64  `json:"hi"`
	} `json:"paired_t"`
	// Holm holds p-values and statsmodels' Holm adjustment of them.
	Holm []struct {
		P        []float64 `json:"p"`
		Adjusted []float64 `json:"adjusted"`
	} `json:"holm"`
}

// LoadScores reads testdata/stats/scores.json from a test three folders
// below the repository's root (pipeline/analysis/X).
func LoadScores(t testing.TB) ScoresGolden {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/stats/scores.json")
	if err != nil {
		t.Fatal(err)
	}
	var g ScoresGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.T975) < 100 || len(g.Wilcoxon) < 10 || len(g.PairedT) != len(g.Wilcoxon) || len(g.Holm) < 4 {
		t.Fatal("testdata/stats/scores.json is incomplete")
	}
	return g
}
