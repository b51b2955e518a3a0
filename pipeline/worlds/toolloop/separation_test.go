package toolloop_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// pairRow is one seed's pair at a fork step: the checkpoint's features,
// its fault flag and the pair's label.
type pairRow struct {
	feats []world.Value
	fault bool
	label fork.Label
}

// pairs forks seeds [0, n) at forkAt into off and arm through fork.Lab and
// labels every pair (replica 0).
func pairs(t testing.TB, lab fork.Lab[toolloop.State], n, forkAt int, arm fork.Arm) []pairRow {
	t.Helper()
	fault := lab.Decl.FaultIndex()
	rows := make([]pairRow, n)
	var hidden []world.Value
	var final toolloop.State
	for seed := range uint64(n) {
		s := lab.World.Start(seed)
		lab.Advance(&s, fork.PrefixKey(seed), forkAt, nil)
		off, _ := lab.Branch(&final, &s, seed, forkAt, fork.Off, 0, false)
		on, _ := lab.Branch(&final, &s, seed, forkAt, arm, 0, true)
		label, _ := fork.Classify(off, on)
		hidden = lab.World.Hidden(&s, hidden[:0])
		rows[seed] = pairRow{feats: lab.World.Features(&s, nil), fault: hidden[fault].Bool(), label: label}
	}
	return rows
}

// condition is one trigger condition: feature op value.
type condition struct {
	feature int
	op      string // "=", ">=", "<="
	rank    int    // the value, as its rank among the feature's observed values
}

// trigger is a single condition or a conjunction of two on different
// features, with what it keeps.
type trigger struct {
	conds   []condition
	rescued int
}

// searchSpace holds, for the pairs that matter to the harm-capped search
// (the rescued ones, and the harmed ones on clean runs), each feature's
// value as a dense rank among its observed values.
type searchSpace struct {
	decl   world.Declaration
	values [][]world.Value // per feature, the observed values in rank order
	rank   [][]int32       // per feature, per relevant row
	harm   []bool          // per relevant row: a harm on a clean run (else a rescue)
	oracle int             // rescued pairs: what the oracle trigger keeps
}

func newSearchSpace(d world.Declaration, rows []pairRow) *searchSpace {
	sp := &searchSpace{decl: d}
	var rel []pairRow
	for _, r := range rows {
		switch {
		case r.label == fork.Rescued:
			sp.oracle++
			rel = append(rel, r)
			sp.harm = append(sp.harm, false)
		case r.label == fork.Harmed && !r.fault:
			rel = append(rel, r)
			sp.harm = append(sp.harm, true)
		}
	}
	for fi, f := range d.Features {
		key := func(v world.Value) float64 {
			if f.Kind == world.Enum {
				return float64(slices.Index(f.Values, v.S))
			}
			return v.Number(f.Kind)
		}
		var vals []world.Value
		seen := map[float64]bool{}
		for _, r := range rows { // observed values over all pairs
			if k := key(r.feats[fi]); !seen[k] {
				seen[k] = true
				vals = append(vals, r.feats[fi])
			}
		}
		sort.Slice(vals, func(i, j int) bool { return key(vals[i]) < key(vals[j]) })
		index := map[float64]int32{}
		for i, v := range vals {
			index[key(v)] = int32(i)
		}
		ranks := make([]int32, len(rel))
		for i, r := range rel {
			ranks[i] = index[key(r.feats[fi])]
		}
		sp.values = append(sp.values, vals)
		sp.rank = append(sp.rank, ranks)
	}
	return sp
}

// ordered says whether feature f takes >= and <= conditions (ints and
// floats); bools and enums take = only.
func (sp *searchSpace) ordered(f int) bool {
	k := sp.decl.Features[f].Kind
	return k == world.Int || k == world.Float
}

func (sp *searchSpace) String(c condition) string {
	f := sp.decl.Features[c.feature]
	return fmt.Sprintf("%s %s %s", f.Name, c.op, sp.values[c.feature][c.rank].Text(f.Kind))
}

func (sp *searchSpace) describe(tr trigger) string {
	var s string
	for i, c := range tr.conds {
		if i > 0 {
			s += " and "
		}
		s += sp.String(c)
	}
	return s
}

// all lists every condition on every feature.
func (sp *searchSpace) all() []condition {
	var cs []condition
	for f := range sp.decl.Features {
		for r := range sp.values[f] {
			cs = append(cs, condition{f, "=", r})
			if sp.ordered(f) {
				cs = append(cs, condition{f, ">=", r}, condition{f, "<=", r})
			}
		}
	}
	return cs
}

func (c condition) holds(rank int32) bool {
	switch c.op {
	case "=":
		return int(rank) == c.rank
	case ">=":
		return int(rank) >= c.rank
	}
	return int(rank) <= c.rank
}

// bestWithin returns the best condition on feature f among the relevant
// rows in subset (nil: all): the one keeping the most rescues with no harm
// on a clean run; ok is false when none keeps any. cnt and bad are scratch
// space of at least the feature's number of values, all zero, left zero.
func (sp *searchSpace) bestWithin(f int, subset []int32, cnt []int32, bad []bool) (best condition, rescued int, ok bool) {
	ranks := sp.rank[f]
	maxHarm, minHarm := int32(-1), int32(len(sp.values[f]))
	for _, i := range subset {
		r := ranks[i]
		if sp.harm[i] {
			bad[r] = true
			maxHarm, minHarm = max(maxHarm, r), min(minHarm, r)
		} else {
			cnt[r]++
		}
	}
	consider := func(c condition, n int) {
		if n > rescued {
			best, rescued, ok = c, n, true
		}
	}
	above, below := 0, 0
	lowest, highest := int32(len(sp.values[f])), int32(-1) // rescue ranks above maxHarm / below minHarm
	for _, i := range subset {
		r := ranks[i]
		if sp.harm[i] {
			continue
		}
		if r > maxHarm {
			above++
			lowest = min(lowest, r)
		}
		if r < minHarm {
			below++
			highest = max(highest, r)
		}
	}
	for _, i := range subset {
		r := ranks[i]
		if !bad[r] {
			consider(condition{f, "=", int(r)}, int(cnt[r]))
		}
	}
	if sp.ordered(f) {
		if above > 0 {
			consider(condition{f, ">=", int(lowest)}, above)
		}
		if below > 0 {
			consider(condition{f, "<=", int(highest)}, below)
		}
	}
	for _, i := range subset {
		cnt[ranks[i]], bad[ranks[i]] = 0, false
	}
	return best, rescued, ok
}

// search returns the best single-feature trigger and the best conjunction
// of two conditions on different features, each under the zero-harm cap
// (no harm on a clean run). It is exhaustive over the conditions feature =
// v, >= v, <= v on the observed values (= only for bools and enums), and
// takes shortcuts that cannot change the answer:
//
//   - a first condition >= v need only be tried at the lowest value and
//     just above each value a harm has: any other v can be lowered to the
//     next such point, adding rescues only (and <= v likewise); = v need
//     only be tried where some rescue has value v;
//   - the rows sorted by the first feature's value make every first
//     condition a contiguous run of them; the thresholds' runs are the
//     suffixes and prefixes, swept once while a running tally per second
//     feature (running) gives that feature's best condition at each
//     point; the = runs are short and tallied afresh (bestWithin).
//
// TestSearchMatchesBruteForce holds it to plain enumeration.
func (sp *searchSpace) search() (single, pair trigger) {
	every := make([]int32, len(sp.harm))
	for i := range every {
		every[i] = int32(i)
	}
	size := 0
	for _, v := range sp.values {
		size = max(size, len(v))
	}
	cnt, bad := make([]int32, size), make([]bool, size)
	for f := range sp.decl.Features {
		if c, n, ok := sp.bestWithin(f, every, cnt, bad); ok && n > single.rescued {
			single = trigger{conds: []condition{c}, rescued: n}
		}
	}
	pair = single
	// best is the conjunction found so far, as its first condition, the run
	// of rows it fires on and the second condition's feature; its second
	// condition is made at the end.
	var best struct {
		first  condition
		subset []int32
		g      int
	}
	best.g = -1
	consider := func(c condition, subset []int32, g, n int) {
		if n > pair.rescued {
			pair.rescued = n
			best.first, best.subset, best.g = c, subset, g
		}
	}
	tallies := make([]*running, len(sp.decl.Features))
	for f := range sp.decl.Features {
		sorted := slices.Clone(every)
		ranks := sp.rank[f]
		slices.SortStableFunc(sorted, func(a, b int32) int { return int(ranks[a]) - int(ranks[b]) })
		from := func(r int32) int { // first position whose rank is >= r
			i, _ := slices.BinarySearchFunc(sorted, r, func(row, r int32) int { return int(ranks[row]) - int(r) })
			return i
		}
		// = v where some rescue has value v.
		for i, row := range sorted {
			r := ranks[row]
			if i > 0 && ranks[sorted[i-1]] == r {
				continue
			}
			subset := sorted[i:from(r+1)]
			c := condition{f, "=", int(r)}
			if !slices.ContainsFunc(subset, func(row int32) bool { return !sp.harm[row] }) {
				continue
			}
			for g := range sp.decl.Features {
				if g != f {
					if _, n, ok := sp.bestWithin(g, subset, cnt, bad); ok {
						consider(c, subset, g, n)
					}
				}
			}
		}
		if !sp.ordered(f) || len(sorted) == 0 {
			continue
		}
		// >= v at the lowest value and just above each harm's value: the
		// suffixes sorted[j:], grown from the top; <= v likewise with the
		// prefixes sorted[:j], grown from the bottom.
		for _, dir := range []string{">=", "<="} {
			for g := range sp.decl.Features {
				tallies[g] = nil
				if g != f {
					tallies[g] = newRunning(sp, g)
				}
			}
			n := len(sorted)
			for k := range n {
				j := n - 1 - k // the suffix sorted[j:]
				if dir == "<=" {
					j = k + 1 // the prefix sorted[:j]
				}
				row := sorted[n-1-k]
				if dir == "<=" {
					row = sorted[k]
				}
				for _, t := range tallies {
					if t != nil {
						t.add(row)
					}
				}
				var c condition
				var subset []int32
				switch {
				case dir == ">=" && (j == 0 || (sp.harm[sorted[j-1]] && ranks[sorted[j-1]] != ranks[sorted[j]])):
					c, subset = condition{f, ">=", int(ranks[sorted[j]])}, sorted[j:]
				case dir == "<=" && (j == n || (sp.harm[sorted[j]] && ranks[sorted[j]] != ranks[sorted[j-1]])):
					c, subset = condition{f, "<=", int(ranks[sorted[j-1]])}, sorted[:j]
				default:
					continue
				}
				for g, t := range tallies {
					if t != nil {
						consider(c, subset, g, t.best())
					}
				}
			}
		}
	}
	if best.g >= 0 {
		d, n, _ := sp.bestWithin(best.g, best.subset, cnt, bad)
		if n != pair.rescued {
			panic(fmt.Sprintf("running tally %d, recount %d", pair.rescued, n))
		}
		pair.conds = []condition{best.first, d}
	}
	return single, pair
}

// running tallies, for one feature g, the rows added so far, so that the
// best condition on g among them (as bestWithin finds it) is known at any
// point: rescues per value, the values a harm has, the highest and lowest
// of those, and a Fenwick tree of rescues by value for the thresholds.
type running struct {
	sp               *searchSpace
	g                int
	cnt              []int32
	bad              []bool
	tree             []int32 // Fenwick tree over ranks, 1-based
	rescues          int
	maxHarm, minHarm int32
	eq, eqRank       int32 // the best = v: its rescues and value
}

func newRunning(sp *searchSpace, g int) *running {
	d := len(sp.values[g])
	return &running{sp: sp, g: g, cnt: make([]int32, d), bad: make([]bool, d), tree: make([]int32, d+1),
		maxHarm: -1, minHarm: int32(d), eqRank: -1}
}

func (t *running) add(row int32) {
	r := t.sp.rank[t.g][row]
	if t.sp.harm[row] {
		t.bad[r] = true
		t.maxHarm, t.minHarm = max(t.maxHarm, r), min(t.minHarm, r)
		if r == t.eqRank { // the best = v lost its place
			t.eq, t.eqRank = 0, -1
			for v, c := range t.cnt {
				if !t.bad[v] && c > t.eq {
					t.eq, t.eqRank = c, int32(v)
				}
			}
		}
		return
	}
	t.rescues++
	t.cnt[r]++
	if !t.bad[r] && t.cnt[r] > t.eq {
		t.eq, t.eqRank = t.cnt[r], r
	}
	for i := int(r) + 1; i < len(t.tree); i += i & -i {
		t.tree[i]++
	}
}

// below counts the rescues with rank < r.
func (t *running) below(r int32) int {
	n := 0
	for i := int(r); i > 0; i -= i & -i {
		n += int(t.tree[i])
	}
	return n
}

// best is the most rescues a condition on g keeps among the rows added,
// with no harm: = v, and for ordered features >= v and <= v.
func (t *running) best() int {
	n := int(t.eq)
	if t.sp.ordered(t.g) {
		n = max(n, t.rescues-t.below(t.maxHarm+1), t.below(t.minHarm))
	}
	return n
}

// check recounts a trigger over all pairs, independently of the search:
// the rescues it keeps and the harms on clean runs it lets through.
func (sp *searchSpace) check(rows []pairRow, tr trigger) (rescued, cleanHarms int) {
	for _, r := range rows {
		fires := true
		for _, c := range tr.conds {
			f := sp.decl.Features[c.feature]
			v, w := r.feats[c.feature], sp.values[c.feature][c.rank]
			var cmp int
			if f.Kind == world.Enum {
				cmp = slices.Index(f.Values, v.S) - slices.Index(f.Values, w.S)
			} else {
				a, b := v.Number(f.Kind), w.Number(f.Kind)
				cmp = map[bool]int{true: -1, false: 0}[a < b] + map[bool]int{true: 1, false: 0}[a > b]
			}
			switch c.op {
			case "=":
				fires = fires && cmp == 0
			case ">=":
				fires = fires && cmp >= 0
			default:
				fires = fires && cmp <= 0
			}
		}
		if !fires {
			continue
		}
		switch {
		case r.label == fork.Rescued:
			rescued++
		case r.label == fork.Harmed && !r.fault:
			cleanHarms++
		}
	}
	return rescued, cleanHarms
}

// By design no single pre-decision feature separates the runs verify
// rescues from those it harms. On 20,000 seeds forked at step 2 (arms off
// and on, greedy model, default parameters), under the seed's zero-harm cap
// (no harm on a clean run, hidden fault false):
//
//   - the best single-feature trigger keeps under 90% of the rescues an
//     oracle trigger keeps (the oracle fires exactly on the rescued pairs,
//     so it keeps them all and harms none);
//   - the best conjunction of two conditions on different features keeps
//     more than the best single one.
//
// The search enumerates feature = v, >= v and <= v over every observed
// value (= only for bools and enums), and every pair of such conditions;
// each winner is recounted over all pairs by a plain loop.
// testdata/toolloop/golden.json pins the numbers.
func TestNoSingleFeatureSeparates(t *testing.T) {
	if testing.Short() {
		t.Skip("plays 20,000 seeds")
	}
	got, sp, rows, single, pair := separation(t)
	t.Logf("oracle keeps %d rescues; best single %q keeps %d (%.1f%%); best conjunction %q keeps %d (%.1f%%)",
		got.Oracle, got.Single, got.SingleRescued, 100*float64(got.SingleRescued)/float64(got.Oracle),
		got.Pair, got.PairRescued, 100*float64(got.PairRescued)/float64(got.Oracle))
	for _, tr := range []trigger{single, pair} {
		r, h := sp.check(rows, tr)
		if r != tr.rescued || h != 0 {
			t.Fatalf("%s: the search says %d rescues, a recount %d rescues and %d harms on clean runs", sp.describe(tr), tr.rescued, r, h)
		}
	}
	if len(single.conds) != 1 || len(pair.conds) != 2 || pair.conds[0].feature == pair.conds[1].feature {
		t.Fatalf("single %q, conjunction %q", got.Single, got.Pair)
	}
	if got.Oracle < 2000 {
		t.Fatalf("only %d rescues in 20,000 pairs", got.Oracle)
	}
	if 10*got.SingleRescued >= 9*got.Oracle {
		t.Errorf("a single feature separates: %q keeps %d of %d rescues", got.Single, got.SingleRescued, got.Oracle)
	}
	if got.PairRescued <= got.SingleRescued {
		t.Errorf("the best conjunction %q keeps %d rescues, no more than the best single %q (%d)", got.Pair, got.PairRescued, got.Single, got.SingleRescued)
	}
}

// The search finds what brute force finds: on small samples of two worlds,
// every single condition and every conjunction is evaluated pair by pair
// with plain value comparisons, and the best rescue counts agree.
func TestSearchMatchesBruteForce(t *testing.T) {
	noisy := toolloop.Default()
	noisy.PFault, noisy.PDuplicate = 0.6, 0.3
	for _, tc := range []struct {
		p     toolloop.Params
		m     fork.Model
		seeds int
	}{
		{toolloop.Default(), fork.Model{}, 300},
		{noisy, fork.Model{Temperature: 0.2, NoTool: 0.5}, 250},
	} {
		lab := newLab(t, tc.p, tc.m)
		rows := pairs(t, lab, tc.seeds, 2, fork.On)
		sp := newSearchSpace(lab.Decl, rows)
		single, pair := sp.search()
		conds := sp.all()
		// fires[c] is the set of rows condition c fires on, as a bitset over
		// the rescued rows and one over the clean harms.
		type set struct{ rescued, harmed []uint64 }
		words := (len(rows) + 63) / 64
		fires := make([]set, len(conds))
		for ci, c := range conds {
			fires[ci] = set{make([]uint64, words), make([]uint64, words)}
			tr := trigger{conds: []condition{c}}
			for i, r := range rows {
				if r.label != fork.Rescued && (r.label != fork.Harmed || r.fault) {
					continue
				}
				if rr, hh := sp.check(rows[i:i+1], tr); rr == 1 {
					fires[ci].rescued[i/64] |= 1 << (i % 64)
				} else if hh == 1 {
					fires[ci].harmed[i/64] |= 1 << (i % 64)
				}
			}
		}
		count := func(a, b set) (int, bool) {
			n := 0
			for w := range words {
				if a.harmed[w]&b.harmed[w] != 0 {
					return 0, false
				}
				n += popcount(a.rescued[w] & b.rescued[w])
			}
			return n, true
		}
		bestSingle, bestPair := 0, 0
		for i := range conds {
			if n, ok := count(fires[i], fires[i]); ok {
				bestSingle = max(bestSingle, n)
			}
			for j := i + 1; j < len(conds); j++ {
				if conds[i].feature == conds[j].feature {
					continue
				}
				if n, ok := count(fires[i], fires[j]); ok {
					bestPair = max(bestPair, n)
				}
			}
		}
		bestPair = max(bestPair, bestSingle) // the search's conjunction is at least its single
		if single.rescued != bestSingle || pair.rescued != bestPair {
			t.Errorf("%d seeds: search found single %d (%s), conjunction %d (%s); brute force %d and %d",
				tc.seeds, single.rescued, sp.describe(single), pair.rescued, sp.describe(pair), bestSingle, bestPair)
		}
		if sp.oracle == 0 || bestSingle == bestPair {
			t.Logf("%d seeds: oracle %d, single %d, pair %d: a weak sample", tc.seeds, sp.oracle, bestSingle, bestPair)
		}
	}
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}
