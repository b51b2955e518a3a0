// Package gate is forklab gate: conditions on a sweep's headline numbers
// that a CI job holds a change to — the harm rate stays under a bound, the
// net is positive and significant, the score does not drop — checked per
// treatment arm, configuration and fork step, each on the point estimate
// or, with Bound, on the worse end of its 95% interval, reported one line
// per condition and as JUnit XML (junit.go).
//
// A Gate comes from forklab gate's flags, or from a spec file's gate key
// (the one forklab sweep --spec reads, which the manifest then holds):
//
//	gate:
//	  arms: [on]              # default: on and policy, those the sweep has
//	  bound: true             # check the 95% interval's worse end
//	  max_harm_rate: 0.02
//	  min_net: 1
//	  per_arm:
//	    policy: {max_harmed: 0}
//
// The package reads the summary's rows (queries/summary.sql) as plain
// values (Row), so that the sweep's spec can hold a Gate without the
// results package.
package gate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/stats"
)

// Thresholds are the conditions on one arm; a nil field is not checked.
// Each is named as its flag (--max-harm-rate) and spec key
// (max_harm_rate).
type Thresholds struct {
	// MaxHarmRate bounds harmed / pairs, a share in [0, 1].
	MaxHarmRate *float64 `json:"max_harm_rate,omitempty"`
	// MaxHarmed bounds the harmed pairs, a count >= 0 (with Bound: the
	// harm rate's upper end times the pairs).
	MaxHarmed *int64 `json:"max_harmed,omitempty"`
	// MinNet is the least net (rescued − harmed), an integer (with Bound:
	// the net rate's lower end times the pairs).
	MinNet *int64 `json:"min_net,omitempty"`
	// MinNetRate is the least net rate, in [−1, 1].
	MinNetRate *float64 `json:"min_net_rate,omitempty"`
	// MaxP is the largest McNemar exact p with a positive net, in (0, 1]:
	// the net must be a gain and significant. A p-value has no interval:
	// Bound leaves it as it is.
	MaxP *float64 `json:"max_p,omitempty"`
	// MaxErrorRate bounds the error pairs' share of all pairs, in [0, 1]
	// (with Bound: its Wilson upper end).
	MaxErrorRate *float64 `json:"max_error_rate,omitempty"`
	// MinScoreDiff is the least mean paired score difference, for a world
	// that declares a score (with Bound: the paired t interval's lower
	// end).
	MinScoreDiff *float64 `json:"min_score_diff,omitempty"`
}

// Gate is what forklab gate checks.
type Gate struct {
	// Arms lists the arms checked; none: on and policy, those the sweep
	// has (the arms that apply the recovery). Arms named in PerArm are
	// checked too, where the sweep has them.
	Arms []string `json:"arms,omitempty"`
	// Bound checks every condition on the worse end of its 95% interval
	// instead of the point estimate.
	Bound bool `json:"bound,omitempty"`
	// Thresholds apply to every arm checked.
	Thresholds
	// PerArm overrides Thresholds for one arm, condition by condition.
	PerArm map[string]Thresholds `json:"per_arm,omitempty"`
}

// TreatmentArms are the arms a gate may check: every arm but the control.
var TreatmentArms = []string{"on", "placebo", "aa", "policy"}

// condition describes one kind of condition.
type condition struct {
	flag string // the flag and, with _ for -, the spec key
	what string // what is compared, for people
}

// conditions in the order they are checked and printed.
var conditions = []condition{
	{"max-harm-rate", "harm rate"}, {"max-harmed", "harmed"}, {"min-net", "net"}, {"min-net-rate", "net rate"},
	{"max-p", "McNemar p"}, {"max-error-rate", "error rate"}, {"min-score-diff", "mean score difference"},
}

// Flags lists the threshold flags, in the order they are checked.
func Flags() []string {
	out := make([]string, len(conditions))
	for i, c := range conditions {
		out[i] = c.flag
	}
	return out
}

// ErrInput marks a gate that cannot be checked: a threshold outside its
// domain, an unknown arm, no condition at all, a condition on a score the
// world does not declare. forklab gate exits 2 on it.
var ErrInput = errors.New("bad gate")

func inputErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, a...))
}

// Empty reports whether t sets no condition.
func (t Thresholds) Empty() bool { return t == Thresholds{} }

// With returns t with the conditions o sets replacing t's.
func (t Thresholds) With(o Thresholds) Thresholds {
	return Thresholds{MaxHarmRate: or(o.MaxHarmRate, t.MaxHarmRate), MaxHarmed: or(o.MaxHarmed, t.MaxHarmed),
		MinNet: or(o.MinNet, t.MinNet), MinNetRate: or(o.MinNetRate, t.MinNetRate), MaxP: or(o.MaxP, t.MaxP),
		MaxErrorRate: or(o.MaxErrorRate, t.MaxErrorRate), MinScoreDiff: or(o.MinScoreDiff, t.MinScoreDiff)}
}

// or is a when it is set, else b.
func or[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// MaxExact bounds MaxHarmed and MinNet: 2^53, the largest count JSON
// readers hold exactly.
const MaxExact = 1 << 53

// Validate checks each threshold against its domain, naming the key and
// the domain: shares in [0, 1], the net rate in [−1, 1], p in (0, 1],
// counts within ±2^53 (max_harmed >= 0), a finite score difference.
func (t Thresholds) Validate(prefix string) error {
	share := func(key string, x *float64, lo, hi float64, open bool) error {
		if x == nil {
			return nil
		}
		in := *x >= lo && *x <= hi
		if open {
			in = *x > lo && *x <= hi
		}
		if !in {
			left := "["
			if open {
				left = "("
			}
			return inputErr("%s%s must be a number in %s%g, %g], got %v", prefix, key, left, lo, hi, *x)
		}
		return nil
	}
	for _, err := range []error{
		share("max_harm_rate", t.MaxHarmRate, 0, 1, false),
		share("min_net_rate", t.MinNetRate, -1, 1, false),
		share("max_p", t.MaxP, 0, 1, true),
		share("max_error_rate", t.MaxErrorRate, 0, 1, false),
	} {
		if err != nil {
			return err
		}
	}
	if t.MaxHarmed != nil && (*t.MaxHarmed < 0 || *t.MaxHarmed > MaxExact) {
		return inputErr("%smax_harmed must be an integer in [0, %d], got %d", prefix, int64(MaxExact), *t.MaxHarmed)
	}
	if t.MinNet != nil && (*t.MinNet < -MaxExact || *t.MinNet > MaxExact) {
		return inputErr("%smin_net must be an integer in [%d, %d], got %d", prefix, int64(-MaxExact), int64(MaxExact), *t.MinNet)
	}
	if t.MinScoreDiff != nil && (math.IsNaN(*t.MinScoreDiff) || math.IsInf(*t.MinScoreDiff, 0)) {
		return inputErr("%smin_score_diff must be a finite number, got %v", prefix, *t.MinScoreDiff)
	}
	return nil
}

// Validate checks the gate's arms and thresholds (a spec's gate key is
// checked so before the sweep runs).
func (g *Gate) Validate() error {
	for _, a := range g.Arms {
		if !slices.Contains(TreatmentArms, a) {
			return inputErr("arms: %q is not a treatment arm (%s; off is the control every arm is compared with)", a, strings.Join(TreatmentArms, ", "))
		}
	}
	if err := g.Thresholds.Validate(""); err != nil {
		return err
	}
	for _, a := range sortedKeys(g.PerArm) {
		if !slices.Contains(TreatmentArms, a) {
			return inputErr("per_arm: %q is not a treatment arm (%s)", a, strings.Join(TreatmentArms, ", "))
		}
		if err := g.PerArm[a].Validate("per_arm." + a + "."); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Row is one row of the summary (queries/summary.sql): an arm against off
// at one configuration and fork step. The score fields are NaN for a
// pass/fail world (and the interval for fewer than two pairs).
type Row struct {
	ConfigID, ForkStep                  int
	Arm                                 string
	Pairs, Rescued, Harmed, Net, Errors int64
	HarmRate, HarmHi, NetRate, NetLo    float64
	McNemarP                            float64
	ScoreDiff, ScoreDiffLo, ScoreDiffHi float64
}

// Sweep is what the gate knows of the sweep: its summary, its arms, and
// the declared score's range width (0 for a pass/fail world).
type Sweep struct {
	Rows  []Row
	Arms  []string
	Score float64 // max − min of the declared score; 0: no score
	// Configs says whether the sweep has several configurations (lines
	// then name the configuration).
	Configs bool
}

// Check is one condition checked on one summary row.
type Check struct {
	Row
	// Flag names the condition (max-harm-rate); What says what is
	// compared ("harm rate"), Value its value (the interval's worse end
	// with Bound; NaN when there is none), Threshold the limit, Op <= or
	// >=.
	Flag, What, Op   string
	Value, Threshold float64
	Bound            bool
	Pass             bool
	// Detail words the numbers behind Value: the counts and the interval.
	Detail string
}

// Plan returns, for each arm the gate checks in s, its thresholds; the
// error (wrapping ErrInput) names an arm the sweep lacks, a gate without
// any condition, or a score condition on a world without a score or
// beyond its range.
func (g *Gate) Plan(s Sweep) ([]string, map[string]Thresholds, error) {
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	arms := g.Arms
	if len(arms) == 0 {
		for _, a := range []string{"on", "policy"} {
			if slices.Contains(s.Arms, a) {
				arms = append(arms, a)
			}
		}
		if len(arms) == 0 && len(g.PerArm) == 0 {
			return nil, nil, inputErr("the sweep has neither on nor policy, the arms a gate checks by default (its arms: %s): name the arms with --arm", strings.Join(s.Arms, ", "))
		}
	}
	// An arm only per_arm names is checked where the sweep has it: one
	// gate serves a sweep and its rerun under a guard rule.
	for _, a := range sortedKeys(g.PerArm) {
		if !slices.Contains(arms, a) && slices.Contains(s.Arms, a) {
			arms = append(arms, a)
		}
	}
	plan := map[string]Thresholds{}
	for _, a := range arms {
		if !slices.Contains(s.Arms, a) {
			return nil, nil, inputErr("the sweep has no arm %s (its arms: %s)", a, strings.Join(s.Arms, ", "))
		}
		t := g.Thresholds.With(g.PerArm[a])
		if t.Empty() {
			return nil, nil, inputErr("no condition for arm %s: give at least one threshold (--max-harm-rate, --max-harmed, --min-net, --min-net-rate, --max-p, --max-error-rate, --min-score-diff), or a spec whose gate sets one", a)
		}
		if t.MinScoreDiff != nil {
			if s.Score == 0 {
				return nil, nil, inputErr("--min-score-diff: the sweep's world declares no score (it is pass/fail): leave the condition out")
			}
			if math.Abs(*t.MinScoreDiff) > s.Score {
				return nil, nil, inputErr("--min-score-diff %v is outside the differences the world's scores allow, [%v, %v] (the width of its score range)", *t.MinScoreDiff, -s.Score, s.Score)
			}
		}
		plan[a] = t
	}
	return arms, plan, nil
}

// Run checks the gate on the sweep: one Check per arm, summary row and
// condition, in arm order (as planned), then configuration and fork step,
// then condition order. Its error wraps ErrInput (Plan's).
func (g *Gate) Run(s Sweep) ([]Check, error) {
	arms, plan, err := g.Plan(s)
	if err != nil {
		return nil, err
	}
	var out []Check
	for _, a := range arms {
		t := plan[a]
		for _, r := range s.Rows {
			if r.Arm != a {
				continue
			}
			out = append(out, g.check(r, t)...)
		}
	}
	return out, nil
}

// check evaluates thresholds t on row r.
func (g *Gate) check(r Row, t Thresholds) []Check {
	var out []Check
	n := float64(r.Pairs)
	add := func(flag, op string, point, bound, threshold float64, detail string) {
		v := point
		if g.Bound {
			v = bound
		}
		pass := !math.IsNaN(v) && ((op == "<=" && v <= threshold) || (op == ">=" && v >= threshold))
		c := Check{Row: r, Flag: flag, Op: op, Value: v, Threshold: threshold, Bound: g.Bound, Pass: pass, Detail: detail}
		for _, k := range conditions {
			if k.flag == flag {
				c.What = k.what
			}
		}
		out = append(out, c)
	}
	counts := fmt.Sprintf("%d pairs: rescued %d, harmed %d, net %+d", r.Pairs, r.Rescued, r.Harmed, r.Net)
	if t.MaxHarmRate != nil {
		add("max-harm-rate", "<=", r.HarmRate, r.HarmHi, *t.MaxHarmRate, fmt.Sprintf("%s; harm rate %s, 95%% upper end %s (Wilson)", counts, pct(r.HarmRate), pct(r.HarmHi)))
	}
	if t.MaxHarmed != nil {
		add("max-harmed", "<=", float64(r.Harmed), r.HarmHi*n, float64(*t.MaxHarmed), fmt.Sprintf("%s; 95%% upper end of the harms %s (Wilson, times the pairs)", counts, num(r.HarmHi*n)))
	}
	if t.MinNet != nil {
		add("min-net", ">=", float64(r.Net), r.NetLo*n, float64(*t.MinNet), fmt.Sprintf("%s; 95%% lower end of the net %s (Newcombe, times the pairs)", counts, num(r.NetLo*n)))
	}
	if t.MinNetRate != nil {
		add("min-net-rate", ">=", r.NetRate, r.NetLo, *t.MinNetRate, fmt.Sprintf("%s; net rate %s, 95%% lower end %s (Newcombe)", counts, pct(r.NetRate), pct(r.NetLo)))
	}
	if t.MaxP != nil {
		// A significant loss is no pass: the net must be a gain.
		p := r.McNemarP
		if r.Net <= 0 {
			p = math.NaN()
		}
		add("max-p", "<=", p, p, *t.MaxP, fmt.Sprintf("%s; McNemar exact p %s on %d discordant pairs (no interval: --bound leaves it); the net must be a gain", counts, pval(r.McNemarP), r.Rescued+r.Harmed))
	}
	if t.MaxErrorRate != nil {
		total := r.Pairs + r.Errors
		rate, hi := math.NaN(), math.NaN()
		if total > 0 {
			rate, hi = float64(r.Errors)/float64(total), wilsonHi(r.Errors, total)
		}
		add("max-error-rate", "<=", rate, hi, *t.MaxErrorRate, fmt.Sprintf("%d of %d pairs errored (no label); error rate %s, 95%% upper end %s (Wilson)", r.Errors, total, pct(rate), pct(hi)))
	}
	if t.MinScoreDiff != nil {
		add("min-score-diff", ">=", r.ScoreDiff, r.ScoreDiffLo, *t.MinScoreDiff, fmt.Sprintf("%d pairs; mean paired score difference %s, 95%% CI %s to %s (paired t)", r.Pairs, num(r.ScoreDiff), num(r.ScoreDiffLo), num(r.ScoreDiffHi)))
	}
	return out
}

// wilsonHi is the Wilson score interval's upper end for x of n.
func wilsonHi(x, n int64) float64 { return stats.Wilson(x, n, stats.Z95).Hi }
