package agentproc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/agentproc"
	_ "github.com/forklab/forklab/pipeline/worlds/toolloop"
)

func statuses(rows []agentproc.CheckResult) map[string]agentproc.CheckResult {
	out := map[string]agentproc.CheckResult{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

// agent check passes a conforming agent (every built-in world served),
// fails a nondeterministic one that does not say so, one that leaves out a
// declared feature and one that sends a feature of the wrong type — each
// row naming the problem.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, world, faults string
		fail                map[string]string // check -> text its detail must hold
	}{
		{"counter", "counter", "", nil},
		{"toolloop", "toolloop", "", nil},
		{"coin flips", "counter", "coin=1", map[string]string{
			"same request, same outcome": "the same checkpoint, arm and replica must give the same outcome; seed the sampler with noise_key, or declare \"nondeterministic\": true and sweep with --replicas"}},
		{"missing feature", "counter", "drop=repeat_run", map[string]string{
			"declared values": "wrote a malformed start reply: result.forks[0].features.repeat_run is missing: the declaration lists it (int)"}},
		{"feature of the wrong type", "counter", "retype=same_obs", map[string]string{
			"declared values": "result.forks[0].features.same_obs must be a bool, got a string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, _ := agentproc.Check(context.Background(), agentproc.CheckOptions{Command: agent(tc.world, tc.faults),
				Timeout: 10 * time.Second, Seeds: []uint64{0, 1, 2, 3}, ForkStep: 2, LogDir: t.TempDir()})
			if len(rows) != 12 {
				t.Fatalf("%d rows: %+v", len(rows), rows)
			}
			for _, r := range rows {
				want, failing := tc.fail[r.Name]
				switch {
				case failing && (r.Status != agentproc.Fail || !strings.Contains(r.Detail, want)):
					t.Errorf("%s: %s %q, want FAIL naming %q", r.Name, r.Status, r.Detail, want)
				case !failing && r.Status == agentproc.Fail:
					t.Errorf("%s: FAIL %s", r.Name, r.Detail)
				}
			}
			st := statuses(rows)
			if tc.fail == nil {
				for _, name := range []string{"handshake", "version negotiation", "declared values", "start is repeatable", "every arm branches",
					"same request, same outcome", "fresh-process fork", "unknown method", "malformed input", "batches", "shutdown"} {
					if st[name].Status != agentproc.Pass {
						t.Errorf("%s: %s %s", name, st[name].Status, st[name].Detail)
					}
				}
			}
		})
	}
}

// An agent that does not start, or does not speak the protocol, fails the
// handshake with what went wrong, and every other check is skipped.
func TestCheckHandshakeFailures(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{"exit 3", "exited with status 3 during initialize"},
		{"echo hello; sleep 5", `malformed initialize reply: the line is not JSON`},
		{`read x; echo '{"jsonrpc":"2.0","id":1,"result":{"protocol_version":"forklab-agent/1","world":{"name":"w","version":"1","features":[{"name":"f","type":"boolean"}],"cost":{"fields":["steps"]}},"capabilities":{}}}'; sleep 5`,
			"result.world.features[0].type: value must be one of"},
		{`read x; echo '{"jsonrpc":"2.0","id":1,"result":{"protocol_version":"forklab-agent/1","world":{"name":"w","version":"1","features":[{"name":"f","type":"bool"}],"cost":{"fields":["tokens"]}},"capabilities":{}}}'; sleep 5`,
			`result.world: world w: cost fields must include "steps"`},
	} {
		rows, _ := agentproc.Check(context.Background(), agentproc.CheckOptions{Command: agentproc.Command{Line: tc.line}, Timeout: 2 * time.Second})
		st := statuses(rows)
		if st["handshake"].Status != agentproc.Fail || !strings.Contains(st["handshake"].Detail, tc.want) {
			t.Errorf("%s: handshake %s %q, want FAIL naming %q", tc.line, st["handshake"].Status, st["handshake"].Detail, tc.want)
		}
		if st["shutdown"].Status != agentproc.Skip {
			t.Errorf("%s: shutdown %s after a failed handshake", tc.line, st["shutdown"].Status)
		}
	}
}
