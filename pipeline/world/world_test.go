package world_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
)

func base() world.Declaration {
	return world.Declaration{Name: "w", Version: "1",
		Params:   []world.Param{{Name: "k_choices", Kind: world.ParamIntList, Default: []int64{2}}},
		Task:     []world.Field{{Name: "k", Kind: world.Int}},
		Features: []world.Field{{Name: "repeat_run", Kind: world.Int}},
		Hidden:   []world.Field{{Name: "fault", Kind: world.Bool}},
		Cost:     world.CostModel{Fields: []string{world.CostSteps}}}
}

// Task fields take no name that another column of the tables a sweep
// writes has — a fixed column, a feature, a hidden_ column, another task
// field, a cost_ or extra_ column — and may share a parameter's name (the
// counter's slack: the parameter lists the choices, the task field is the
// one drawn). The error names the field and what it collides with.
func TestTaskFieldNames(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"k", ""},
		{"k_choices", ""}, // a parameter's name: allowed
		{"seed", `world w: task field "seed" is named "seed", which is already a fixed column`},
		{"label", `world w: task field "label" is named "label", which is already a fixed column`},
		{"repeat_run", `world w: task field "repeat_run" is named "repeat_run", which is already feature "repeat_run"`},
		{"hidden_fault", `world w: task field "hidden_fault": the hidden_ prefix is for hidden truth`},
		{"cost_usd", `world w: task field "cost_usd": the cost_ and extra_ prefixes are for the fixed cost columns`},
		{"extra_tokens2", `world w: task field "extra_tokens2": the cost_ and extra_ prefixes are for the fixed cost columns`},
	} {
		d := base()
		d.Task = []world.Field{{Name: "other", Kind: world.Int}, {Name: tc.name, Kind: world.Int}}
		err := d.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want)
		}
	}
	d := base()
	d.Task = append(d.Task, world.Field{Name: "k", Kind: world.Bool})
	if err := d.Validate(); err == nil || err.Error() != `world w: task field "k" is repeated` {
		t.Errorf("repeated task field: %v", err)
	}
	d = base()
	d.Features = append(d.Features, world.Field{Name: "cost_so_far", Kind: world.Float})
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), `feature "cost_so_far" is named "cost_so_far": the cost_ prefix is for the fixed cost columns`) {
		t.Errorf("cost_ feature: %v", err)
	}
}

// --param reads a list written 2,5 or [2,5] (every subcommand, one
// syntax), scalars as before, and names what is wrong.
func TestParseParamText(t *testing.T) {
	d := base()
	d.Params = append(d.Params,
		world.Param{Name: "p", Kind: world.ParamFloat, Default: 0.5},
		world.Param{Name: "mode", Kind: world.ParamEnum, Values: []string{"fast", "slow"}, Default: "fast"},
		world.Param{Name: "freeze", Kind: world.ParamIntList, Default: []int64{0}})
	for _, tc := range []struct {
		kv   string
		want any
		err  string
	}{
		{"k_choices=2,5", []int64{2, 5}, ""},
		{"k_choices=[2,5]", []int64{2, 5}, ""},
		{"k_choices= [ 2, 5 ] ", []int64{2, 5}, ""},
		{"k_choices=7", []int64{7}, ""},
		{"k_choices=[7]", []int64{7}, ""},
		{"freeze=none,2", []int64{0, 2}, ""},
		{"p=0.25", 0.25, ""},
		{"mode=slow", "slow", ""},
		{`mode="slow"`, "slow", ""},
		{"k_choices=[2,x]", nil, `--param k_choices=[2,x]: k_choices must be a list of 1 to 1048576 values, each an integer, written comma-separated (2,5 or [2,5]), got "[2,x]"`},
		{"k_choices=[]", nil, "--param k_choices=[]: k_choices must be a list of 1 to 1048576 values"},
		{"nope=1", nil, `--param nope=1: world w has no parameter "nope" (its parameters: k_choices, p, mode, freeze)`},
		{"k_choices", nil, `--param "k_choices": want key=value`},
	} {
		got, err := d.ParseParamText([]string{tc.kv})
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error starting %s", tc.kv, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.kv, err)
			continue
		}
		k, _, _ := strings.Cut(tc.kv, "=")
		if !reflect.DeepEqual(got[k], tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.kv, got[k], tc.want)
		}
	}
	// A key given twice: refused when the values differ (the last one
	// used to win without a word, in forklab agent check), taken when they
	// are one value however written.
	if _, err := d.ParseParamText([]string{"p=0.25", "mode=slow", "p=0.5"}); err == nil ||
		err.Error() != "--param p is given twice, to different values (p=0.25 and p=0.5): give it once" {
		t.Errorf("p twice: %v", err)
	}
	if got, err := d.ParseParamText([]string{"k_choices=2,5", "k_choices=[2, 5]"}); err != nil || !reflect.DeepEqual(got["k_choices"], []int64{2, 5}) {
		t.Errorf("k_choices twice, one value: %v %v", got, err)
	}
}

// Int values are integers within ±2^53 — exact as JSON numbers read as
// doubles — whether they arrive as JSON numbers or Go values.
func TestIntRange(t *testing.T) {
	f := world.Field{Name: "n", Kind: world.Int}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{json.Number("9007199254740992"), ""},
		{json.Number("-9007199254740992"), ""},
		{float64(1 << 53), ""},
		{int64(1 << 53), ""},
		{json.Number("9007199254740993"), "n must be an integer within ±2^53, got 9007199254740993"},
		{json.Number("1152921504606846976"), "n must be an integer within ±2^53, got 1152921504606846976"},
		{json.Number("123456789012345678901234567890"), "n must be an integer within ±2^53, got 123456789012345678901234567890"},
		{int64(1 << 60), "n must be an integer within ±2^53, got 1152921504606846976"},
		{json.Number("2.5"), "n must be an integer, got 2.5"},
		{2.5, "n must be an integer, got 2.5"},
	} {
		_, err := f.Parse(tc.in)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.in, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %s", tc.in, err, tc.want)
		}
	}
}
