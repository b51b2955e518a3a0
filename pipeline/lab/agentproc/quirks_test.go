package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// quirky is the command that runs testdata/quirky.py, a small agent whose
// protocol faults the QUIRK_* variables in env turn on.
func quirky(t testing.TB, env map[string]string) Command {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	path, err := filepath.Abs(filepath.Join("testdata", "quirky.py"))
	if err != nil {
		t.Fatal(err)
	}
	return Command{Line: "python3 " + path, Env: env}
}

// agent check gives initialize StartupTimeout, or --timeout if longer, as a
// sweep does (docs/agent-protocol.md, "initialize"): an agent that takes
// 1.5 s to load passes the handshake under a 1 s per-request timeout (the
// other checks are not this test's: quirky.py is no model agent).
func TestCheckGivesInitializeTheStartupTimeout(t *testing.T) {
	rows, _ := Check(context.Background(), CheckOptions{Command: quirky(t, map[string]string{"QUIRK_INIT_SLEEP": "1.5"}),
		Timeout: time.Second, Seeds: []uint64{0, 1}, LogDir: t.TempDir()})
	if len(rows) == 0 || rows[0].Name != "handshake" || rows[0].Status != Pass {
		t.Fatalf("rows %+v, want a passed handshake first", rows)
	}
}

// The "(pid N of /bin/sh running it)" label is true: a compound line whose
// shell exec's the agent (`cd dir && exec python3 agent.py`, as
// docs/agent-protocol.md recommends) reports the agent's pid plainly; one
// whose shell stays the parent says so.
func TestPidLabelIsTrue(t *testing.T) {
	cmd := quirky(t, nil)
	dir := filepath.Join("testdata")
	for _, tc := range []struct {
		line     string
		viaShell bool
	}{
		{"cd " + dir + " && exec python3 quirky.py", false},
		{"cd " + dir + " && python3 quirky.py; true", true},
		{cmd.Line, false},
	} {
		c, err := start(Command{Line: tc.line}, "agent process 1", nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := initialize(context.Background(), c, []string{Version}, ClientInfo{Name: "test"}, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		want := fmt.Sprintf("agent process 1 (pid %d)", c.pid)
		if tc.viaShell {
			want = fmt.Sprintf("agent process 1 (pid %d of /bin/sh running it)", c.pid)
		}
		if got := c.who(); got != want {
			t.Errorf("%s: named %q, want %q", tc.line, got, want)
		}
		c.kill()
		if got := c.who(); got != want {
			t.Errorf("%s, once killed: named %q, want %q", tc.line, got, want)
		}
	}
}

// What the first process writes to its stderr before its initialize reply
// goes to forklab's own stderr, every line of it, and none to agent-1.log
// once the sweep points it there (docs/agent-protocol.md, "Transport"):
// the relay drains the pipe before it switches, so the split does not
// depend on when its goroutine ran. forklab's stderr is read slowly here,
// so that much of what the agent wrote is still in its pipe when the sweep
// points the process at its log.
func TestInitializeStderrGoesToForklabsStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	var got bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { os.Stderr = saved }()
	dir := t.TempDir()
	const runs, lines = 3, 2000
	for i := range runs {
		def, err := Open(context.Background(), Config{Command: quirky(t, map[string]string{
			"QUIRK_INIT_STDERR": "init line " + strings.Repeat("x", 80), "QUIRK_INIT_STDERR_LINES": strconv.Itoa(lines)})})
		if err != nil {
			t.Fatal(err)
		}
		logs := filepath.Join(dir, strconv.Itoa(i))
		def.SetLogDir(logs)
		def.Close()
		b, err := os.ReadFile(filepath.Join(logs, "agent-1.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("--- forklab: agent process 1 (pid ")) || bytes.Contains(b, []byte("init line")) {
			t.Errorf("run %d: agent-1.log holds\n%s\nwant its header first and no line written during initialize", i, b)
		}
	}
	os.Stderr = saved
	w.Close()
	<-copied
	if n := strings.Count(got.String(), "init line "); n != runs*lines {
		t.Errorf("forklab's stderr got %d lines written during initialize, want %d", n, runs*lines)
	}
}

// openQuirky opens quirky.py with env, every request it receives recorded
// in a file (returned), retries quick.
func openQuirky(t *testing.T, env map[string]string, retries int, warn func(string)) (*Definition, *Instance, string) {
	t.Helper()
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	e := map[string]string{"QUIRK_RECORD": record}
	for k, v := range env {
		e[k] = v
	}
	def, err := Open(context.Background(), Config{Command: quirky(t, e), Retries: retries, Backoff: time.Millisecond,
		Timeout: 10 * time.Second, Warn: warn, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { def.Close() })
	inst, err := def.Open(world.Params{}, fork.Model{NoTool: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return def, inst.(*Instance), record
}

// starts sends the start requests of seeds to the pool, in one do (as
// batch lines when the agent takes them), and returns the calls.
func starts(t *testing.T, def *Definition, inst *Instance, seeds ...uint64) []*call {
	t.Helper()
	plan := lab.Plan{ForkSteps: []int{2}, Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1}
	var calls []*call
	for _, seed := range seeds {
		res := &lab.SeedResult{}
		res.Resize(&def.init.World, plan)
		calls = append(calls, inst.startCall(seed, plan.ForkSteps, res))
	}
	if err := def.pool.do(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	return calls
}

// recorded counts the start requests of seed the agent received, batch
// lines included.
func recorded(t *testing.T, path string, seed uint64) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), fmt.Sprintf(`"method":"start","params":{"seed":%d,`, seed))
}

// A reply that breaks the schema — a missing feature, an unknown key — is
// a failure of the process, as a line that is not JSON is
// (docs/agent-protocol.md, "Errors"): the process group is killed, a new
// process started (with initialize) for the retry, and the error row
// quotes the message and the agent's last stderr line. Every malformed
// reply takes that route; NaN and a missing jsonrpc key are named.
func TestMalformedRepliesRestartTheProcess(t *testing.T) {
	for _, tc := range []struct {
		quirk string
		want  []string
	}{
		{"QUIRK_MISSING", []string{"wrote a malformed start reply: result.forks[0].features.heads is missing: the declaration lists it (int)",
			`its stderr ends "quirky: writing a malformed start reply"`}},
		{"QUIRK_EXTRA", []string{"wrote a malformed start reply: ", `feautres`, `its stderr ends "quirky: writing a malformed start reply"`}},
		{"QUIRK_GARBAGE", []string{`wrote a malformed start reply: the line is not JSON: "loading model... done"`,
			`its stderr ends "quirky: about to write garbage"`}},
		{"QUIRK_NAN", []string{"wrote a malformed start reply: result.forks[0].features.heads is NaN, which JSON does not allow: write null or a string",
			`its stderr ends "quirky: pid `}},
		{"QUIRK_NOJSONRPC", []string{`wrote a malformed start reply: the key "jsonrpc" is missing: every reply carries "jsonrpc":"2.0"`,
			`its stderr ends "quirky: pid `}},
	} {
		t.Run(tc.quirk, func(t *testing.T) {
			def, inst, record := openQuirky(t, map[string]string{tc.quirk: "3"}, 2, nil)
			calls := starts(t, def, inst, 3)
			err := calls[0].err
			if err == nil {
				t.Fatal("the malformed reply was accepted")
			}
			for _, w := range append(tc.want, "(3 attempts)") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to hold %q", err, w)
				}
			}
			st := def.pool.Stats()
			if st.Processes != 3 || st.Requests[MethodInitialize] != 3 {
				t.Errorf("%d processes started, %d initialized; want 3 (the first, then one for each retry)", st.Processes, st.Requests[MethodInitialize])
			}
			// Every counter Stats reports, with its known value (issue 25
			// H: the retry count removed went unnoticed).
			if st.Retries != 2 || st.Failed != 1 || st.Requests[MethodStart] != 3 {
				t.Errorf("stats: %d retries, %d failed, %d start requests; want 2 (--retries 2), 1 (the run) and 3 (every attempt)", st.Retries, st.Failed, st.Requests[MethodStart])
			}
			if n := recorded(t, record, 3); n != 3 {
				t.Errorf("the agent was asked to start seed 3 %d times, want 3", n)
			}
		})
	}
}

// A batch line that fails as a whole counts as an attempt of each of its
// requests, so --retries bounds the requests per run: with 2 retries a
// run is asked at most 3 times, the batch included, and the error says so
// truly. The first such failure is told once, naming what the agent did
// and pointing at forklab agent check.
func TestFailedBatchesCountAndAreTold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		asked map[uint64]int // requests per seed, the batch's included
		fail  string         // seed 2's error, "" when it succeeds
		warn  string
	}{
		{"a response left out", map[string]string{"QUIRK_BATCH": "4", "QUIRK_BATCH_DROP": "1"}, map[uint64]int{0: 2, 2: 2, 3: 2}, "",
			"a batch of 4 start requests failed as a whole: agent process 1 (pid "},
		{"refused with id null", map[string]string{"QUIRK_BATCH": "4", "QUIRK_BATCH_NULL": "1", "QUIRK_MISSING": "2"}, map[uint64]int{0: 2, 2: 3, 3: 2},
			"(3 attempts)", "refused a batch of 4 start requests (one error response, id null): cannot read batches (code -32600)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []string
			def, inst, record := openQuirky(t, tc.env, 2, func(s string) { warnings = append(warnings, s) })
			calls := starts(t, def, inst, 0, 1, 2, 3)
			calls = append(calls, starts(t, def, inst, 4, 5, 6, 7)...) // a second failed batch: not told again
			for seed, want := range tc.asked {
				if n := recorded(t, record, seed); n != want {
					t.Errorf("seed %d was asked %d times, want %d", seed, n, want)
				}
			}
			for i, c := range calls {
				switch {
				case i == 2 && tc.fail != "":
					if c.err == nil || !strings.Contains(c.err.Error(), tc.fail) {
						t.Errorf("seed 2: %v, want an error holding %q", c.err, tc.fail)
					}
				case c.err != nil:
					t.Errorf("seed %d: %v", i, c.err)
				}
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], tc.warn) || !strings.Contains(warnings[0], "check the agent's batches with forklab agent check 'python3 ") {
				t.Errorf("warnings %q, want one naming %q and pointing at forklab agent check", warnings, tc.warn)
			}
		})
	}
}

// Branches of a run that was over must agree on success; a reply whose
// on arm disagrees is malformed, retried, and then that arm's branch is
// the error — labelled with its arm and replica — while off's and aa's,
// which agree, keep their outcome.
func TestOverDisagreementNamesTheArm(t *testing.T) {
	def, inst, _ := openQuirky(t, map[string]string{"QUIRK_OVERFLIP": "1"}, 1, nil)
	plan := lab.Plan{ForkSteps: []int{4}, Arms: []fork.Arm{fork.Off, fork.On, fork.AA}, Replicas: 1}
	r, err := inst.Runner(plan)
	if err != nil {
		t.Fatal(err)
	}
	var got []*lab.SeedResult
	if err := r.Run(context.Background(), 0, 2, func(res *lab.SeedResult) error { got = append(got, res); return nil }); err != nil {
		t.Fatal(err)
	}
	want := "wrote a malformed branch reply: result.branches[1] (arm on, replica 0).success is "
	for _, res := range got {
		f := res.Forks[0]
		if !f.Over {
			t.Fatalf("seed %d is not over at step 4", res.Seed)
		}
		if b := f.Branches; b[0].Err != "" || b[2].Err != "" || !strings.Contains(b[1].Err, want) || !strings.Contains(b[1].Err, "result.branches[0] (arm off, replica 0)") {
			t.Errorf("seed %d: branches %+v\nwant on's the error (%q…), off's and aa's outcomes", res.Seed, b, want)
		}
	}
	// Two seeds, each branch request sent twice (--retries 1), each reply
	// malformed: the first process and one started after each of the
	// first three failures (the fourth is replaced on demand).
	if st := def.pool.Stats(); st.Requests[MethodBranch] != 4 || st.Processes != 4 {
		t.Errorf("%d branch requests, %d processes started; want 4 and 4: a malformed reply is a failure of the process", st.Requests[MethodBranch], st.Processes)
	}
}

// A checkpoint goes back to the agent byte for byte but for white space
// (docs/agent-protocol.md, "branch"): no \u003c for <, no \u0026 for &,
// U+2028 and U+2029 as the agent wrote them.
func TestCheckpointsComeBackAsWritten(t *testing.T) {
	text := "caf\u00e9 \U0001F600 <&> a\u2028b\u2029c \\u003c"
	_, inst, record := openQuirky(t, map[string]string{"QUIRK_TEXT": text}, 0, nil)
	cp, err := inst.Checkpoint(5, 2)
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := marshalLine(text) // the text as JSON: its backslash doubled, nothing else escaped
	want := `"text":"caf` + "\u00e9 \U0001F600 <&> a\u2028b\u2029c " + `\\u003c"`
	if !strings.Contains(string(cp.Checkpoint), want) {
		t.Fatalf("checkpoint %s\nwant it to hold %s (%s)", cp.Checkpoint, want, quoted)
	}
	if _, err := inst.BranchAt(context.Background(), 5, 2, cp.Over, cp.Checkpoint, fork.On, 0, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	branch := lines[len(lines)-1]
	if !strings.Contains(branch, `"method":"branch"`) || !strings.Contains(branch, `"checkpoint":`+string(cp.Checkpoint)+`,`) {
		t.Errorf("branch request %s\nwant the checkpoint exactly as start gave it: %s", branch, cp.Checkpoint)
	}
}

// Every request that hands an agent's JSON back — a checkpoint in branch,
// the session's events in fold — carries it as the agent wrote it.
func TestRequestLinesKeepTheAgentsBytes(t *testing.T) {
	raw := json.RawMessage("{\"nonce\":\"a<b>&c \u2028\u2029 caf\u00e9\"}")
	for _, params := range []any{
		BranchParams{Seed: 5, ForkStep: 2, Checkpoint: raw, Branches: []BranchSpec{{Arm: fork.Off, NoiseKey: "0000000000000000"}}},
		FoldParams{Stream: "s", Offset: "o", Events: []json.RawMessage{raw, raw}},
	} {
		line, err := marshalLine(request{JSONRPC: "2.0", ID: 2, Method: "m", Params: params})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(line), string(raw)) == 0 || bytes.Contains(line, []byte(`\u00`)) || bytes.Contains(line, []byte(`\u202`)) {
			t.Errorf("%T: line %s\nwant %s in it as it is", params, line, raw)
		}
	}
}

// agent check names where two starts of one seed differ — the first JSON
// path, both values cut short — and says what to do: leave an id or a
// timestamp out, make it canonical or declare it volatile; nondeterministic
// is for runs whose outcome varies. The declaration's volatile paths are
// not compared: declared, the same agent passes.
func TestCheckNamesTheVolatileField(t *testing.T) {
	for _, tc := range []struct {
		volatile, want string
		pass           bool
	}{
		{"", `seed 0: asked twice, start's results differ at forks[0].checkpoint.messages[0].id: "`, false},
		{"forks[*].checkpoint.saved_at,forks[*].checkpoint.messages", "(2 volatile paths ignored)", true},
	} {
		env := map[string]string{"QUIRK_STAMP": "1"}
		if tc.volatile != "" {
			env["QUIRK_VOLATILE"] = tc.volatile
		}
		rows, _ := Check(context.Background(), CheckOptions{Command: quirky(t, env), Timeout: 10 * time.Second, Seeds: []uint64{0}, LogDir: t.TempDir()})
		var row CheckResult
		for _, r := range rows {
			if r.Name == "start is repeatable" {
				row = r
			}
		}
		if ok := row.Status == Pass; ok != tc.pass || !strings.Contains(row.Detail, tc.want) {
			t.Errorf("volatile %q: %s %q, want pass %t naming %q", tc.volatile, row.Status, row.Detail, tc.pass, tc.want)
		}
		if !tc.pass {
			for _, want := range []string{" then \"", `should be left out of the checkpoint or made canonical, or listed in the declaration's "volatile" ("volatile": ["forks[*].checkpoint.`,
				`declare "nondeterministic": true only if the run's outcome varies`} {
				if !strings.Contains(row.Detail, want) {
					t.Errorf("volatile %q: %q lacks %q", tc.volatile, row.Detail, want)
				}
			}
		}
	}
}

// startDiff skips the places a volatile path names, subtrees included, and
// names the first place that differs elsewhere, object keys in sorted
// order.
func TestStartDiff(t *testing.T) {
	a := json.RawMessage(`{"task":{},"forks":[{"fork_step":1,"checkpoint":{"saved_at":"1.5","messages":[{"id":"a1","role":"user"}],"z":1},"cost":{"steps":1,"seconds":0.2}}]}`)
	b := json.RawMessage(`{"task":{},"forks":[{"fork_step":1,"checkpoint":{"saved_at":"1.7","messages":[{"id":"b2","role":"user"}],"z":2},"cost":{"steps":1,"seconds":0.3}}]}`)
	for _, tc := range []struct {
		volatile []string
		want     string
	}{
		{nil, `forks[0].checkpoint.messages[0].id: "a1" vs "b2"`},
		{[]string{"forks[*].checkpoint.messages[*].id"}, `forks[0].checkpoint.saved_at: "1.5" vs "1.7"`},
		{[]string{"forks[*].checkpoint.messages", "forks[0].checkpoint.saved_at"}, `forks[0].checkpoint.z: 1 vs 2`},
		{[]string{"forks[*].checkpoint.*"}, ``},
	} {
		skip, err := volatileSkip(world.Declaration{Volatile: tc.volatile})
		if err != nil {
			t.Fatal(err)
		}
		got := startDiff(a, b, skip)
		if text := got.String(); tc.want == "" && got.path != "" || tc.want != "" && text != tc.want {
			t.Errorf("volatile %q: %q, want %q", tc.volatile, text, tc.want)
		}
	}
}
