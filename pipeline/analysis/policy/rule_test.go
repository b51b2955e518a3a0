package policy

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// A toy world with every kind of feature, declared only here.
var kinds = world.Declaration{
	Name: "kinds", Version: "3", Description: "one feature of each kind",
	Features: []world.Field{
		{Name: "flag", Kind: world.Bool, Description: "a bool"},
		{Name: "count", Kind: world.Int, Description: "an int"},
		{Name: "ratio", Kind: world.Float, Description: "a float"},
		{Name: "mood", Kind: world.Enum, Values: []string{"calm", "busy"}, Description: "an enum"},
		{Name: "gap", Kind: world.Int, Nullable: true, Description: "an int that may be missing"},
	},
	Interventions: []world.Intervention{{Arm: "on", Action: "fix", Description: "fix it"}},
	Cost:          world.CostModel{Fields: []string{world.CostSteps}, Description: "steps"},
}

func rule(body string) string {
	return `{"policy_version": 2, "world": "kinds", "world_version": "3", ` + body + `}`
}

// Compile evaluates every operator on every kind of feature, and a
// missing value satisfies no condition.
func TestCompileFires(t *testing.T) {
	fs := []world.Value{world.BoolValue(true), world.IntValue(2), world.FloatValue(0.25), world.EnumValue("busy"), world.NullValue()}
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`"all": []`, true},
		{`"never": true, "all": []`, false},
		{`"all": [{"feature": "flag", "op": "=", "value": true}]`, true},
		{`"all": [{"feature": "flag", "op": "!=", "value": true}]`, false},
		{`"all": [{"feature": "count", "op": ">=", "value": 2}, {"feature": "ratio", "op": "<", "value": 0.5}]`, true},
		{`"all": [{"feature": "count", "op": ">", "value": 2}]`, false},
		{`"all": [{"feature": "count", "op": "<=", "value": 2}, {"feature": "ratio", "op": ">", "value": 0.2}]`, true},
		{`"all": [{"feature": "mood", "op": "=", "value": "busy"}]`, true},
		{`"all": [{"feature": "mood", "op": "!=", "value": "busy"}]`, false},
		{`"all": [{"feature": "gap", "op": ">=", "value": 0}]`, false},
		{`"all": [{"feature": "gap", "op": "!=", "value": 1}]`, false},
	} {
		r, err := Decode([]byte(rule(tc.body)))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		fires, err := r.Compile(kinds)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := fires(fs); got != tc.want {
			t.Errorf("%s (%s) fires %t, want %t", tc.body, r, got, tc.want)
		}
	}
}

// A rule that cannot run on a world is refused with what was wrong:
// another world or version, an unknown feature (naming the known ones), an
// operator the feature's type does not allow, a value of the wrong type;
// and a malformed file before any world is looked at.
func TestBadRules(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{"policy_version": 1, "all": []}`, "policy_version is 1, this forklab reads 2"},
		{`{"policy_version": 2, "all": []}`, "names no world"},
		{rule(`"never": true, "all": [{"feature": "count", "op": "=", "value": 3}]`), "cannot also list conditions"},
		{rule(`"all": [{"feature": "count", "op": "~", "value": 2}]`), `unknown operator "~"`},
		{rule(`"all": [], "when": "always"`), `unknown field "when"`},
		{rule(`"all": []`) + ` {}`, "trailing data"},
	} {
		if _, err := Decode([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.text, err, tc.want)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{`{"policy_version": 2, "world": "counter", "world_version": "2", "all": []}`, "the rule is for world counter, not kinds"},
		{`{"policy_version": 2, "world": "kinds", "world_version": "2", "all": []}`, "version 2, this sweep plays version 3"},
		{rule(`"all": [{"feature": "sensor_stuck", "op": "=", "value": true}]`), `unknown feature "sensor_stuck" (world kinds's features: flag, count, ratio, mood, gap)`},
		{rule(`"all": [{"feature": "flag", "op": ">=", "value": true}]`), "flag is bool, use = or !=, not >="},
		{rule(`"all": [{"feature": "mood", "op": "<", "value": "calm"}]`), "mood is enum, use = or !="},
		{rule(`"all": [{"feature": "flag", "op": "=", "value": 1}]`), "compare it with true or false"},
		{rule(`"all": [{"feature": "count", "op": "=", "value": "3"}]`), "compare it with a number"},
		{rule(`"all": [{"feature": "mood", "op": "=", "value": "sad"}]`), "compare it with one of calm, busy"},
	} {
		r, err := Decode([]byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		if _, err := r.Compile(kinds); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.text, err, tc.want)
		}
	}
	d := counter.Declaration()
	for f, want := range map[string]string{
		"unknown-feature.json": `unknown feature "sensor_stuck"`, "unknown-op.json": `unknown operator "~"`,
		"other-world.json": "the rule is for world toolloop, not counter", "v1.json": "policy_version is 1",
	} {
		r, err := ReadFile("../../../testdata/policy/" + f)
		if err == nil {
			err = r.Check(d)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", f, err, want)
		}
	}
}

// A rule file round-trips, and fires on the counter's features as the
// seed's should_recover does: when the observation repeated.
func TestEncodeRoundTrips(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/policy/same-obs.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Decode(out)
	if err != nil || r2.String() != "same_obs = true" || r.String() != "same_obs = true" || r2.World != "counter" {
		t.Fatalf("round trip: %v %q %q", err, r, r2)
	}
	fires, err := r2.Compile(counter.Declaration())
	if err != nil {
		t.Fatal(err)
	}
	repeat := []world.Value{world.BoolValue(true), world.IntValue(2), world.IntValue(1), world.IntValue(3), world.IntValue(5)}
	fresh := []world.Value{world.BoolValue(false), world.IntValue(0), world.IntValue(3), world.IntValue(3), world.IntValue(4)}
	if !fires(repeat) || fires(fresh) {
		t.Error("same_obs = true does not fire exactly where the observation repeated")
	}
}

// A rule file is written as people read and edit it: testdata/policy/
// every-op.json, decoded and encoded again, is the same bytes — its
// operators ">=", "<", "<=", ">" and the note's "<, > &" were written as
// "\u003e=" and the like (encoding/json's HTML escaping).
func TestEncodeKeepsOperatorsReadable(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/policy/every-op.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(counter.Declaration()); err != nil {
		t.Fatal(err)
	}
	out, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, b) {
		t.Errorf("every-op.json encoded again:\n%s\nwant the file's bytes:\n%s", out, b)
	}
}

// Every operator a rule accepts, on each numeric kind, with the feature
// one step below its bound, equal to it and one step above (issue 25 H: a
// rule's < evaluated as <= went unnoticed, > was tested at its bound and <
// was not). A bool compares as 0 and 1.
func TestEveryOperatorAtItsBound(t *testing.T) {
	want := map[string][3]bool{ // below, equal, above
		"=": {false, true, false}, "!=": {true, false, true},
		"<": {true, false, false}, "<=": {true, true, false},
		">": {false, false, true}, ">=": {false, true, true},
	}
	if len(want) != len(Ops) {
		t.Fatalf("Ops is %v; the table covers %d operators", Ops, len(want))
	}
	for _, tc := range []struct {
		feature string
		bound   string
		values  [3]world.Value
	}{
		{"count", "2", [3]world.Value{world.IntValue(1), world.IntValue(2), world.IntValue(3)}},
		{"ratio", "0.25", [3]world.Value{world.FloatValue(0.2499999999999999), world.FloatValue(0.25), world.FloatValue(0.2500000000000001)}},
		{"flag", "true", [3]world.Value{world.BoolValue(false), world.BoolValue(true), {}}},
	} {
		for _, op := range Ops {
			if tc.feature == "flag" && op != "=" && op != "!=" {
				continue // a bool takes = and != only (TestBadRules)
			}
			r, err := Decode([]byte(rule(`"all": [{"feature": "` + tc.feature + `", "op": "` + op + `", "value": ` + tc.bound + `}]`)))
			if err != nil {
				t.Fatal(err)
			}
			fires, err := r.Compile(kinds)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tc.values {
				if tc.feature == "flag" && i == 2 {
					continue // no bool above true
				}
				fs := []world.Value{world.BoolValue(true), world.IntValue(2), world.FloatValue(0.25), world.EnumValue("busy"), world.NullValue()}
				fs[map[string]int{"flag": 0, "count": 1, "ratio": 2}[tc.feature]] = v
				if got := fires(fs); got != want[op][i] {
					t.Errorf("%s with %s %v: fires %t, want %t", r, tc.feature, []string{"below", "at", "above"}[i], got, want[op][i])
				}
			}
		}
	}
}
