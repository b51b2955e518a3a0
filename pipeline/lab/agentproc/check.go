package agentproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

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

// CheckTimeout is forklab agent check's default deadline per request.
const CheckTimeout = 30 * time.Second

// CheckOptions configure Check.
type CheckOptions struct {
	Command Command
	// Timeout bounds each request (default 30s); initialize gets
	// StartupTimeout if that is longer, as in a sweep.
	Timeout time.Duration
	// Seeds are the tasks played (default 0 to 7); ForkStep the fork step
	// (default 2; the run is also checkpointed at step 1).
	Seeds    []uint64
	ForkStep int
	// Params set declared parameters, each "key=value" as --param takes
	// it (world.Declaration.ParseParamText); the rest take their defaults.
	Params []string
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
// giving the outcome it gave in the first (and declaring what the first
// did); error replies for an unknown method, and malformed input refused
// with the request's id without the process dying; batches when declared;
// shutdown, the process exiting within ShutdownGrace. Every reply goes
// through roundTrip, the validation a sweep uses, so an agent fails here
// with the sweep's message wherever a sweep would refuse its reply. It
// returns the rows in order; a row with status Fail means the agent does
// not conform. The error is non-nil only for bad input, not a fault of the
// agent: a Params entry that names no declared parameter or does not fit
// one (the agent's handshake has to be read first to know). The rows then
// end at the "declared values" row that names it, and the rest are
// skipped.
func Check(ctx context.Context, opt CheckOptions) ([]CheckResult, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = CheckTimeout
	}
	if len(opt.Seeds) == 0 {
		opt.Seeds = []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	}
	if opt.ForkStep <= 0 {
		opt.ForkStep = 2
	}
	ck := &checker{opt: opt, ctx: ctx, sweepID: "agent-check-" + randomHex(4)}
	ck.run()
	return ck.rows, ck.paramErr
}

type checker struct {
	opt   CheckOptions
	ctx   context.Context
	rows  []CheckResult
	n     int
	c     *conn // the process the checks talk to
	init  *InitializeResult
	inst  *Instance
	steps []int
	// per seed: the start result (decoded, and as the agent wrote it) and
	// the outcomes of every branch
	starts   []*lab.SeedResult
	startRaw []json.RawMessage
	outcomes [][][]lab.BranchResult // seed, fork, branch (arm-major, 2 replicas)
	arms     []fork.Arm
	varies   bool   // the same branch asked twice gave two outcomes
	sweepID  string // told the agent in every branch, as a sweep tells its id
	paramErr error  // Params do not fit the declaration (bad input)
}

const checkReplicas = 2

func (k *checker) add(name string, st CheckStatus, format string, args ...any) {
	k.rows = append(k.rows, CheckResult{Name: name, Status: st, Detail: fmt.Sprintf(format, args...)})
}

// spawn starts a fresh agent process and initializes it, offering
// versions; its standard error goes to LogDir/agent-check-N.log.
func (k *checker) spawn(versions []string) (*conn, *InitializeResult, error) {
	k.n++
	var t *logTarget
	if k.opt.LogDir != "" {
		name := fmt.Sprintf("agent-check-%d.log", k.n)
		t = &logTarget{path: filepath.Join(k.opt.LogDir, name), shown: name, trunc: true}
	}
	c, err := start(k.opt.Command, fmt.Sprintf("agent process %d", k.n), t, false)
	if err != nil {
		return nil, nil, err
	}
	// A new process has StartupTimeout (or Timeout, if longer) to answer
	// initialize, as in a sweep.
	res, err := initialize(k.ctx, c, versions, ClientInfo{Name: "forklab agent check", Version: Version}, max(k.opt.Timeout, StartupTimeout))
	if err != nil {
		c.kill()
		return nil, nil, err
	}
	return c, res, nil
}

// ask sends one call on the current process, its reply validated exactly
// as a sweep validates it (roundTrip), and returns the call's error: a
// failure of the process (which is then replaced by a fresh one for the
// checks that follow), an error reply, or a result its decoder refused.
func (k *checker) ask(cl *call) error {
	if err := roundTrip(k.ctx, k.c, []*call{cl}, false, k.opt.Timeout); err != nil {
		k.replace()
		return err
	}
	return cl.err
}

// replace kills the current process, which failed a request, and starts
// a fresh one for the checks that follow (nil if it cannot be started:
// they then fail saying so).
func (k *checker) replace() {
	k.c.kill()
	k.c = nil
	if c, _, err := k.spawn([]string{Version}); err == nil {
		k.c = c
	}
}

// refuse sends a call the agent must refuse with one of the codes want,
// and returns what is wrong ("" when it was refused so).
func (k *checker) refuse(what string, cl *call, want ...int) string {
	if k.c == nil {
		return what + ": no agent process to ask (an earlier one failed and a fresh one would not start)"
	}
	err := k.ask(cl)
	switch {
	case err == nil:
		return fmt.Sprintf("%s was answered with a result; it must be refused with error %s", what, codes(want))
	case cl.reply == nil:
		return fmt.Sprintf("%s: %s", what, errText(err))
	case !slices.Contains(want, cl.reply.Code):
		return fmt.Sprintf("%s was refused with error %d; want %s", what, cl.reply.Code, codes(want))
	}
	return ""
}

func codes(want []int) string {
	s := make([]string, len(want))
	for i, c := range want {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, " or ")
}

// anyResult accepts whatever result a call that should have been refused
// gets.
func anyResult(json.RawMessage) error { return nil }

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
	c, res, err := k.spawn([]string{Version})
	if err != nil {
		k.add("handshake", Fail, "%s", errText(err))
		k.skipRest("")
		return
	}
	k.c, k.init = c, res
	defer func() { k.c.kill() }()
	d := k.init.World
	note := fmt.Sprintf("world %s %s: %d features, %d hidden, arms %s", d.Name, d.Version, len(d.Features), len(d.Hidden), strings.Join(d.Arms(), ","))
	if d.Nondeterministic {
		note += "; declares itself nondeterministic"
	}
	k.add("handshake", Pass, "%s", note)
	k.versions()

	params, err := d.ParseParamText(k.opt.Params)
	if err == nil {
		params, err = d.Resolve(params)
	}
	if err != nil {
		k.paramErr = err
		if !strings.HasPrefix(err.Error(), "--param") {
			k.paramErr = fmt.Errorf("--param: %w", err)
		}
		k.add("declared values", Fail, "%v", k.paramErr)
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
	if !k.declared() {
		k.skipRest("")
		return
	}
	k.repeatableStart()
	if !k.branches() {
		k.skipRest("")
		return
	}
	k.sameOutcome()
	k.freshProcess()
	k.unknownMethod()
	k.malformed()
	k.batches()
	if k.init.Capabilities.Fold {
		k.add("fold", Note, "declared; not exercised here (it needs a session on the log): try forklab fork --stream S --offset O --agent CMD")
	} else {
		k.add("fold", Skip, "not declared: forks from the session log are not available for this agent")
	}
	k.shutdown()
}

func (k *checker) versions() {
	c, _, err := k.spawn([]string{"forklab-agent/999"})
	code, isReply := replyCode(err)
	switch {
	case err == nil:
		c.kill()
		k.add("version negotiation", Fail, "offered only forklab-agent/999, the agent accepted it: it must answer error %d", CodeUnsupportedProto)
	case !isReply:
		k.add("version negotiation", Fail, "offered only forklab-agent/999, the agent failed instead of refusing: %v", errText(err))
	case code != CodeUnsupportedProto:
		k.add("version negotiation", Fail, "offered only forklab-agent/999, the agent answered error %d; want %d", code, CodeUnsupportedProto)
	default:
		k.add("version negotiation", Pass, "an unknown version is refused with %d", CodeUnsupportedProto)
	}
}

func (k *checker) plan() lab.Plan {
	return lab.Plan{ForkSteps: k.steps, Arms: k.arms, Replicas: checkReplicas}
}

func (k *checker) declared() bool {
	d := &k.init.World
	for _, seed := range k.opt.Seeds {
		res := &lab.SeedResult{}
		res.Resize(d, k.plan())
		res.Seed = seed
		cl := k.inst.startCall(seed, k.steps, res)
		if err := k.ask(cl); err != nil {
			k.add("declared values", Fail, "seed %d: %s", seed, errText(err))
			return false
		}
		k.starts = append(k.starts, res)
		k.startRaw = append(k.startRaw, cl.raw)
	}
	k.add("declared values", Pass, "%d seeds at fork steps %v: every task draw, feature and hidden value present, of its declared type", len(k.opt.Seeds), k.steps)
	return true
}

func (k *checker) repeatableStart() {
	if k.init.World.Nondeterministic {
		k.add("start is repeatable", Skip, "the agent declares itself nondeterministic")
		return
	}
	skip, err := volatileSkip(k.init.World)
	if err != nil { // Validate refused it already: not reached
		k.add("start is repeatable", Fail, "%v", err)
		return
	}
	for i, seed := range k.opt.Seeds {
		res := &lab.SeedResult{}
		res.Resize(&k.init.World, k.plan())
		cl := k.inst.startCall(seed, k.steps, res)
		if err := k.ask(cl); err != nil {
			k.add("start is repeatable", Fail, "seed %d, asked again: %s", seed, errText(err))
			return
		}
		if d := startDiff(k.startRaw[i], cl.raw, skip); d.path != "" {
			k.add("start is repeatable", Fail, "seed %d: asked twice, start's results differ at %s: %s then %s. %s", seed, d.path, clipText(d.first, 60), clipText(d.now, 60), volatileAdvice(d.path))
			return
		}
	}
	detail := "the same seed twice gives the same task, checkpoints, features and hidden truth"
	if n := len(k.init.World.Volatile); n > 0 {
		detail += fmt.Sprintf(" (%d volatile path%s ignored)", n, map[bool]string{true: "", false: "s"}[n == 1])
	}
	k.add("start is repeatable", Pass, "%s", detail)
}

// volatileSkip is the places of start's result the repeatability check
// does not compare: the declaration's volatile paths, and each fork's
// cost in seconds (wall time, which no two runs share).
func volatileSkip(d world.Declaration) (func([]world.PathStep) bool, error) {
	seconds, _ := world.ParseJSONPath("forks[*].cost.seconds")
	paths := []world.JSONPath{seconds}
	for _, v := range d.Volatile {
		p, err := world.ParseJSONPath(v)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return func(steps []world.PathStep) bool {
		for _, p := range paths {
			if p.Match(steps) {
				return true
			}
		}
		return false
	}, nil
}

// startDiff is the first place where two start results differ, outside
// the places skip names; its path is "" when they agree. Numbers are
// compared as written.
func startDiff(a, b json.RawMessage, skip func([]world.PathStep) bool) fieldDiff {
	decode := func(raw json.RawMessage) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		d.Decode(&v)
		return v
	}
	return firstDiff(nil, decode(a), decode(b), skip)
}

// volatileAdvice says what to do about a start result that differs at
// path: the pattern that would name every such place ([*] for each
// index) for the declaration's volatile, and what nondeterministic is for.
func volatileAdvice(path string) string {
	pattern := regexp.MustCompile(`\[\d+\]`).ReplaceAllString(path, "[*]")
	return fmt.Sprintf("A field that changes from run to run and means nothing (an id, a timestamp) should be left out of the checkpoint or made canonical, "+
		"or listed in the declaration's \"volatile\" (\"volatile\": [%q]), which this comparison ignores; "+
		"declare \"nondeterministic\": true only if the run's outcome varies", pattern)
}

// clipText cuts s to n bytes (on a rune boundary), marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// branchAll branches every fork of every seed on the current process.
func (k *checker) branchAll() ([][][]lab.BranchResult, error) {
	var all [][][]lab.BranchResult
	for si, res := range k.starts {
		var perFork [][]lab.BranchResult
		for _, f := range res.Forks {
			out := make([]lab.BranchResult, len(k.arms)*checkReplicas)
			cl := k.inst.branchCall(res.Seed, f.ForkStep, f.Over, f.Checkpoint, k.arms, checkReplicas, false, out, 0, k.sweepID)
			if k.c == nil {
				return nil, errors.New("no agent process to ask (an earlier one failed and a fresh one would not start)")
			}
			if err := k.ask(cl); err != nil {
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

func (k *checker) branches() bool {
	all, err := k.branchAll()
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
// branch, and words it with the declared cost fields as the protocol
// writes them.
func (k *checker) differ(a, b [][][]lab.BranchResult) string {
	for si := range a {
		for fi := range a[si] {
			for bi := range a[si][fi] {
				x, y := a[si][fi][bi], b[si][fi][bi]
				if x.Success != y.Success || !sameScore(x.Score, y.Score) || x.Cost != y.Cost || !bytes.Equal(x.Details, y.Details) {
					return fmt.Sprintf("seed %d fork step %d arm %s replica %d: %s, then %s",
						k.starts[si].Seed, k.steps[fi], k.arms[bi/checkReplicas], bi%checkReplicas, k.outcomeText(x, !bytes.Equal(x.Details, y.Details)), k.outcomeText(y, !bytes.Equal(x.Details, y.Details)))
				}
			}
		}
	}
	return ""
}

// outcomeText writes a branch's outcome as the agent reported it:
// success true, cost {"steps":3,"tokens":810}, and its details when asked.
func (k *checker) outcomeText(b lab.BranchResult, details bool) string {
	cost, _ := marshalLine(CostOf(k.init.World.Cost, b.Cost))
	s := fmt.Sprintf("success %t, cost %s", b.Success, cost)
	if b.Score != nil {
		s = fmt.Sprintf("success %t, score %s, cost %s", b.Success, fmtNum(*b.Score), cost)
	}
	if details {
		d := string(b.Details)
		if d == "" {
			d = "none"
		}
		if len(d) > 160 {
			d = d[:160] + "…"
		}
		s += ", details " + d
	}
	return s
}

// sameScore reports whether two branches' scores are the same (or both
// absent).
func sameScore(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func (k *checker) sameOutcome() {
	again, err := k.branchAll()
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
	c, res, err := k.spawn([]string{Version})
	if err != nil {
		k.add("fresh-process fork", Fail, "a second process: %s", errText(err))
		return
	}
	if d := declarationDiff(k.init, res); d.path != "" {
		c.kill()
		k.add("fresh-process fork", Fail, "a second process declared otherwise than the first: %s; every process of an agent must declare the same world, protocol version and capabilities", d)
		return
	}
	first := k.c
	k.c = c
	other, err := k.branchAll()
	k.c.kill()
	k.c = first
	if err != nil {
		k.add("fresh-process fork", Fail, "checkpoints of the first process, branched in a second: %v", err)
		return
	}
	if k.init.World.Nondeterministic || k.varies {
		k.add("fresh-process fork", Pass, "a second process declares the same and accepts the first one's checkpoints (outcomes not compared: they vary within one process already)")
		return
	}
	if diff := k.differ(k.outcomes, other); diff != "" {
		k.add("fresh-process fork", Fail, "%s (first process, then a fresh one): a checkpoint must hold everything a branch needs", diff)
		return
	}
	k.add("fresh-process fork", Pass, "checkpoints forked in a fresh process give the first process's outcomes")
}

// alive reports whether the current process still answers a start.
func (k *checker) alive() error {
	if k.c == nil {
		return errors.New("no agent process")
	}
	res := &lab.SeedResult{}
	res.Resize(&k.init.World, k.plan())
	return k.ask(k.inst.startCall(k.opt.Seeds[0], k.steps, res))
}

func (k *checker) unknownMethod() {
	cl := &call{method: "no_such_method", params: struct{}{}, decode: anyResult}
	if bad := k.refuse("no_such_method", cl, CodeMethodNotFound); bad != "" {
		k.add("unknown method", Fail, "%s", bad)
		return
	}
	if err := k.alive(); err != nil {
		k.add("unknown method", Fail, "after the error reply the agent no longer answers: %s", errText(err))
		return
	}
	k.add("unknown method", Pass, "answered with error %d and the request's id; the agent goes on", CodeMethodNotFound)
}

func (k *checker) malformed() {
	if bad := k.notJSON(); bad != "" {
		k.add("malformed input", Fail, "%s", bad)
		return
	}
	cp := k.starts[0].Forks[0].Checkpoint
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		what string
		cl   *call
		want []int
	}{
		{"start with seed \"seven\"", &call{method: MethodStart, decode: anyResult,
			params: raw(`{"seed":"seven","fork_steps":[1],"params":{},"model":{"temperature":0,"no_tool":0.5}}`)}, []int{CodeInvalidParams}},
		{"start without fork_steps", &call{method: MethodStart, decode: anyResult,
			params: raw(`{"seed":1,"params":{},"model":{"temperature":0,"no_tool":0.5}}`)}, []int{CodeInvalidParams}},
		{"branch of a checkpoint that is not one", &call{method: MethodBranch, decode: anyResult,
			params: BranchParams{Seed: 1, ForkStep: 1, Checkpoint: raw(`{"forged":true,"state":"nothing"}`),
				Branches: []BranchSpec{{Arm: fork.Off, Replica: 0, NoiseKey: NoiseKey(1, 1, fork.Off, 0, false)}}}}, []int{CodeBadCheckpoint, CodeInvalidParams}},
		{"branch with an undeclared intervention", &call{method: MethodBranch, decode: anyResult,
			params: BranchParams{Seed: k.starts[0].Seed, ForkStep: 1, Checkpoint: cp,
				Branches: []BranchSpec{{Arm: fork.On, Intervention: ptr("no_such_action_xyz"), Replica: 0, NoiseKey: NoiseKey(1, 1, fork.On, 0, false)}}}}, []int{CodeInvalidParams}},
	}
	for _, tc := range cases {
		if bad := k.refuse(tc.what, tc.cl, tc.want...); bad != "" {
			k.add("malformed input", Fail, "%s", bad)
			return
		}
		if err := k.alive(); err != nil {
			k.add("malformed input", Fail, "after refusing %s the agent no longer answers: %s", tc.what, errText(err))
			return
		}
	}
	k.add("malformed input", Pass, "%d malformed requests refused with the right codes; the agent goes on", len(cases)+1)
}

// notJSON sends a line that is not JSON: the agent must answer a parse
// error with id null and go on. It returns what is wrong, or "".
func (k *checker) notJSON() string {
	const what = "a line that is not JSON"
	if k.c == nil {
		return what + ": no agent process to ask"
	}
	line, err := k.c.call(k.ctx, []byte(`{"jsonrpc":"2.0","id":`), k.opt.Timeout, "parse error")
	if err != nil {
		k.replace()
		return fmt.Sprintf("%s: %s", what, errText(err))
	}
	r, err := decodeResponse(bytes.TrimSpace(line))
	switch {
	case err != nil:
		k.replace()
		return fmt.Sprintf("%s: %s wrote a malformed reply: %v", what, k.cName(), err)
	case r.Error == nil:
		return fmt.Sprintf("%s was answered with a result; it must be refused with error %d", what, CodeParseError)
	case r.Error.Code != CodeParseError:
		return fmt.Sprintf("%s was refused with error %d; want %d", what, r.Error.Code, CodeParseError)
	case string(r.ID) != "null":
		return fmt.Sprintf("%s was refused with id %s; want null (the request's id cannot be read)", what, r.ID)
	}
	if err := k.alive(); err != nil {
		return fmt.Sprintf("after refusing %s the agent no longer answers: %s", what, errText(err))
	}
	return ""
}

func (k *checker) cName() string {
	if k.c == nil {
		return "the agent"
	}
	return k.c.who()
}

func ptr(s string) *string { return &s }

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (k *checker) batches() {
	if k.init.Capabilities.Batch <= 1 {
		k.add("batches", Skip, "not declared: one request per line")
		return
	}
	if k.c == nil {
		k.add("batches", Fail, "no agent process to ask (an earlier one failed and a fresh one would not start)")
		return
	}
	var calls []*call
	for _, seed := range k.opt.Seeds[:min(2, len(k.opt.Seeds))] {
		res := &lab.SeedResult{}
		res.Resize(&k.init.World, k.plan())
		calls = append(calls, k.inst.startCall(seed, k.steps, res))
	}
	if err := roundTrip(k.ctx, k.c, calls, len(calls) > 1, k.opt.Timeout); err != nil {
		k.replace()
		k.add("batches", Fail, "a batch of %d starts: %s", len(calls), errText(err))
		return
	}
	for _, cl := range calls {
		if cl.err != nil {
			k.add("batches", Fail, "a batch of %d starts: %s", len(calls), errText(cl.err))
			return
		}
	}
	k.add("batches", Pass, "a batch of %d starts is answered by an array of %d responses (declared batch %d)", len(calls), len(calls), k.init.Capabilities.Batch)
}

func (k *checker) shutdown() {
	if k.c == nil {
		k.add("shutdown", Fail, "no agent process to ask (an earlier one failed and a fresh one would not start)")
		return
	}
	cl := &call{method: MethodShutdown, params: struct{}{}, decode: func(raw json.RawMessage) error {
		return ValidateJSON("shutdown.result", "result", raw)
	}}
	if err := k.ask(cl); err != nil {
		k.add("shutdown", Fail, "%s", errText(err))
		return
	}
	c := k.c
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(ShutdownGrace):
		k.add("shutdown", Fail, "answered, but had not exited %s after shutdown and the end of its stdin (forklab kills it then)", ShutdownGrace)
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
