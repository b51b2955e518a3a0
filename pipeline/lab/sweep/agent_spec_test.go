package sweep_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// A spec file's agent: block and the run keys read as written; the
// spec's identity (what a resumed sweep must match) leaves them out; bad
// values are refused naming the key.
func TestAgentSpecFile(t *testing.T) {
	s, err := sweep.ReadSpecFile("../../../testdata/specs/agent.yaml", sweep.DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	a := s.Agent
	if a == nil || a.Command != "python3 examples/agents/seed_core.py" || a.Parallel != 4 || time.Duration(a.Timeout) != 90*time.Second ||
		a.Retries == nil || *a.Retries != 3 || a.Environment["API_KEY"] != "secret-value" {
		t.Fatalf("agent: %+v", a)
	}
	if s.UnitSeeds != 100 || s.ErrorRateLimit() != 0.02 || s.MaxCost["steps"] != 50000 || s.Seeds.String() != "0:1000" {
		t.Fatalf("spec: %+v", s)
	}
	id, _ := json.Marshal(s.Identity())
	if strings.Contains(string(id), "agent") || strings.Contains(string(id), "max_") || !strings.Contains(string(id), `"unit_seeds":100`) {
		t.Fatalf("identity: %s", id)
	}
	if sweep.DefaultSpec().ErrorRateLimit() != 0.01 {
		t.Fatal("the default max error rate is not 1%")
	}
	for _, tc := range []struct{ yaml, want string }{
		{"agent: {command: x, timeout: soon}", `duration "soon": want a duration in [1ms, 24h] such as 90s or 2m`},
		{"agent: {command: x, parralel: 2}", `unknown key "parralel"`},
		{"max_cost: 5", "key max_cost: a number cannot be read as a mapping"},
	} {
		path := t.TempDir() + "/s.yaml"
		writeFile(t, path, tc.yaml)
		if _, err := sweep.ReadSpecFile(path, sweep.DefaultSpec()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	for _, tc := range []struct {
		edit func(*sweep.Spec)
		want string
	}{
		{func(s *sweep.Spec) { s.MaxCost = map[string]float64{"steps": 50} }, "max_cost: world counter is built in and a budget applies only to an external agent's sweep (--agent)"},
		// The real cause comes first, whatever the budget names.
		{func(s *sweep.Spec) { s.MaxCost = map[string]float64{"usd": 5} }, "max_cost: world counter is built in and a budget applies only to an external agent's sweep (--agent)"},
		{func(s *sweep.Spec) { s.MaxCost = map[string]float64{"dollars": 5} }, "max_cost: world counter is built in and a budget applies only to an external agent's sweep (--agent)"},
		{func(s *sweep.Spec) {
			s.MaxCost = map[string]float64{"usd": 5}
			s.Agent = &sweep.AgentSpec{Command: "x"}
		}, "max_cost: world counter does not report usd (it reports steps)"},
		{func(s *sweep.Spec) {
			s.MaxCost = map[string]float64{"dollars": 5}
			s.Agent = &sweep.AgentSpec{Command: "x"}
		}, `max_cost: unknown cost field "dollars"`},
		{func(s *sweep.Spec) { r := 1.5; s.MaxErrorRate = &r }, "max_error_rate: must be a share in [0, 1], got 1.5"},
		{func(s *sweep.Spec) { s.UnitSeeds = -1 }, "unit_seeds: must be 0 (automatic) or an integer in [1, 16777216], got -1"},
		{func(s *sweep.Spec) { s.Agent = &sweep.AgentSpec{Command: " "} }, "agent.command: is empty"},
	} {
		s := sweep.DefaultSpec()
		tc.edit(&s)
		if _, err := s.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
