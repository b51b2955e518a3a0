package agentproc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

var testDecl = world.Declaration{
	Name: "t", Version: "1",
	Task:          []world.Field{{Name: "budget", Kind: world.Int}},
	Features:      []world.Field{{Name: "same_obs", Kind: world.Bool}, {Name: "mood", Kind: world.Enum, Values: []string{"calm", "wild"}}, {Name: "tokens_left", Kind: world.Float, Nullable: true}},
	Hidden:        []world.Field{{Name: "stuck", Kind: world.Bool}},
	Actions:       []string{"no_tool", "refresh"},
	Interventions: []world.Intervention{{Arm: "on", Action: "refresh"}},
	Cost:          world.CostModel{Fields: []string{"steps", "usd"}},
}

func testInstance() *Instance {
	return &Instance{def: &Definition{init: InitializeResult{World: testDecl}}, params: world.Params{}}
}

// A malformed reply is an error naming the field: by the schema (shape)
// or by the declaration (names, types, cost fields).
func TestStartReplyErrorsNameTheField(t *testing.T) {
	good := `{"task":{"budget":7},"forks":[{"fork_step":3,"over":false,"checkpoint":{"s":[1, 2]},"features":{"same_obs":true,"mood":"calm","tokens_left":null},"hidden":{"stuck":false},"cost":{"steps":3,"usd":0.25}}]}`
	for _, tc := range []struct{ edit, reply, want string }{
		{"good", good, ""},
		{"feature missing", `"mood":"calm",`, `result.forks[0].features.mood is missing: the declaration lists it (enum)`},
		{"feature of another type", `"same_obs":true` + "\x00" + `"same_obs":"yes"`, `result.forks[0].features.same_obs must be a bool, got a string`},
		{"enum value not declared", `"calm"` + "\x00" + `"sleepy"`, `result.forks[0].features.mood is "sleepy", not one of its declared values ([calm wild])`},
		{"feature not declared", `"tokens_left":null` + "\x00" + `"tokens_left":null,"extra":1`, `result.forks[0].features.extra is not declared (declared: same_obs, mood, tokens_left)`},
		{"null where not nullable", `"budget":7` + "\x00" + `"budget":null`, `result.task.budget is null but is not declared nullable`},
		{"non-integer int", `"budget":7` + "\x00" + `"budget":7.5`, `result.task.budget must be an integer, got 7.5`},
		{"int at 2^53", `"budget":7` + "\x00" + `"budget":-9007199254740992`, ""},
		{"int beyond 2^53", `"budget":7` + "\x00" + `"budget":1152921504606846976`, `result.task.budget must be an integer within ±2^53, got 1152921504606846976: a JSON number beyond that is not exact in parsers that read numbers as doubles (JavaScript, DuckDB's JSON, many BI tools)`},
		{"cost field missing", `,"usd":0.25`, `result.forks[0].cost.usd is missing: the cost model lists it`},
		{"cost field not declared", `"usd":0.25` + "\x00" + `"usd":0.25,"tokens":9`, `result.forks[0].cost.tokens is reported but the cost model does not list it (it lists steps, usd)`},
		{"negative cost", `"steps":3` + "\x00" + `"steps":-3`, `result.forks[0].cost.steps must be a non-negative integer up to 2^53, got -3`},
		{"cost beyond 2^53", `"steps":3` + "\x00" + `"steps":9007199254740993`, `result.forks[0].cost.steps must be a non-negative integer up to 2^53, got 9007199254740993`},
		{"checkpoint null", `{"s":[1, 2]}` + "\x00" + `null`, `result.forks[0].checkpoint: must not be null (a checkpoint is any other JSON value)`},
		{"unknown key", `"over":false` + "\x00" + `"over":false,"overr":true`, `result.forks[0]: additional properties 'overr' not allowed`},
		{"over missing", `"over":false,`, `result.forks[0]: missing property 'over'`},
		{"fork step not asked", `"fork_step":3` + "\x00" + `"fork_step":4`, `result.forks[0].fork_step is 4, but fork step 3 was asked there`},
	} {
		reply := tc.reply
		if tc.edit != "good" {
			old, repl, found := strings.Cut(tc.reply, "\x00")
			if !found {
				repl = ""
			}
			if !strings.Contains(good, old) {
				t.Fatalf("%s: %q not in the good reply", tc.edit, old)
			}
			reply = strings.Replace(good, old, repl, 1)
		}
		var res lab.SeedResult
		plan := lab.Plan{ForkSteps: []int{3}, Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1}
		res.Resize(&testDecl, plan)
		err := testInstance().startCall(7, []int{3}, &res).decode(json.RawMessage(reply))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.edit, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: got %v\nwant %s", tc.edit, err, tc.want)
		}
		if tc.want == "" {
			f := res.Forks[0]
			if string(f.Checkpoint) != `{"s":[1,2]}` || f.Cost != (world.Cost{Steps: 3, USD: 0.25}) || !f.Features[2].Null || f.Features[1].S != "calm" {
				t.Errorf("decoded %+v", f)
			}
		}
	}
}

func TestBranchReplyErrors(t *testing.T) {
	for _, tc := range []struct{ reply, want string }{
		{`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1}},{"error":{"code":-32000,"message":"model API 500"}}]}`, ""},
		{`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1}}]}`, "result.branches has 1 entries for 2 branches asked"},
		{`{"branches":[{"success":"yes","cost":{"steps":2,"usd":0.1}},{"success":false,"cost":{"steps":1,"usd":0}}]}`, "result.branches[0]"},
		{`{"branches":[{"success":true,"cost":{"steps":2}},{"success":false,"cost":{"steps":1,"usd":0}}]}`, "result.branches[0].cost.usd is missing: the cost model lists it"},
		{`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"transcript":{"action":"x"}},{"success":false,"cost":{"steps":1,"usd":0}}]}`, "result.branches[0].transcript: got object, want array"},
		{`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"transcript":[{"observation":1}]},{"success":false,"cost":{"steps":1,"usd":0}}]}`, "result.branches[0].transcript[0]: missing property 'action'"},
		{`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"transcript":[{"action":"refresh","cost":{"steps":1}}]},{"success":false,"cost":{"steps":1,"usd":0}}]}`, "result.branches[0].transcript[0].cost.usd is missing: the cost model lists it"},
		{`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"transcript":[{"action":"refresh","cost":{"steps":1,"usd":0,"tokens":5}}]},{"success":false,"cost":{"steps":1,"usd":0}}]}`, "result.branches[0].transcript[0].cost.tokens is reported but the cost model does not list it (it lists steps, usd)"},
	} {
		out := make([]lab.BranchResult, 2)
		c := testInstance().branchCall(7, 3, false, []byte(`{}`), []fork.Arm{fork.Off, fork.On}, 1, false, out, 0, "")
		err := c.decode(json.RawMessage(tc.reply))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.reply, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %s", tc.reply, err, tc.want)
		}
		if tc.want == "" {
			if !out[0].Success || out[0].Intervened || out[0].Cost.USD != 0.1 || out[1].Err != "the agent reported the branch failed: model API 500 (code -32000)" {
				t.Errorf("decoded %+v", out)
			}
		}
	}
	// A transcript is kept compacted, as sent.
	out := make([]lab.BranchResult, 2)
	reply := `{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"transcript":[ {"step": 4, "action":"refresh", "intervention":true, "observation":{"obs": 3}, "cost":{"steps":1,"usd":0.05}} ]},{"success":false,"cost":{"steps":1,"usd":0}}]}`
	if err := testInstance().branchCall(7, 3, false, []byte(`{}`), []fork.Arm{fork.Off, fork.On}, 1, false, out, 0, "").decode(json.RawMessage(reply)); err != nil {
		t.Fatal(err)
	}
	if got := string(out[0].Transcript); got != `[{"step":4,"action":"refresh","intervention":true,"observation":{"obs":3},"cost":{"steps":1,"usd":0.05}}]` || len(out[1].Transcript) != 0 {
		t.Errorf("transcripts %s and %q", got, out[1].Transcript)
	}
	// The branches asked: the on arm's intervention by name, off's null,
	// and a noise key per arm and replica.
	c := testInstance().branchCall(7, 3, false, []byte(`{}`), []fork.Arm{fork.Off, fork.On}, 2, false, make([]lab.BranchResult, 4), 0, "")
	b, _ := json.Marshal(c.params)
	want := `{"seed":7,"fork_step":3,"checkpoint":{},"branches":[` +
		`{"arm":"off","intervention":null,"replica":0,"noise_key":"` + NoiseKey(7, 3, fork.Off, 0, false) + `"},` +
		`{"arm":"off","intervention":null,"replica":1,"noise_key":"` + NoiseKey(7, 3, fork.Off, 1, false) + `"},` +
		`{"arm":"on","intervention":"refresh","replica":0,"noise_key":"` + NoiseKey(7, 3, fork.On, 0, false) + `"},` +
		`{"arm":"on","intervention":"refresh","replica":1,"noise_key":"` + NoiseKey(7, 3, fork.On, 1, false) + `"}]}`
	if string(b) != want {
		t.Errorf("branch params\n%s\nwant\n%s", b, want)
	}
	if err := ValidateJSON("branch.params", "params", b); err != nil {
		t.Error(err)
	}
}

func BenchmarkDecodeStartReply(b *testing.B) {
	reply := json.RawMessage(`{"task":{"budget":7},"forks":[{"fork_step":3,"over":false,"checkpoint":{"seed":3,"fork_step":3,"state":{"v":3,"obs":3,"steps":3,"done":false,"declared":false,"frozen":false,"same_obs":false,"budget":7,"freeze_at":null},"repeat_run":0},"features":{"same_obs":true,"mood":"calm","tokens_left":null},"hidden":{"stuck":false},"cost":{"steps":3,"usd":0.25}}]}`)
	var res lab.SeedResult
	plan := lab.Plan{ForkSteps: []int{3}, Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1}
	res.Resize(&testDecl, plan)
	c := testInstance().startCall(7, []int{3}, &res)
	for b.Loop() {
		if err := c.decode(reply); err != nil {
			b.Fatal(err)
		}
	}
}

// mutations returns v with one change each: every key removed, every value
// replaced by values of other JSON types, an unknown key added to every
// object.
func mutations(v any) []any {
	var out []any
	others := []any{nil, true, json.Number("-1"), json.Number("2.5"), "text", []any{}, map[string]any{}}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			drop := map[string]any{}
			for k2, v2 := range x {
				if k2 != k {
					drop[k2] = v2
				}
			}
			out = append(out, drop)
			for _, m := range append(mutations(child), others...) {
				c := map[string]any{}
				for k2, v2 := range x {
					c[k2] = v2
				}
				c[k] = m
				out = append(out, c)
			}
		}
		c := map[string]any{"unknown_key": 1}
		for k2, v2 := range x {
			c[k2] = v2
		}
		out = append(out, c)
	case []any:
		for i, child := range x {
			for _, m := range mutations(child) {
				c := append([]any{}, x...)
				c[i] = m
				out = append(out, c)
			}
		}
		out = append(out, []any{})
	}
	return out
}

// Decoding accepts nothing the schema refuses: every mutation of a good
// start, branch and fold result that the schema refuses is refused by the
// decoder too (which also holds replies to the declaration, so refuses
// more). So every reply is validated though the schema is consulted only
// to word a refusal.
func TestStrictDecodingIsTheSchema(t *testing.T) {
	plan := lab.Plan{ForkSteps: []int{3}, Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1}
	for _, tc := range []struct {
		schema, good string
		decode       func(json.RawMessage) error
	}{
		{"start.result", `{"task":{"budget":7},"forks":[{"fork_step":3,"over":false,"checkpoint":{"s":[1]},"features":{"same_obs":true,"mood":"calm","tokens_left":null},"hidden":{"stuck":false},"cost":{"steps":3,"usd":0.25}}]}`,
			func(b json.RawMessage) error {
				var res lab.SeedResult
				res.Resize(&testDecl, plan)
				return testInstance().startCall(7, []int{3}, &res).decode(b)
			}},
		{"branch.result", `{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"details":{"why":"ok"},"transcript":[{"step":4,"action":"refresh","intervention":true,"tool_call":{"name":"refresh","arguments":{"hard":true}},"tool_result":"ok","observation":{"obs":3},"cost":{"steps":1,"usd":0.05}},{"action":"no_tool","observation":null}]},{"error":{"code":-32000,"message":"m","data":{"retryable":false}}}]}`,
			func(b json.RawMessage) error {
				return testInstance().branchCall(7, 3, false, []byte(`{}`), []fork.Arm{fork.Off, fork.On}, 1, false, make([]lab.BranchResult, 2), 0, "").decode(b)
			}},
		{"fold.result", `{"seed":5,"fork_step":2,"over":false,"checkpoint":[1,2],"features":{"same_obs":true,"mood":"wild","tokens_left":1.5},"hidden":{"stuck":false},"cost":{"steps":2,"usd":0}}`,
			func(b json.RawMessage) error { return foldCall(&testDecl, FoldParams{}, &Folded{}).decode(b) }},
		{"load.result", `{"task":{"budget":7},"forks":[{"fork_step":3,"over":true,"checkpoint":"t-9","features":{"same_obs":false,"mood":"calm","tokens_left":2},"hidden":{"stuck":true},"cost":{"steps":3,"usd":1}}]}`,
			func(b json.RawMessage) error {
				var res lab.SeedResult
				res.Resize(&testDecl, plan)
				return testInstance().loadCall("t-9", []int{3}, &res).decode(b)
			}},
		{"inspect.result", `{"over":false,"features":{"same_obs":true,"mood":"calm","tokens_left":null},"hidden":{"stuck":false},"cost":{"steps":3,"usd":0.5}}`,
			func(b json.RawMessage) error {
				return testInstance().inspectCall([]byte(`{}`), 3, &lab.ForkResult{}).decode(b)
			}},
		{"runs.result", `{"runs":[{"run_id":"t-1","metadata":{"user":"ann"}},{"run_id":"t-2"}],"next_cursor":"c2"}`,
			func(b json.RawMessage) error {
				var r RunsResult
				return decodeResult("runs.result", b, &r)
			}},
	} {
		var good any
		d := json.NewDecoder(strings.NewReader(tc.good))
		d.UseNumber()
		if err := d.Decode(&good); err != nil {
			t.Fatal(err)
		}
		if err := tc.decode(json.RawMessage(tc.good)); err != nil {
			t.Fatalf("%s: the good reply: %v", tc.schema, err)
		}
		refused := 0
		for _, m := range mutations(good) {
			b, _ := json.Marshal(m)
			if ValidateJSON(tc.schema, "result", b) == nil {
				continue
			}
			refused++
			if tc.decode(b) == nil {
				t.Errorf("%s: the schema refuses %s, decoding accepts it", tc.schema, b)
			}
		}
		if refused < 20 {
			t.Errorf("%s: only %d mutations refused by the schema", tc.schema, refused)
		}
	}
}

// A scored world's branch entries carry a score within the declared range
// (NaN, out of range and missing are refused, naming the entry); success
// is derived from a declared threshold when left out and must agree with
// it when given; a pass/fail world's entries carry no score. A run over
// at the checkpoint reports one score on every branch.
func TestBranchScores(t *testing.T) {
	scored := func(threshold *float64) *Instance {
		d := testDecl
		d.Score = &world.ScoreSpec{Min: 0, Max: 10, Threshold: threshold, Description: "judge"}
		return &Instance{def: &Definition{init: InitializeResult{World: d}}, params: world.Params{}}
	}
	const cost = `"cost":{"steps":2,"usd":0.1}`
	for _, tc := range []struct {
		name      string
		inst      *Instance
		over      bool
		a, b      string // the two entries
		want      string
		successes [2]bool
		scores    [2]float64
	}{
		{"scored, both given", scored(nil), false, `"success":true,"score":7.5`, `"success":false,"score":0`, "", [2]bool{true, false}, [2]float64{7.5, 0}},
		{"threshold derives success", scored(world.Bound(7)), false, `"score":7`, `"score":6.99`, "", [2]bool{true, false}, [2]float64{7, 6.99}},
		{"threshold and success agree", scored(world.Bound(7)), false, `"success":true,"score":10`, `"score":1e-3`, "", [2]bool{true, false}, [2]float64{10, 0.001}},
		{"success against the threshold", scored(world.Bound(7)), false, `"success":false,"score":8`, `"score":1`,
			"result.branches[0].success is false but its score 8 is at or above the declared threshold 7 (success is score >= threshold): report the two consistently, or leave success out", [2]bool{}, [2]float64{}},
		{"no threshold, no success", scored(nil), false, `"score":8`, `"success":true,"score":1`,
			"result.branches[0].success is missing: the world's score declares no threshold to derive it from", [2]bool{}, [2]float64{}},
		{"score missing", scored(world.Bound(7)), false, `"success":true,"score":8`, `"success":true`,
			"result.branches[1].score is missing: the world declares a score in [0, 10], which every branch reports", [2]bool{}, [2]float64{}},
		{"score above the range", scored(nil), false, `"success":true,"score":10.5`, `"success":true,"score":1`,
			"result.branches[0].score 10.5 is outside the declared range [0, 10]", [2]bool{}, [2]float64{}},
		{"score below the range", scored(nil), false, `"success":true,"score":1`, `"success":true,"score":-0.5`,
			"result.branches[1].score -0.5 is outside the declared range [0, 10]", [2]bool{}, [2]float64{}},
		{"score a float64 cannot hold", scored(nil), false, `"success":true,"score":1e400`, `"success":true,"score":1`,
			"result.branches[0].score is 1e400, beyond what a float64 holds (about ±1.8e308)", [2]bool{}, [2]float64{}},
		{"score NaN", scored(nil), false, `"success":true,"score":NaN`, `"success":true,"score":1`,
			"result.branches[0].score is NaN, which JSON does not allow", [2]bool{}, [2]float64{}},
		{"score a string", scored(nil), false, `"success":true,"score":"7"`, `"success":true,"score":1`,
			"result.branches[0].score: got string, want number", [2]bool{}, [2]float64{}},
		{"pass/fail world given a score", testInstance(), false, `"success":true,"score":1`, `"success":true`,
			`result.branches[0].score is reported but the world declares no score`, [2]bool{}, [2]float64{}},
		{"over: the same score", scored(nil), true, `"success":true,"score":7`, `"success":true,"score":7`, "", [2]bool{true, true}, [2]float64{7, 7}},
		{"over: another score", scored(nil), true, `"success":true,"score":7`, `"success":true,"score":6`,
			"result.branches[1] (arm on, replica 0).score is 6 but result.branches[0] (arm off, replica 0).score is 7: the run was over at the checkpoint", [2]bool{}, [2]float64{}},
	} {
		reply := `{"branches":[{` + tc.a + `,` + cost + `},{` + tc.b + `,` + cost + `}]}`
		out := make([]lab.BranchResult, 2)
		err := tc.inst.branchCall(7, 3, tc.over, []byte(`{}`), []fork.Arm{fork.Off, fork.On}, 1, false, out, 0, "").decode(json.RawMessage(reply))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: got %v\nwant %s", tc.name, err, tc.want)
		case tc.want == "":
			for i := range 2 {
				if out[i].Success != tc.successes[i] || out[i].Score == nil || *out[i].Score != tc.scores[i] {
					t.Errorf("%s: branch %d decoded success %v score %v", tc.name, i, out[i].Success, out[i].Score)
				}
			}
		}
	}
}
