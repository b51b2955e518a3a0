package policy

import (
	"os"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
)

func TestFires(t *testing.T) {
	f := world.Features{SameObs: true, RepeatRun: 2, ObsValue: 1, StepsUsed: 3, BudgetLeft: 5}
	for _, tc := range []struct {
		rule string
		want bool
	}{
		{`{"policy_version":1,"all":[]}`, true},
		{`{"policy_version":1,"never":true}`, false},
		{`{"policy_version":1,"all":[{"feature":"same_obs","op":"=","value":true}]}`, true},
		{`{"policy_version":1,"all":[{"feature":"same_obs","op":"!=","value":true}]}`, false},
		{`{"policy_version":1,"all":[{"feature":"repeat_run","op":">=","value":2},{"feature":"obs_value","op":"<","value":2}]}`, true},
		{`{"policy_version":1,"all":[{"feature":"repeat_run","op":">","value":2}]}`, false},
		{`{"policy_version":1,"all":[{"feature":"budget_left","op":"<=","value":5},{"feature":"steps_used","op":"=","value":3}]}`, true},
		{`{"policy_version":1,"all":[{"feature":"budget_left","op":"<=","value":4}]}`, false},
	} {
		r, err := Decode([]byte(tc.rule))
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		if got := r.Fires(f); got != tc.want {
			t.Errorf("%s (%s) fires %t, want %t", tc.rule, r, got, tc.want)
		}
	}
}

func TestBadRules(t *testing.T) {
	for _, tc := range []struct{ rule, want string }{
		{`{"policy_version":2,"all":[]}`, "policy_version is 2"},
		{`{"policy_version":1,"all":[{"feature":"sensor_stuck","op":"=","value":true}]}`, `unknown feature "sensor_stuck"`},
		{`{"policy_version":1,"all":[{"feature":"repeat_run","op":"~","value":2}]}`, `unknown operator "~"`},
		{`{"policy_version":1,"all":[{"feature":"same_obs","op":">=","value":true}]}`, "use = or !="},
		{`{"policy_version":1,"all":[{"feature":"same_obs","op":"=","value":1}]}`, "compare it with true or false"},
		{`{"policy_version":1,"all":[{"feature":"obs_value","op":"=","value":"3"}]}`, "must be a boolean or a number"},
		{`{"policy_version":1,"never":true,"all":[{"feature":"obs_value","op":"=","value":3}]}`, "cannot also list conditions"},
		{`{"policy_version":1,"all":[],"when":"always"}`, `unknown field "when"`},
		{`{"policy_version":1,"all":[]} {}`, "trailing data"},
	} {
		_, err := Decode([]byte(tc.rule))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.rule, err, tc.want)
		}
	}
	for _, f := range []string{"unknown-feature.json", "unknown-op.json"} {
		if _, err := ReadFile("../../../testdata/policy/" + f); err == nil {
			t.Errorf("%s was accepted", f)
		}
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/policy/same-obs.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := r.Encode()
	r2, err := Decode(out)
	if err != nil || r2.String() != "same_obs = true" || r.String() != "same_obs = true" {
		t.Fatalf("round trip: %v %q %q", err, r, r2)
	}
}
