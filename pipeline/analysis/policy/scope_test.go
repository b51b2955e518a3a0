package policy

import (
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// The split is the one forklab policy's SQL makes (queries/views.go,
// heldOut): of seeds 0:300 at holdout 0.3, 210 are searched on — the
// "210 search pairs" of the seed's report; Searched counts the rule's
// search seeds in any range, exactly up to 2^26 seeds in common.
func TestSearched(t *testing.T) {
	r := Rule{Search: &Split{Start: 0, End: 300, Holdout: 0.3}}
	for _, tc := range []struct {
		lo, hi, want uint64
	}{{0, 300, 210}, {300, 600, 0}, {1000, 1300, 0}, {0, 1, 0}, {1, 2, 1}, {0, 10000, 210}, {150, 450, 106}} {
		if n, exact := r.Searched(tc.lo, tc.hi); n != tc.want || !exact {
			t.Errorf("Searched(%d, %d) = %d (exact %v), want %d", tc.lo, tc.hi, n, exact, tc.want)
		}
	}
	held := 0
	for s := uint64(0); s < 300; s++ {
		// The views' expression, written out: ((seed & 2^32-1) × 2654435761) & 2^32-1 < holdout × 2^32.
		h := ((s & 4294967295) * 2654435761) & 4294967295
		if (float64(h) < 0.3*4294967296) != HeldOut(s, 0.3) {
			t.Fatalf("seed %d: HeldOut disagrees with the SQL split", s)
		}
		if HeldOut(s, 0.3) {
			held++
		}
	}
	if held != 90 {
		t.Errorf("%d of 300 seeds held out, want 90", held)
	}
	big := Rule{Search: &Split{Start: 0, End: 1 << 40, Holdout: 0.25}}
	if n, exact := big.Searched(0, 1<<30); exact || n != 3<<28 {
		t.Errorf("Searched over 2^30 seeds = %d (exact %v), want about 3·2^28, not exact", n, exact)
	}
	if n, exact := (Rule{}).Searched(0, 300); n != 0 || !exact {
		t.Errorf("a hand-written rule was searched on %d seeds", n)
	}
}

// Scope names every way a sweep departs from where the rule was chosen:
// world version, fork steps, parameters (compared in their canonical
// types: a rule file's numbers are JSON's) and model; a hand-written rule
// records none of them and fits anywhere in its world version.
func TestScope(t *testing.T) {
	d := counter.Declaration()
	params, err := d.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	step := 3
	model := fork.Model{NoTool: 0.5}
	chosen := Rule{Version: Version, World: d.Name, WorldVersion: d.Version, ForkStep: &step, Params: params, Model: &model, All: []Condition{}}
	b, err := chosen.Encode()
	if err != nil {
		t.Fatal(err)
	}
	read, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	stall := params.Clone()
	stall["p_stall"] = 0.2
	for _, tc := range []struct {
		name   string
		rule   Rule
		steps  []int
		params world.Params
		model  fork.Model
		want   string
	}{
		{"where it was chosen", read, []int{3}, params, model, ""},
		{"another fork step", read, []int{2, 3}, params, model, "fork step 2, the rule's is 3"},
		{"other parameters", read, []int{3}, stall, model, "p_stall 0.2, the rule's is 0"},
		{"another model", read, []int{3}, params, fork.Model{Temperature: 0.1, NoTool: 0.5}, "temperature 0.1, the rule's is 0"},
		{"written by hand", Rule{Version: Version, World: d.Name, WorldVersion: d.Version}, []int{1, 7}, stall, fork.Model{Temperature: 0.3}, ""},
		{"another world version", Rule{Version: Version, World: d.Name, WorldVersion: "1"}, []int{3}, params, model, "world version " + d.Version + ", the rule's is 1"},
	} {
		got := strings.Join(tc.rule.Scope(d, tc.steps, map[int]world.Params{0: tc.params}, map[int]fork.Model{0: tc.model}), "; ")
		if got != tc.want {
			t.Errorf("%s: scope %q, want %q", tc.name, got, tc.want)
		}
	}
	// Applied anywhere, a rule of another world version compiles; a rule
	// of another world never does.
	if _, err := (Rule{Version: Version, World: d.Name, WorldVersion: "1", All: []Condition{}}).CompileAnywhere(d); err != nil {
		t.Errorf("another version, anywhere: %v", err)
	}
	if _, err := (Rule{Version: Version, World: "toolloop", WorldVersion: "2", All: []Condition{}}).CompileAnywhere(d); err == nil {
		t.Error("another world's rule compiled anywhere")
	}
}
