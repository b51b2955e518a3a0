package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// CheckStatus is the verdict of one conformance check.
type CheckStatus string

// The verdicts. Only Fail fails the check run.
const (
	Pass CheckStatus = "pass"
	Fail CheckStatus = "FAIL"
	Skip CheckStatus = "skip"
	Note CheckStatus = "note"
)

// CheckResult is one row of forklab agent check's table.
type CheckResult struct {
	Name   string      `json:"check"`
	Status CheckStatus `json:"status"`
	Detail string      `json:"detail"`
}

// CheckOptions configure Check.
type CheckOptions struct {
	Command Command
	// Timeout bounds each request (default 30s).
	Timeout time.Duration
	// Seeds are the tasks played (default 0 to 7); ForkStep the fork step
	// (default 2; the run is also checkpointed at step 1).
	Seeds    []uint64
	ForkStep int
	// Params set declared parameters (the rest take their defaults).
	Params map[string]any
	// LogDir receives the agents' standard error (agent-check-N.log).
	LogDir string
}

// Check runs the conformance checks of forklab-agent/1 against an agent,
// in the spirit of the Durable Streams conformance suite: the handshake and
// version negotiation; start's replies carrying every declared task draw,
// feature and hidden value with its type; every declared arm branched;
// the same checkpoint, arm and replica giving the same outcome (or the
// agent declaring itself nondeterministic, in which case the row tells the
// user to sweep with replicas); a checkpoint forked in a fresh process
// giving the outcome it gave in the first; error replies for an unknown
// method, and malformed input refused without the process dying; batches
// when declared; shutdown. It returns the rows in order; a row with status
// Fail means the agent does not conform.
func Check(ctx context.Context, opt CheckOptions) []CheckResult {
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if len(opt.Seeds) == 0 {
		opt.Seeds = []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	}
	if opt.ForkStep <= 0 {
		opt.ForkStep = 2
	}
	ck := &checker{opt: opt, ctx: ctx}
	ck.run()
	return ck.rows
}

type checker struct {
	opt   CheckOptions
	ctx   context.Context
	rows  []CheckResult
	n     int
	init  *InitializeResult
	inst  *Instance
	steps []int
	// per seed: the start result and the outcomes of every branch
	starts   []*lab.SeedResult
	outcomes [][][]lab.BranchResult // seed, fork, branch (arm-major, 2 replicas)
	arms     []fork.Arm
	varies   bool // the same branch asked twice gave two outcomes
}

const checkReplicas = 2

func (k *checker) add(name string, st CheckStatus, format string, args ...any) {
	k.rows = append(k.rows, CheckResult{Name: name, Status: st, Detail: fmt.Sprintf(format, args...)})
}

// spawn starts a fresh agent process and initializes it (with versions).
func (k *checker) spawn(versions []string) (*conn, *response, error) {
	k.n++
	var stderr *os.File
	logPath := ""
	if k.opt.LogDir != "" {
		if err := os.MkdirAll(k.opt.LogDir, 0o755); err != nil {
			return nil, nil, err
		}
		logPath = filepath.Join(k.opt.LogDir, fmt.Sprintf("agent-check-%d.log", k.n))
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		stderr = f
	}
	c, err := start(k.opt.Command, fmt.Sprintf("agent process %d", k.n), stderr, logPath)
	if err != nil {
		return nil, nil, err
	}
	r, err := k.raw(c, request{JSONRPC: "2.0", ID: c.id(), Method: MethodInitialize,
		Params: InitializeParams{ProtocolVersions: versions, Client: ClientInfo{Name: "forklab agent check", Version: Version}}}, MethodInitialize)
	if err != nil {
		c.kill()
		return nil, nil, err
	}
	return c, r, nil
}

// raw sends one request value (or any line when v is []byte) and decodes
// the reply's envelope.
func (k *checker) raw(c *conn, v any, what string) (*response, error) {
	line, ok := v.([]byte)
	if !ok {
		var err error
		if line, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	reply, err := c.call(k.ctx, line, k.opt.Timeout, what)
	if err != nil {
		return nil, err
	}
	r, err := decodeResponse(bytes.TrimSpace(reply))
	if err != nil {
		return nil, fmt.Errorf("malformed %s reply: %v", what, err)
	}
	return &r, nil
}

// ask sends one call on c and decodes its result with the call's decoder.
func (k *checker) ask(c *conn, cl *call) error {
	r, err := k.raw(c, request{JSONRPC: "2.0", ID: c.id(), Method: cl.method, Params: cl.params}, cl.method)
	if err != nil {
		return err
	}
	if r.Error != nil {
		return fmt.Errorf("the agent answered %s with error %d: %s", cl.method, r.Error.Code, r.Error.Message)
	}
	if err := cl.decode(r.Result); err != nil {
		return fmt.Errorf("malformed %s reply: %v", cl.method, err)
	}
	return nil
}

func (k *checker) skipRest(from string) {
	for _, name := range checkNames {
		if name == from || k.has(name) {
			continue
		}
		k.add(name, Skip, "not run: an earlier check failed")
	}
}

func (k *checker) has(name string) bool {
	for _, r := range k.rows {
		if r.Name == name {
			return true
		}
	}
	return false
}

// The checks, in order.
var checkNames = []string{
	"handshake", "version negotiation", "declared values", "start is repeatable", "every arm branches",
	"same request, same outcome", "fresh-process fork", "unknown method", "malformed input", "batches", "fold", "shutdown",
}

func (k *checker) run() {
	c, r, err := k.spawn([]string{Version})
	if err == nil && r.Error != nil {
		err = fmt.Errorf("it refused initialize: %s (code %d)", r.Error.Message, r.Error.Code)
	}
	if err == nil {
		k.init, err = DecodeInitialize(r.Result)
	}
	if err != nil {
		k.add("handshake", Fail, "%s", strings.TrimPrefix(err.Error(), ErrAgent.Error()+": "))
		if c != nil {
			c.kill()
		}
		k.skipRest("")
		return
	}
	defer c.kill()
	d := k.init.World
	note := fmt.Sprintf("world %s %s: %d features, %d hidden, arms %s", d.Name, d.Version, len(d.Features), len(d.Hidden), strings.Join(d.Arms(), ","))
	if d.Nondeterministic {
		note += "; declares itself nondeterministic"
	}
	k.add("handshake", Pass, "%s", note)
	k.versions()

	params, err := d.Resolve(k.opt.Params)
	if err != nil {
		k.add("declared values", Fail, "--param: %v", err)
		k.skipRest("")
		return
	}
	def := &Definition{init: *k.init}
	k.inst = &Instance{def: def, params: params, model: fork.Model{}}
	k.steps = []int{1}
	if k.opt.ForkStep > 1 {
		k.steps = append(k.steps, k.opt.ForkStep)
	}
	for _, a := range d.Arms() {
		if a != string(fork.Policy) {
			k.arms = append(k.arms, fork.Arm(a))
		}
	}
	if !k.declared(c) {
		k.skipRest("")
		return
	}
	k.repeatableStart(c)
	if !k.branches(c) {
		k.skipRest("")
		return
	}
	k.sameOutcome(c)
	k.freshProcess()
	k.unknownMethod(c)
	k.malformed(c)
	k.batches(c)
	if k.init.Capabilities.Fold {
		k.add("fold", Note, "declared; not exercised here (it needs a session on the log): try forklab fork --stream S --offset O --agent CMD")
	} else {
		k.add("fold", Skip, "not declared: forks from the session log are not available for this agent")
	}
	k.shutdown(c)
}

func (k *checker) versions() {
	c, r, err := k.spawn([]string{"forklab-agent/999"})
	switch {
	case err != nil:
		k.add("version negotiation", Fail, "offered only forklab-agent/999, the agent failed instead of refusing: %v", errText(err))
	case r.Error == nil:
		k.add("version negotiation", Fail, "offered only forklab-agent/999, the agent accepted it: it must answer error %d", CodeUnsupportedProto)
	case r.Error.Code != CodeUnsupportedProto:
		k.add("version negotiation", Fail, "offered only forklab-agent/999, the agent answered error %d; want %d", r.Error.Code, CodeUnsupportedProto)
	default:
		k.add("version negotiation", Pass, "an unknown version is refused with %d", CodeUnsupportedProto)
	}
	if c != nil {
		c.kill()
	}
}

func (k *checker) plan() lab.Plan {
	return lab.Plan{ForkSteps: k.steps, Arms: k.arms, Replicas: checkReplicas}
}

func (k *checker) declared(c *conn) bool {
	d := &k.init.World
	for _, seed := range k.opt.Seeds {
		res := &lab.SeedResult{}
		res.Resize(d, k.plan())
		res.Seed = seed
		if err := k.ask(c, k.inst.startCall(seed, k.steps, res)); err != nil {
			k.add("declared values", Fail, "seed %d: %s", seed, errText(err))
			return false
		}
		k.starts = append(k.starts, res)
	}
	k.add("declared values", Pass, "%d seeds at fork steps %v: every task draw, feature and hidden value present, of its declared type", len(k.opt.Seeds), k.steps)
	return true
}

func (k *checker) repeatableStart(c *conn) {
	if k.init.World.Nondeterministic {
		k.add("start is repeatable", Skip, "the agent declares itself nondeterministic")
		return
	}
	for i, seed := range k.opt.Seeds {
		res := &lab.SeedResult{}
		res.Resize(&k.init.World, k.plan())
		if err := k.ask(c, k.inst.startCall(seed, k.steps, res)); err != nil {
			k.add("start is repeatable", Fail, "seed %d, asked again: %s", seed, errText(err))
			return
		}
		a, b := k.starts[i], res
		for fi := range a.Forks {
			if !bytes.Equal(a.Forks[fi].Checkpoint, b.Forks[fi].Checkpoint) || !sameValues(a.Forks[fi].Features, b.Forks[fi].Features) {
				k.add("start is repeatable", Fail, "seed %d fork step %d: asked twice, the checkpoint or features differ: a run must be a function of its seed and parameters (declare \"nondeterministic\": true if it cannot be)", seed, a.Forks[fi].ForkStep)
				return
			}
		}
	}
	k.add("start is repeatable", Pass, "the same seed twice gives the same checkpoints and features")
}

func sameValues(a, b []world.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// branchAll branches every fork of every seed on c.
func (k *checker) branchAll(c *conn) ([][][]lab.BranchResult, error) {
	var all [][][]lab.BranchResult
	for si, res := range k.starts {
		var perFork [][]lab.BranchResult
		for _, f := range res.Forks {
			out := make([]lab.BranchResult, len(k.arms)*checkReplicas)
			cl := k.inst.branchCall(res.Seed, f.ForkStep, f.Checkpoint, k.arms, checkReplicas, false, out, 0)
			if err := k.ask(c, cl); err != nil {
				return nil, fmt.Errorf("seed %d fork step %d: %s", k.opt.Seeds[si], f.ForkStep, errText(err))
			}
			for bi, b := range out {
				if b.Err != "" {
					return nil, fmt.Errorf("seed %d fork step %d arm %s: %s", res.Seed, f.ForkStep, k.arms[bi/checkReplicas], b.Err)
				}
			}
			perFork = append(perFork, out)
		}
		all = append(all, perFork)
	}
	return all, nil
}

func (k *checker) branches(c *conn) bool {
	all, err := k.branchAll(c)
	if err != nil {
		k.add("every arm branches", Fail, "%v", err)
		return false
	}
	k.outcomes = all
	k.add("every arm branches", Pass, "arms %s × %d replicas of every checkpoint: valid outcomes and costs", joinArms(k.arms), checkReplicas)
	return true
}

func joinArms(arms []fork.Arm) string {
	s := make([]string, len(arms))
	for i, a := range arms {
		s[i] = string(a)
	}
	return strings.Join(s, ",")
}

// differ finds the first outcome that differs between two runs of every
// branch.
func (k *checker) differ(a, b [][][]lab.BranchResult) string {
	for si := range a {
		for fi := range a[si] {
			for bi := range a[si][fi] {
				x, y := a[si][fi][bi], b[si][fi][bi]
				if x.Success != y.Success || x.Cost != y.Cost || !bytes.Equal(x.Details, y.Details) {
					return fmt.Sprintf("seed %d fork step %d arm %s replica %d: success %t cost %+v, then success %t cost %+v",
						k.starts[si].Seed, k.steps[fi], k.arms[bi/checkReplicas], bi%checkReplicas, x.Success, x.Cost, y.Success, y.Cost)
				}
			}
		}
	}
	return ""
}

func (k *checker) sameOutcome(c *conn) {
	again, err := k.branchAll(c)
	if err != nil {
		k.add("same request, same outcome", Fail, "asked again: %v", err)
		return
	}
	diff := k.differ(k.outcomes, again)
	switch {
	case k.init.World.Nondeterministic:
		k.add("same request, same outcome", Note, "the agent declares itself nondeterministic: sweep with --replicas 5 or more (odd) and read the aa arm's flip rate as the noise floor")
	case diff != "":
		k.varies = true
		k.add("same request, same outcome", Fail, "%s: the same checkpoint, arm and replica must give the same outcome; seed the sampler with noise_key, or declare \"nondeterministic\": true and sweep with --replicas", diff)
	default:
		k.add("same request, same outcome", Pass, "every branch asked twice gives the same success, cost and details")
	}
}

func (k *checker) freshProcess() {
	c, r, err := k.spawn([]string{Version})
	if err == nil && r.Error != nil {
		err = fmt.Errorf("it refused initialize: %s", r.Error.Message)
	}
	if err != nil {
		k.add("fresh-process fork", Fail, "a second process: %s", errText(err))
		return
	}
	defer c.kill()
	other, err := k.branchAll(c)
	if err != nil {
		k.add("fresh-process fork", Fail, "checkpoints of the first process, branched in a second: %v", err)
		return
	}
	if k.init.World.Nondeterministic || k.varies {
		k.add("fresh-process fork", Pass, "a second process accepts the first one's checkpoints (outcomes not compared: they vary within one process already)")
		return
	}
	if diff := k.differ(k.outcomes, other); diff != "" {
		k.add("fresh-process fork", Fail, "%s (first process, then a fresh one): a checkpoint must hold everything a branch needs", diff)
		return
	}
	k.add("fresh-process fork", Pass, "checkpoints forked in a fresh process give the first process's outcomes")
}

func (k *checker) alive(c *conn) error {
	res := &lab.SeedResult{}
	res.Resize(&k.init.World, k.plan())
	return k.ask(c, k.inst.startCall(k.opt.Seeds[0], k.steps, res))
}

func (k *checker) unknownMethod(c *conn) {
	id := c.id()
	r, err := k.raw(c, request{JSONRPC: "2.0", ID: id, Method: "no_such_method", Params: struct{}{}}, "no_such_method")
	switch {
	case err != nil:
		k.add("unknown method", Fail, "%s", errText(err))
		return
	case r.Error == nil:
		k.add("unknown method", Fail, "no_such_method was answered with a result; want error %d", CodeMethodNotFound)
		return
	case r.Error.Code != CodeMethodNotFound:
		k.add("unknown method", Fail, "no_such_method was answered with error %d; want %d", r.Error.Code, CodeMethodNotFound)
		return
	case string(r.ID) != fmt.Sprint(id):
		k.add("unknown method", Fail, "the error reply's id is %s; want the request's, %d", r.ID, id)
		return
	}
	if err := k.alive(c); err != nil {
		k.add("unknown method", Fail, "after the error reply the agent no longer answers: %s", errText(err))
		return
	}
	k.add("unknown method", Pass, "answered with error %d and the request's id; the agent goes on", CodeMethodNotFound)
}

func (k *checker) malformed(c *conn) {
	cp := k.starts[0].Forks[0].Checkpoint
	cases := []struct {
		what string
		line any
		want []int
	}{
		{"a line that is not JSON", []byte(`{"jsonrpc":"2.0","id":`), []int{CodeParseError}},
		{"start with seed \"seven\"", []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"start","params":{"seed":"seven","fork_steps":[1],"params":{},"model":{"temperature":0,"no_tool":0.5}}}`, c.id())), []int{CodeInvalidParams}},
		{"start without fork_steps", []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"start","params":{"seed":1,"params":{},"model":{"temperature":0,"no_tool":0.5}}}`, c.id())), []int{CodeInvalidParams}},
		{"branch of a checkpoint that is not one", request{JSONRPC: "2.0", ID: c.id(), Method: MethodBranch,
			Params: BranchParams{Seed: 1, ForkStep: 1, Checkpoint: json.RawMessage(`{"forged":true,"state":"nothing"}`),
				Branches: []BranchSpec{{Arm: fork.Off, Replica: 0, NoiseKey: NoiseKey(1, 1, fork.Off, 0)}}}}, []int{CodeBadCheckpoint, CodeInvalidParams}},
		{"branch with an undeclared intervention", request{JSONRPC: "2.0", ID: c.id(), Method: MethodBranch,
			Params: BranchParams{Seed: k.starts[0].Seed, ForkStep: 1, Checkpoint: cp,
				Branches: []BranchSpec{{Arm: fork.On, Intervention: ptr("no_such_action_xyz"), Replica: 0, NoiseKey: NoiseKey(1, 1, fork.On, 0)}}}}, []int{CodeInvalidParams}},
	}
	for _, tc := range cases {
		r, err := k.raw(c, tc.line, "malformed request")
		switch {
		case err != nil:
			k.add("malformed input", Fail, "%s: %s", tc.what, errText(err))
			return
		case r.Error == nil:
			k.add("malformed input", Fail, "%s was answered with a result; it must be refused with error %v", tc.what, tc.want)
			return
		case !containsInt(tc.want, r.Error.Code):
			k.add("malformed input", Fail, "%s was refused with error %d; want %v", tc.what, r.Error.Code, tc.want)
			return
		}
		if err := k.alive(c); err != nil {
			k.add("malformed input", Fail, "after refusing %s the agent no longer answers: %s", tc.what, errText(err))
			return
		}
	}
	k.add("malformed input", Pass, "%d malformed requests refused with the right codes; the agent goes on", len(cases))
}

func ptr(s string) *string { return &s }

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func (k *checker) batches(c *conn) {
	if k.init.Capabilities.Batch <= 1 {
		k.add("batches", Skip, "not declared: one request per line")
		return
	}
	var calls []*call
	var reqs []request
	for _, seed := range k.opt.Seeds[:min(2, len(k.opt.Seeds))] {
		res := &lab.SeedResult{}
		res.Resize(&k.init.World, k.plan())
		cl := k.inst.startCall(seed, k.steps, res)
		cl.id = c.id()
		calls = append(calls, cl)
		reqs = append(reqs, request{JSONRPC: "2.0", ID: cl.id, Method: cl.method, Params: cl.params})
	}
	line, _ := json.Marshal(reqs)
	reply, err := c.call(k.ctx, line, k.opt.Timeout, "batch")
	if err != nil {
		k.add("batches", Fail, "a batch of %d starts: %s", len(reqs), errText(err))
		return
	}
	p := &Pool{}
	if err := p.match(&slot{c: c}, calls, reply, true); err != nil {
		k.add("batches", Fail, "a batch of %d starts: %s", len(reqs), errText(err))
		return
	}
	for _, cl := range calls {
		if cl.err != nil {
			k.add("batches", Fail, "a batch of %d starts: %s", len(reqs), errText(cl.err))
			return
		}
	}
	k.add("batches", Pass, "a batch of %d starts is answered by an array of %d responses (declared batch %d)", len(reqs), len(reqs), k.init.Capabilities.Batch)
}

func (k *checker) shutdown(c *conn) {
	r, err := k.raw(c, request{JSONRPC: "2.0", ID: c.id(), Method: MethodShutdown, Params: struct{}{}}, MethodShutdown)
	if err != nil {
		k.add("shutdown", Fail, "%s", errText(err))
		return
	}
	if r.Error != nil {
		k.add("shutdown", Fail, "answered with error %d: %s", r.Error.Code, r.Error.Message)
		return
	}
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(k.opt.Timeout):
		k.add("shutdown", Fail, "answered, but had not exited %s after shutdown and the end of its stdin", k.opt.Timeout)
		return
	}
	var ee interface{ ExitCode() int }
	if errors.As(c.waitErr, &ee) && ee.ExitCode() != 0 {
		k.add("shutdown", Fail, "exited with status %d after shutdown; want 0", ee.ExitCode())
		return
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	k.add("shutdown", Pass, "answered {} and exited with status 0")
}
