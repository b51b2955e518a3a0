package gate

import (
	"bytes"
	"encoding/xml"
	"errors"
	"math"
	"strings"
	"testing"
)

func f(x float64) *float64 { return &x }
func i(x int64) *int64     { return &x }

// on is arm on at fork step 3 of a sweep of 300 pairs: 75 rescued, 5
// harmed, 3 errors; a score difference of +0.04 [+0.01, +0.07].
var on = Row{ConfigID: 0, ForkStep: 3, Arm: "on", Pairs: 300, Rescued: 75, Harmed: 5, Net: 70, Errors: 3,
	HarmRate: 5.0 / 300, HarmHi: 0.0385, NetRate: 70.0 / 300, NetLo: 0.18, McNemarP: 1e-15,
	ScoreDiff: 0.04, ScoreDiffLo: 0.01, ScoreDiffHi: 0.07}

var sweep = Sweep{Rows: []Row{on, {ConfigID: 0, ForkStep: 3, Arm: "placebo", Pairs: 300, Rescued: 2, Harmed: 9, Net: -7,
	HarmRate: 0.03, HarmHi: 0.0561, NetRate: -7.0 / 300, NetLo: -0.05, McNemarP: 0.065, ScoreDiff: -0.01, ScoreDiffLo: -0.03, ScoreDiffHi: 0.01}},
	Arms: []string{"on", "placebo"}, Score: 1}

// Each condition holds or fails on the point estimate, and on the
// interval's worse end with Bound; a count's bound is the rate's end times
// the pairs; max-p wants a gain; the lines say value, threshold and flag.
func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound bool
		th    Thresholds
		pass  bool
		line  string
	}{
		{"harm rate", false, Thresholds{MaxHarmRate: f(0.02)}, true, "PASS  on · fork step 3  harm rate 1.67%, want <= 2%  (--max-harm-rate)"},
		{"harm rate bound", true, Thresholds{MaxHarmRate: f(0.02)}, false, "FAIL  on · fork step 3  harm rate 95% upper end 3.85%, want <= 2%  (--max-harm-rate)"},
		{"harmed", false, Thresholds{MaxHarmed: i(5)}, true, "PASS  on · fork step 3  harmed 5, want <= 5  (--max-harmed)"},
		{"harmed bound", true, Thresholds{MaxHarmed: i(5)}, false, "FAIL  on · fork step 3  harmed 95% upper end 11.55, want <= 5  (--max-harmed)"},
		{"net", false, Thresholds{MinNet: i(70)}, true, "PASS  on · fork step 3  net 70, want >= 70  (--min-net)"},
		{"net bound", true, Thresholds{MinNet: i(55)}, false, "FAIL  on · fork step 3  net 95% lower end 54.00, want >= 55  (--min-net)"},
		{"net rate", false, Thresholds{MinNetRate: f(0.25)}, false, "FAIL  on · fork step 3  net rate 23.33%, want >= 25%  (--min-net-rate)"},
		{"net rate bound", true, Thresholds{MinNetRate: f(0.1)}, true, "PASS  on · fork step 3  net rate 95% lower end 18%, want >= 10%  (--min-net-rate)"},
		{"p", false, Thresholds{MaxP: f(0.05)}, true, "PASS  on · fork step 3  McNemar p 1e-15, want <= 0.05  (--max-p)"},
		{"p bound", true, Thresholds{MaxP: f(1e-16)}, false, "FAIL  on · fork step 3  McNemar p 1e-15, want <= 1e-16  (--max-p)"},
		{"error rate", false, Thresholds{MaxErrorRate: f(0.01)}, true, "PASS  on · fork step 3  error rate 0.99%, want <= 1%  (--max-error-rate)"},
		{"error rate bound", true, Thresholds{MaxErrorRate: f(0.01)}, false, "FAIL  on · fork step 3  error rate 95% upper end 2.87%, want <= 1%  (--max-error-rate)"},
		{"score", false, Thresholds{MinScoreDiff: f(0.03)}, true, "PASS  on · fork step 3  mean score difference 0.04, want >= 0.03  (--min-score-diff)"},
		{"score bound", true, Thresholds{MinScoreDiff: f(0.03)}, false, "FAIL  on · fork step 3  mean score difference 95% lower end 0.01, want >= 0.03  (--min-score-diff)"},
	} {
		g := Gate{Arms: []string{"on"}, Bound: tc.bound, Thresholds: tc.th}
		checks, err := g.Run(sweep)
		if err != nil || len(checks) != 1 {
			t.Fatalf("%s: %v, %d checks", tc.name, err, len(checks))
		}
		if c := checks[0]; c.Pass != tc.pass || c.Line(false) != tc.line {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, c.Line(false), tc.line)
		}
	}
	// A significant loss is no pass of --max-p; a row without pairs fails
	// every rate, its value n/a.
	g := Gate{Arms: []string{"placebo"}, Thresholds: Thresholds{MaxP: f(0.1)}}
	checks, _ := g.Run(sweep)
	if checks[0].Pass || checks[0].Line(false) != "FAIL  placebo · fork step 3  McNemar p n/a (the net, -7, is not a gain), want <= 0.1  (--max-p)" {
		t.Errorf("a loss: %s", checks[0].Line(false))
	}
	empty := Sweep{Rows: []Row{{Arm: "on", ForkStep: 1, Errors: 4, HarmRate: math.NaN(), HarmHi: math.NaN(), NetRate: math.NaN(), NetLo: math.NaN(), McNemarP: math.NaN()}}, Arms: []string{"on"}}
	checks, _ = (&Gate{Thresholds: Thresholds{MaxHarmRate: f(1), MaxErrorRate: f(1)}}).Run(empty)
	if checks[0].Pass || !strings.Contains(checks[0].Line(false), "harm rate n/a, want <= 100%") || !checks[1].Pass {
		t.Errorf("no labelled pair: %s / %s", checks[0].Line(false), checks[1].Line(false))
	}
}

// Thresholds outside their domains, arms the sweep lacks, no condition, a
// score condition on a pass/fail world or beyond the score's width: each
// is bad input (ErrInput), named.
func TestBadGates(t *testing.T) {
	pass := sweep
	pass.Score = 0
	for _, tc := range []struct {
		g    Gate
		s    Sweep
		want string
	}{
		{Gate{Thresholds: Thresholds{MaxHarmRate: f(1.5)}}, sweep, "max_harm_rate must be a number in [0, 1], got 1.5"},
		{Gate{Thresholds: Thresholds{MaxHarmRate: f(math.NaN())}}, sweep, "max_harm_rate must be a number in [0, 1], got NaN"},
		{Gate{Thresholds: Thresholds{MinNetRate: f(-2)}}, sweep, "min_net_rate must be a number in [-1, 1], got -2"},
		{Gate{Thresholds: Thresholds{MaxP: f(0)}}, sweep, "max_p must be a number in (0, 1], got 0"},
		{Gate{Thresholds: Thresholds{MaxErrorRate: f(-0.1)}}, sweep, "max_error_rate must be a number in [0, 1], got -0.1"},
		{Gate{Thresholds: Thresholds{MaxHarmed: i(-1)}}, sweep, "max_harmed must be an integer in [0, 9007199254740992], got -1"},
		{Gate{Thresholds: Thresholds{MinNet: i(1 << 60)}}, sweep, "min_net must be an integer in [-9007199254740992, 9007199254740992]"},
		{Gate{Thresholds: Thresholds{MinScoreDiff: f(math.Inf(1))}}, sweep, "min_score_diff must be a finite number, got +Inf"},
		{Gate{PerArm: map[string]Thresholds{"on": {MaxP: f(2)}}}, sweep, "per_arm.on.max_p must be a number in (0, 1], got 2"},
		{Gate{Arms: []string{"off"}, Thresholds: Thresholds{MinNet: i(0)}}, sweep, `arms: "off" is not a treatment arm`},
		{Gate{Arms: []string{"aa"}, Thresholds: Thresholds{MinNet: i(0)}}, sweep, "the sweep has no arm aa (its arms: on, placebo)"},
		{Gate{}, sweep, "no condition for arm on: give at least one threshold"},
		{Gate{Thresholds: Thresholds{MinNet: i(0)}}, Sweep{Arms: []string{"placebo", "aa"}}, "the sweep has neither on nor policy"},
		{Gate{Thresholds: Thresholds{MinScoreDiff: f(0)}}, pass, "--min-score-diff: the sweep's world declares no score"},
		{Gate{Thresholds: Thresholds{MinScoreDiff: f(-1.5)}}, sweep, "--min-score-diff -1.5 is outside the differences the world's scores allow, [-1, 1]"},
	} {
		_, err := tc.g.Run(tc.s)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInput with %q", tc.g, err, tc.want)
		}
	}
}

// Default arms are on and policy, those the sweep has; per_arm adds an arm
// and overrides conditions for it alone; the checks come arm by arm.
func TestArmsAndOverrides(t *testing.T) {
	g := Gate{Thresholds: Thresholds{MaxHarmRate: f(0.05)}, PerArm: map[string]Thresholds{"placebo": {MaxHarmRate: f(0.01), MinNet: i(0)}}}
	checks, err := g.Run(sweep)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range checks {
		lines = append(lines, c.Line(false))
	}
	want := []string{
		"PASS  on · fork step 3  harm rate 1.67%, want <= 5%  (--max-harm-rate)",
		"FAIL  placebo · fork step 3  harm rate 3%, want <= 1%  (--max-harm-rate)",
		"FAIL  placebo · fork step 3  net -7, want >= 0  (--min-net)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	var b bytes.Buffer
	if n := Write(&b, checks, false, false); n != 2 || !strings.HasSuffix(b.String(), "gate: 2 of 3 conditions fail (on the point estimates)\n") {
		t.Errorf("Write: %d failed, %q", n, b.String())
	}
}

// The JUnit XML parses, counts the tests and failures, names each case by
// arm (classname), fork step and condition, and holds the numbers in the
// failure and in a passing case's output.
func TestJUnit(t *testing.T) {
	g := Gate{Arms: []string{"on", "placebo"}, Thresholds: Thresholds{MaxHarmRate: f(0.02), MinNet: i(1)}}
	checks, err := g.Run(sweep)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJUnit(&b, "out", checks, false); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suite    []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
			Cases []struct {
				Class   string `xml:"classname,attr"`
				Name    string `xml:"name,attr"`
				Out     string `xml:"system-out"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if doc.Tests != 4 || doc.Failures != 2 || len(doc.Suite) != 1 || doc.Suite[0].Name != "forklab gate out" || len(doc.Suite[0].Cases) != 4 {
		t.Fatalf("JUnit: %+v\n%s", doc, b.String())
	}
	c := doc.Suite[0].Cases
	if c[0].Class != "forklab.gate.on" || c[0].Name != "fork step 3: harm rate <= 2% (--max-harm-rate)" || c[0].Failure != nil ||
		!strings.Contains(c[0].Out, "300 pairs: rescued 75, harmed 5, net +70") {
		t.Errorf("passing case: %+v", c[0])
	}
	if c[3].Class != "forklab.gate.placebo" || c[3].Failure == nil || c[3].Failure.Message != "net -7, want >= 1" ||
		!strings.Contains(c[3].Failure.Text, "placebo · fork step 3: 300 pairs: rescued 2, harmed 9, net -7") {
		t.Errorf("failing case: %+v", c[3])
	}
}
