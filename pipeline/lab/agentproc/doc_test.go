package agentproc

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	population "github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/world"
)

// Every message docs/agent-protocol.md shows is what forklab sends, or a
// reply forklab accepts: requests (→) are compared with the bytes forklab
// writes for the same request and checked against the schemas; replies (←)
// are checked against the schemas and decoded against the declaration the
// document's initialize reply gives.
func TestDocumentedMessages(t *testing.T) {
	const docSweepID = "5c0f2a9e41d7b8c3e6a1f0d9b2c4e7a8" // the sweep the document shows
	f, err := os.Open("../../../docs/agent-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type msg struct {
		line int
		text string
	}
	var sent, got []msg
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if s, ok := strings.CutPrefix(l, "→ "); ok {
			sent = append(sent, msg{n, s})
		}
		if s, ok := strings.CutPrefix(l, "← "); ok {
			got = append(got, msg{n, s})
		}
	}
	if len(sent) < 8 || len(got) < 8 {
		t.Fatalf("found %d requests and %d replies in the document", len(sent), len(got))
	}
	// Requests: schemas, then forklab's own bytes.
	// id -> method of each reply: the method of the latest request with
	// that id shown above it.
	methods := map[string]string{}
	replyMethod := map[int]map[string]string{}
	sentAt := 0
	for _, g := range got {
		for ; sentAt < len(sent) && sent[sentAt].line < g.line; sentAt++ {
			var one struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			var many []struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(sent[sentAt].text), &many) != nil {
				json.Unmarshal([]byte(sent[sentAt].text), &one)
				many = append(many, one)
			}
			for _, r := range many {
				methods[string(r.ID)] = r.Method
			}
		}
		replyMethod[g.line] = map[string]string{}
		for k, v := range methods {
			replyMethod[g.line][k] = v
		}
	}
	for _, m := range sent {
		if err := ValidateJSON("request", "line", []byte(m.text)); err != nil {
			t.Errorf("line %d: %v", m.line, err)
			continue
		}
		type req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		reqs := make([]req, 1)
		if strings.HasPrefix(m.text, "[") {
			json.Unmarshal([]byte(m.text), &reqs)
		} else {
			json.Unmarshal([]byte(m.text), &reqs[0])
		}
		for _, r := range reqs {
			if err := ValidateJSON(r.Method+".params", "params", r.Params); err != nil {
				t.Errorf("line %d: %v", m.line, err)
			}
		}
	}
	var decl world.Declaration
	for _, m := range got {
		if strings.HasPrefix(m.text, "[") {
			continue
		}
		var r response
		json.Unmarshal([]byte(m.text), &r)
		if replyMethod[m.line][string(r.ID)] == MethodInitialize && r.Result != nil {
			res, err := DecodeInitialize(r.Result)
			if err != nil {
				t.Fatalf("line %d: %v", m.line, err)
			}
			decl = res.World
			break
		}
	}
	if decl.Name != "seed_core" {
		t.Fatalf("no initialize reply of seed_core in the document")
	}
	inst := &Instance{def: &Definition{init: InitializeResult{World: decl}}, params: world.Params{}, model: fork.Model{NoTool: 0.5}}
	// The bytes forklab writes for the requests the document shows.
	cp := json.RawMessage(`{"seed":5,"fork_step":3,"state":{"v":3,"obs":0,"steps":3,"done":false,"declared":false,"frozen":true,"same_obs":true,"budget":8,"freeze_at":1},"repeat_run":3}`)
	branch := inst.branchCall(5, 3, false, cp, []fork.Arm{fork.Off, fork.On, fork.AA}, 1, false, make([]lab.BranchResult, 3), 0, docSweepID)
	start := func(seed uint64) request {
		return request{JSONRPC: "2.0", ID: int64(seed) - 3, Method: MethodStart, Params: StartParams{Seed: seed, ForkSteps: []int{3}, Params: world.Params{}, Model: fork.Model{NoTool: 0.5}}}
	}
	events := []json.RawMessage{json.RawMessage(`{"type":"incarnation","epoch":0,"nonce":"4be3a1f9c07d2e55","pid":4242}`),
		json.RawMessage(`{"type":"start","agent":"seed_core","version":"1","seed":5}`),
		json.RawMessage(`{"type":"action","step":1,"action":"increment","obs":0}`), json.RawMessage(`{"type":"action","step":2,"action":"increment","obs":0}`)}
	ours := map[string]bool{}
	cursor := "2"
	for _, v := range []any{
		request{JSONRPC: "2.0", ID: 1, Method: MethodInitialize, Params: InitializeParams{ProtocolVersions: []string{Version}, Client: ClientInfo{Name: "forklab", Version: "0.1.0"}}},
		start(5),
		request{JSONRPC: "2.0", ID: 3, Method: MethodBranch, Params: branch.params},
		request{JSONRPC: "2.0", ID: 4, Method: MethodShutdown, Params: struct{}{}},
		[]request{start(5), start(6)},
		request{JSONRPC: "2.0", ID: 2, Method: MethodFold, Params: FoldParams{Stream: "demo", Offset: "0000000000000000_0000000000000005_1_89fbe3e6", Events: events}},
		request{JSONRPC: "2.0", ID: 2, Method: MethodRuns, Params: RunsParams{Limit: population.PageSize}},
		request{JSONRPC: "2.0", ID: 3, Method: MethodRuns, Params: RunsParams{Cursor: &cursor, Limit: population.PageSize}},
		request{JSONRPC: "2.0", ID: 4, Method: MethodLoad, Params: LoadParams{RunID: "ticket-4411", ForkSteps: []int{3}, Params: world.Params{}}},
		request{JSONRPC: "2.0", ID: 5, Method: MethodInspect, Params: inst.inspectCall(cp, 3, &lab.ForkResult{}).params},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ours[string(b)] = true
	}
	for _, m := range sent {
		if !ours[m.text] {
			t.Errorf("line %d: forklab does not send this line: %s", m.line, m.text)
		}
	}
	// Replies: schemas, then forklab's decoding against the declaration.
	for _, m := range got {
		elems := []json.RawMessage{json.RawMessage(m.text)}
		if strings.HasPrefix(m.text, "[") {
			json.Unmarshal([]byte(m.text), &elems)
		}
		for _, e := range elems {
			r, err := decodeResponse(e)
			if err != nil {
				t.Errorf("line %d: %v", m.line, err)
				continue
			}
			if r.Error != nil {
				continue
			}
			method := replyMethod[m.line][string(r.ID)]
			if err := ValidateJSON(method+".result", "result", r.Result); err != nil {
				t.Errorf("line %d: %v", m.line, err)
			}
			var derr error
			switch method {
			case MethodStart:
				var res lab.SeedResult
				res.Resize(&decl, lab.Plan{ForkSteps: []int{3}, Arms: []fork.Arm{fork.Off}, Replicas: 1})
				derr = inst.startCall(5, []int{3}, &res).decode(r.Result)
			case MethodBranch:
				derr = inst.branchCall(5, 3, false, cp, []fork.Arm{fork.Off, fork.On, fork.AA}, 1, false, make([]lab.BranchResult, 3), 0, docSweepID).decode(r.Result)
			case MethodFold:
				derr = foldCall(&decl, FoldParams{}, &Folded{}).decode(r.Result)
			case MethodRuns:
				var rr RunsResult
				derr = decodeResult("runs.result", r.Result, &rr)
			case MethodLoad:
				var res lab.SeedResult
				res.Resize(&decl, lab.Plan{ForkSteps: []int{3}, Arms: []fork.Arm{fork.Off}, Replicas: 1})
				derr = inst.loadCall("ticket-4411", []int{3}, &res).decode(r.Result)
			case MethodInspect:
				derr = inst.inspectCall(cp, 3, &lab.ForkResult{}).decode(r.Result)
			}
			if derr != nil {
				t.Errorf("line %d: %v", m.line, derr)
			}
		}
	}
}

// The document's recipe for exact integers in JavaScript works — integers
// beyond 2^53 read as BigInts and written back as the same JSON numbers,
// numbers inside strings and every other value untouched — and the Node
// SDK (sdk/node/src/json.js) uses it line for line.
func TestExactIntegerRecipe(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	doc, err := os.ReadFile("../../../docs/agent-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "### Exact integers in JavaScript")
	_, block, ok2 := strings.Cut(sec, "```js\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no js block under \"Exact integers in JavaScript\" in docs/agent-protocol.md")
	}
	sdk, err := os.ReadFile("../../../sdk/node/src/json.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if !strings.Contains(string(sdk), l) {
			t.Errorf("sdk/node/src/json.js lacks the recipe's line %s", l)
		}
	}
	// The last four keys are strings (and keys) that look like the recipe's
	// marker for a big integer: they stay strings, as written.
	line := `{"seed":9223372036854775807,"x":1.5,"s":"9223372036854775807","n":-9007199254740993,"safe":9007199254740991,"e":1e21,"f":12345678901234567.5,"q":"a\"9007199254740993","list":[9007199254740993,2],"m":"\u0000bigint:42","m2":"\u0000\u0000x","\u0000bigint:7":"\u0000bigint:7","k\"\u0000bigint:5":"x\"\u0000bigint:5"}`
	script := block + `
const v = exactParse(process.argv[1]);
console.log([typeof v.seed, typeof v.n, typeof v.safe, typeof v.s, typeof v.q, typeof v.list[0], v.seed === 9223372036854775807n, v.n === -9007199254740993n, v.s === "9223372036854775807", v.q === 'a"9007199254740993', v.m === "\u0000bigint:42", v.m2 === "\u0000\u0000x", v["\u0000bigint:7"] === "\u0000bigint:7"].join(" "));
console.log(exactStringify(v));
`
	out, err := exec.Command(node, "-e", script, line).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := "bigint bigint number string string bigint true true true true true true true\n" +
		`{"seed":9223372036854775807,"x":1.5,"s":"9223372036854775807","n":-9007199254740993,"safe":9007199254740991,"e":1e+21,"f":12345678901234568,"q":"a\"9007199254740993","list":[9007199254740993,2],"m":"\u0000bigint:42","m2":"\u0000\u0000x","\u0000bigint:7":"\u0000bigint:7","k\"\u0000bigint:5":"x\"\u0000bigint:5"}` + "\n"
	if string(out) != want {
		t.Errorf("node printed\n%s\nwant\n%s", out, want)
	}
}
