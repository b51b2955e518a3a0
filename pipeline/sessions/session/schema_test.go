package session

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every event the fold produces or accepts, for the counter and for a
// world registered only in this test, validates against
// schemas/session-event.schema.json, and the schema refuses foreign ones.
func TestEventsMatchTheSchema(t *testing.T) {
	sessiontest.Register(t)
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
			start := c.start(t, seed)
			s.Apply(start)
			events = append(events, start)
			events = append(events, run(t, &s, 3)...)
			for _, arm := range []fork.Arm{fork.On, fork.Placebo, fork.Policy} {
				if !slices.Contains(s.Decl.Arms(), string(arm)) {
					continue
				}
				b := s
				fe := s.ForkEvent(s.Play.Steps(), arm, 1, seed%2 == 0)
				if err := b.Apply(fe); err != nil {
					t.Fatal(err)
				}
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
		`{"type":"tool_result","turn":1,"tool":"increment","obs":{"obs":1,"steps":1}}`,
		`{"type":"model_turn","turn":1,"tool":"no_tool"}`,
		`{"type":"outcome","success":true,"steps":3}`,
		`{"type":"outcome","success":true,"steps":3,"obs":{},"declared":true}`,
		`{"type":"session_start","version":1,"world":"counter","world_version":"2","params":{},"model":{"temperature":0,"no_tool":0},"seed":0}`,
		`{"type":"session_start","version":2,"world":"counter","params":{},"model":{"temperature":0,"no_tool":0},"seed":0}`,
		`{"type":"session_start","version":2,"world":"Counter!","world_version":"2","params":{},"model":{"temperature":0,"no_tool":0},"seed":0}`,
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
