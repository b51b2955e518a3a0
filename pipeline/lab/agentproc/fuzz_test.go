package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// forklab-agent/1 messages are outside bytes both ways: an agent's reply
// lines reach forklab (FuzzAgentReply: every method's results), and the
// requests forklab agent serve reads come from whoever runs it
// (FuzzServe: every method's params). Seeds are the f.Add calls and
// testdata/fuzz/<name>/ beside this file (a failing input found goes there).

// fuzzCalls makes the calls a reply line answers: kind picks the method
// (initialize is FuzzAgentReply's own case), ids from 1.
func fuzzCalls(kind uint8) ([]*call, bool) {
	plan := lab.Plan{ForkSteps: []int{3}, Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1}
	start := func() *call {
		var res lab.SeedResult
		res.Resize(&testDecl, plan)
		return testInstance().startCall(7, []int{3}, &res)
	}
	var group []*call
	batch := false
	switch kind % 4 {
	case 0:
		group = []*call{start()}
	case 1:
		group = []*call{testInstance().branchCall(7, 3, false, []byte(`{}`), []fork.Arm{fork.Off, fork.On}, 1, false, make([]lab.BranchResult, 2), 0, "fuzz")}
	case 2:
		group = []*call{foldCall(&testDecl, FoldParams{}, &Folded{})}
	case 3:
		group, batch = []*call{start(), start()}, true
	}
	for i, c := range group {
		c.id = int64(i + 1)
	}
	return group, batch
}

// FuzzAgentReply: any line an agent writes in answer to initialize,
// start, branch or fold (alone or in a batch) is refused with an error or
// taken; what is taken is what the method's schema (schemas/agent-protocol)
// accepts, and a taken declaration is one forklab can use.
func FuzzAgentReply(f *testing.F) {
	for kind, result := range []string{
		`{"task":{"budget":7},"forks":[{"fork_step":3,"over":false,"checkpoint":{"s":[1]},"features":{"same_obs":true,"mood":"calm","tokens_left":null},"hidden":{"stuck":false},"cost":{"steps":3,"usd":0.25}}]}`,
		`{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"details":{"why":"ok"}},{"error":{"code":-32000,"message":"m","data":{"retryable":false}}}]}`,
		`{"seed":5,"fork_step":2,"over":false,"checkpoint":[1,2],"features":{"same_obs":true,"mood":"wild","tokens_left":1.5},"hidden":{"stuck":false},"cost":{"steps":2,"usd":0}}`,
	} {
		f.Add(uint8(kind), []byte(`{"jsonrpc":"2.0","id":1,"result":`+result+`}`))
	}
	f.Add(uint8(1), []byte(`{"jsonrpc":"2.0","id":1,"result":{"branches":[{"success":true,"cost":{"steps":2,"usd":0.1},"transcript":[{"action":"refresh","observation":{"n":1},"cost":{"steps":1,"usd":0}}]},{"success":false,"score":0.5,"cost":{"steps":1,"usd":0},"transcript":[]}]}}`))
	f.Add(uint8(3), []byte(`[{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"x"}},{"jsonrpc":"2.0","id":1,"result":{"task":{},"forks":[]}}]`))
	f.Add(uint8(0), []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`))
	f.Add(uint8(1), []byte(`{"jsonrpc":"2.0","method":"log","params":{}}`))
	f.Add(uint8(0), []byte(`{"jsonrpc":"2.0","id":1,"result":{"task":{"budget":NaN}}}`))
	decl, _ := json.Marshal(InitializeResult{ProtocolVersion: Version, World: testDecl, Capabilities: Capabilities{Batch: 8}})
	f.Add(uint8(4), []byte(`{"jsonrpc":"2.0","id":1,"result":`+string(decl)+`}`))
	f.Fuzz(func(t *testing.T, kind uint8, reply []byte) {
		if kind%5 == 4 {
			r, err := decodeResponse(reply)
			if err != nil || r.Result == nil {
				return
			}
			res, err := DecodeInitialize(r.Result)
			if err != nil {
				return
			}
			if err := res.World.Validate(); err != nil {
				t.Fatalf("initialize result taken with a declaration that does not validate: %v", err)
			}
			again, _ := json.Marshal(res)
			if _, err := DecodeInitialize(again); err != nil {
				t.Fatalf("a taken initialize result, encoded again, is refused: %v\n%s", err, again)
			}
			return
		}
		group, batch := fuzzCalls(kind)
		k := &conn{label: "agent process 1", pid: 1, stderr: &relay{ended: true}}
		k.execd.Store(true)
		matchReply(k, group, reply, batch)
		for _, c := range group {
			if c.err == nil && c.raw != nil {
				if err := ValidateJSON(c.method+".result", "result", c.raw); err != nil {
					t.Fatalf("%s: took a result its schema refuses (%v): %s", c.method, err, c.raw)
				}
			}
		}
	})
}

// FuzzServe: forklab agent serve (the counter world) reading any lines
// answers each with one JSON-RPC 2.0 response line (or an array of them
// for a batch) that its schema accepts, whose results are what the
// method's result schema accepts, and stops only at shutdown or the end.
func FuzzServe(f *testing.F) {
	d := counter.Definition.Declaration()
	params, err := d.Resolve(nil)
	if err != nil {
		f.Fatal(err)
	}
	pj, _ := json.Marshal(params)
	inst, err := counter.Definition.Open(params, fork.Model{})
	if err != nil {
		f.Fatal(err)
	}
	cp, err := inst.Checkpoint(5, 2)
	if err != nil {
		f.Fatal(err)
	}
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_versions":["forklab-agent/1"],"client":{"name":"fuzz","version":"0"}}}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"start","params":{"seed":5,"fork_steps":[1,2],"params":%s,"model":{"temperature":0,"no_tool":0}}}`, pj),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"branch","params":{"seed":5,"fork_step":2,"checkpoint":%s,"branches":[{"arm":"off","intervention":null,"replica":0,"noise_key":"0123456789abcdef"},{"arm":"on","intervention":"refresh","replica":1,"noise_key":"fedcba9876543210"}]}}`, cp.Checkpoint),
		`[{"jsonrpc":"2.0","id":3,"method":"start","params":{"seed":6,"fork_steps":[3],"params":{},"model":{}}},{"jsonrpc":"2.0","id":4,"method":"fold","params":{}}]`,
		`{"jsonrpc":"2.0","id":9,"method":"shutdown","params":{}}`,
	}
	f.Add([]byte(strings.Join(lines, "\n") + "\n"))
	for _, l := range lines {
		f.Add([]byte(l + "\n"))
	}
	f.Add([]byte("not json\n[]\n{}\n{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"start\"}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 0 && in[len(in)-1] != '\n' {
			in = append(in, '\n') // a cut last line is a read error, not a request
		}
		var out bytes.Buffer
		if err := Serve(context.Background(), counter.Definition, bytes.NewReader(in), &out); err != nil {
			if strings.Contains(err.Error(), "a line longer than") {
				return
			}
			t.Fatalf("Serve: %v", err)
		}
		var asked []string // the non-blank request lines, in order
		for _, l := range strings.Split(string(in), "\n") {
			if l = strings.TrimSuffix(l, "\r"); strings.TrimSpace(l) != "" {
				asked = append(asked, l)
			}
		}
		answers := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			answers = nil
		}
		if len(answers) > len(asked) {
			t.Fatalf("%d answers to %d request lines", len(answers), len(asked))
		}
		for i, a := range answers {
			var one []json.RawMessage
			if strings.HasPrefix(a, "[") {
				if err := json.Unmarshal([]byte(a), &one); err != nil {
					t.Fatalf("answer %d is not a JSON array: %q", i, a)
				}
			} else {
				one = []json.RawMessage{json.RawMessage(a)}
			}
			// A request the protocol's schema accepts gets answers the
			// schema accepts; any line gets JSON-RPC 2.0 responses.
			conforming := ValidateJSON("request", "the request", []byte(asked[i])) == nil
			for _, r := range one {
				var env response
				if err := json.Unmarshal(r, &env); err != nil || checkEnvelope(&env) != nil {
					t.Fatalf("answer to %q is no JSON-RPC 2.0 response: %s", asked[i], r)
				}
				if !conforming {
					continue
				}
				if err := ValidateJSON("response", "the answer", r); err != nil {
					t.Fatalf("answer to %q: %v: %s", asked[i], err, r)
				}
				if _, err := decodeResponse(r); err != nil {
					t.Fatalf("answer to %q: forklab would refuse it: %v: %s", asked[i], err, r)
				}
			}
			// The result of a single request is what its schema accepts.
			var req struct {
				Method string `json:"method"`
			}
			var resp struct {
				Result json.RawMessage `json:"result"`
			}
			if len(one) == 1 && json.Unmarshal([]byte(asked[i]), &req) == nil && json.Unmarshal(one[0], &resp) == nil && resp.Result != nil {
				if err := ValidateJSON(req.Method+".result", "result", resp.Result); err != nil {
					t.Fatalf("%s: a result its schema refuses (%v): %s", req.Method, err, resp.Result)
				}
			}
		}
		if len(answers) < len(asked) && !strings.Contains(answers[len(answers)-1], `"result":{}`) {
			t.Fatalf("%d answers to %d request lines, the last not a shutdown's: %q", len(answers), len(asked), answers[len(answers)-1])
		}
	})
}
