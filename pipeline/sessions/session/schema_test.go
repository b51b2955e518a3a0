package session

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every event the fold produces or accepts validates against
// schemas/session-event.schema.json, and the schema refuses foreign ones.
func TestEventsMatchTheSchema(t *testing.T) {
	f, err := os.Open("../../../schemas/session-event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("session-event.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := comp.Compile("session-event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	valid := func(b []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		return schema.Validate(v)
	}
	checked := map[string]int{}
	epoch := int64(0)
	inc := Event{Type: TypeIncarnation, Epoch: &epoch, Nonce: "ab12", PID: 7, At: "2026-11-29T08:00:00Z"}
	events := []Event{inc}
	for _, c := range configs() {
		for seed := uint64(0); seed < 60; seed++ {
			var s Session
			start := Start(c.p, c.m, seed)
			s.Apply(start)
			events = append(events, start)
			events = append(events, run(t, &s, 3)...)
			for _, arm := range []fork.Arm{fork.On, fork.Placebo, fork.Policy} {
				b := s
				fe := ForkEvent(3, arm, 1, seed%2 == 0)
				b.Apply(fe)
				events = append(events, fe)
				events = append(events, run(t, &b, 0)...)
			}
		}
	}
	for _, e := range events {
		if err := valid(e.Encode()); err != nil {
			t.Fatalf("%s: %v", e.Encode(), err)
		}
		checked[e.Type]++
		if e.Type == TypeModelTurn && e.NoTool {
			checked["no_tool"]++
		}
	}
	for _, typ := range []string{TypeIncarnation, TypeStart, TypeFork, TypeRecovery, TypeModelTurn, TypeToolResult, TypeOutcome, "no_tool"} {
		if checked[typ] == 0 {
			t.Errorf("no %s event was checked", typ)
		}
	}
	for _, bad := range []string{
		`{"type":"model_turn","turn":1}`,
		`{"type":"model_turn","turn":1,"tool":"increment","no_tool":true}`,
		`{"type":"tool_result","turn":1,"tool":"increment","obs":1}`,
		`{"type":"outcome","success":true}`,
		`{"type":"chat","text":"hi"}`,
		`{"type":"incarnation","epoch":-1,"nonce":"x"}`,
	} {
		if valid([]byte(bad)) == nil {
			t.Errorf("schema accepted %s", bad)
		}
		var e Event
		if json.Unmarshal([]byte(bad), &e) == nil && e.Type == "" {
			t.Errorf("%s has no type", bad)
		}
	}
}
