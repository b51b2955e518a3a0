package agentproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// ServeBatch is the batch size Serve declares.
const ServeBatch = 256

// Serve answers forklab-agent/1 requests for a world of the registry, read
// from r one line at a time, on w, until shutdown or the end of r: the
// agent side of the protocol, for forklab agent serve. Sweeping a world
// through it gives the same tables, byte for byte, as sweeping it in
// process (TestServeSweepIsByteIdentical), which holds the protocol to
// everything the lab needs. Malformed requests get the protocol's error
// replies; Serve returns an error only when it cannot read or write.
func Serve(ctx context.Context, def lab.Definition, r io.Reader, w io.Writer) error {
	return ServeWith(ctx, def, r, w, ServeOptions{})
}

// ServeOptions are what Serve may add to its replies.
type ServeOptions struct {
	// Transcripts: every branch result entry carries the branch's
	// transcript (lab.Replayer), as an agent built on an SDK may send it;
	// a sweep through the server then keeps them.
	Transcripts bool
}

// ServeWith is Serve with options.
func ServeWith(ctx context.Context, def lab.Definition, r io.Reader, w io.Writer, o ServeOptions) error {
	s := &server{def: def, decl: def.Declaration(), insts: map[string]lab.Instance{}, runners: map[string]lab.Runner{}, byRaw: map[string]lab.Instance{}, opt: o}
	if err := normalizeDeclaration(&s.decl); err != nil {
		return err
	}
	defer s.close()
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		out, done := s.handleLine(line)
		bw.Write(out)
		bw.WriteByte('\n')
		if err := bw.Flush(); err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

type server struct {
	def     lab.Definition
	decl    world.Declaration
	mu      sync.Mutex
	insts   map[string]lab.Instance
	runners map[string]lab.Runner
	byRaw   map[string]lab.Instance // by a checkpoint's raw params and model
	opt     ServeOptions
}

func (s *server) close() {
	for _, i := range s.insts {
		i.Close()
	}
}

// rpcError is an error reply's error.
type rpcError struct {
	code int
	msg  string
	data any
}

func (e *rpcError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *rpcError {
	return &rpcError{code: code, msg: fmt.Sprintf(format, args...)}
}

type wireResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *wireErrorOut   `json:"error,omitempty"`
}

type wireErrorOut struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// handleLine answers one line: a request or a batch. done reports a
// shutdown.
func (s *server) handleLine(line []byte) (out []byte, done bool) {
	trimmed := bytes.TrimSpace(line)
	if !json.Valid(trimmed) {
		return s.encode(errorResponse(nil, errorf(CodeParseError, "the line is not JSON"))), false
	}
	if trimmed[0] == '[' {
		var elems []json.RawMessage
		json.Unmarshal(trimmed, &elems)
		if len(elems) == 0 {
			return s.encode(errorResponse(nil, errorf(CodeInvalidRequest, "an empty batch"))), false
		}
		if len(elems) > ServeBatch {
			return s.encode(errorResponse(nil, errorf(CodeInvalidRequest, "a batch of %d requests; this agent takes at most %d", len(elems), ServeBatch))), false
		}
		resps := make([]wireResponse, len(elems))
		for i, e := range elems {
			var d bool
			resps[i], d = s.handle(e)
			done = done || d
		}
		return s.encode(resps), done
	}
	resp, done := s.handle(trimmed)
	return s.encode(resp), done
}

func (s *server) encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorResponse(nil, errorf(CodeInternalError, "encode the reply: %v", err)))
	}
	return b
}

func errorResponse(id json.RawMessage, e *rpcError) wireResponse {
	if id == nil {
		id = json.RawMessage("null")
	}
	return wireResponse{JSONRPC: "2.0", ID: id, Error: &wireErrorOut{Code: e.code, Message: e.msg, Data: e.data}}
}

// handle answers one request object.
func (s *server) handle(raw []byte) (wireResponse, bool) {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.JSONRPC != "2.0" || req.Method == "" {
		return errorResponse(validID(req.ID), errorf(CodeInvalidRequest, "not a JSON-RPC 2.0 request: %s", describeRequestError(raw))), false
	}
	id := validID(req.ID)
	if id == nil {
		return errorResponse(nil, errorf(CodeInvalidRequest, "the request has no id (notifications are not part of forklab-agent/1)")), false
	}
	switch req.Method {
	case MethodInitialize, MethodStart, MethodBranch, MethodShutdown:
	default:
		return errorResponse(id, errorf(CodeMethodNotFound, "method %q not found (this agent answers initialize, start, branch, shutdown)", req.Method)), false
	}
	if len(req.Params) == 0 {
		req.Params = json.RawMessage("{}")
	}
	var (
		res  any
		rerr *rpcError
	)
	switch req.Method {
	case MethodInitialize:
		res, rerr = s.initialize(req.Params)
	case MethodStart:
		res, rerr = s.start(req.Params)
	case MethodBranch:
		res, rerr = s.branch(req.Params)
	case MethodShutdown:
		return wireResponse{JSONRPC: "2.0", ID: id, Result: struct{}{}}, true
	}
	if rerr != nil {
		return errorResponse(id, rerr), false
	}
	return wireResponse{JSONRPC: "2.0", ID: id, Result: res}, false
}

// badParams words a refusal of method's params: by the schema when it
// refuses them (naming the field), else by err. Params are checked by
// decoding them, so the schema is consulted only for a refusal.
func badParams(method string, raw json.RawMessage, err error) *rpcError {
	if serr := ValidateJSON(method+".params", "params", raw); serr != nil {
		return errorf(CodeInvalidParams, "%v", serr)
	}
	return errorf(CodeInvalidParams, "params: %v", err)
}

// validID returns id when it is a JSON number or string, else nil.
func validID(id json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(id)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	if t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9') {
		return t
	}
	return nil
}

func describeRequestError(raw []byte) string {
	if err := ValidateJSON("request", "", raw); err != nil {
		return err.Error()
	}
	return "jsonrpc must be \"2.0\" and method a string"
}

func (s *server) initialize(raw json.RawMessage) (any, *rpcError) {
	var p InitializeParams
	if err := json.Unmarshal(raw, &p); err != nil || p.ProtocolVersions == nil {
		return nil, badParams(MethodInitialize, raw, err)
	}
	if !slices.Contains(p.ProtocolVersions, Version) {
		e := errorf(CodeUnsupportedProto, "this agent speaks %s only; offered %v", Version, p.ProtocolVersions)
		e.data = map[string]any{"supported": []string{Version}}
		return nil, e
	}
	return InitializeResult{ProtocolVersion: Version, Agent: &AgentInfo{Name: "forklab agent serve", Version: s.decl.Version},
		World: s.decl, Capabilities: Capabilities{Batch: ServeBatch}}, nil
}

// instance returns the world opened with params and model, cached.
func (s *server) instance(params world.Params, model fork.Model) (lab.Instance, string, error) {
	key, err := json.Marshal(struct {
		P world.Params `json:"p"`
		M fork.Model   `json:"m"`
	}{params, model})
	if err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if inst, ok := s.insts[string(key)]; ok {
		return inst, string(key), nil
	}
	inst, err := s.def.Open(params, model)
	if err != nil {
		return nil, "", err
	}
	s.insts[string(key)] = inst
	return inst, string(key), nil
}

func (s *server) start(raw json.RawMessage) (any, *rpcError) {
	var in struct {
		Seed      *uint64      `json:"seed"`
		ForkSteps []int        `json:"fork_steps"`
		Params    world.Params `json:"params"`
		Model     *fork.Model  `json:"model"`
	}
	err := json.Unmarshal(raw, &in)
	if err == nil && (in.Seed == nil || *in.Seed > math.MaxInt64 || len(in.ForkSteps) == 0 || in.Params == nil || in.Model == nil) {
		err = errors.New("seed, fork_steps, params and model are required")
	}
	if err != nil {
		return nil, badParams(MethodStart, raw, err)
	}
	p := StartParams{Seed: *in.Seed, ForkSteps: in.ForkSteps, Params: in.Params, Model: *in.Model}
	if !slices.IsSorted(p.ForkSteps) || p.ForkSteps[0] < 1 || len(slices.Compact(slices.Clone(p.ForkSteps))) != len(p.ForkSteps) {
		return nil, errorf(CodeInvalidParams, "params.fork_steps must be at least 1 and ascend without repeats, got %v", p.ForkSteps)
	}
	params, err := s.decl.Resolve(p.Params)
	if err != nil {
		return nil, errorf(CodeInvalidParams, "params.params: %v", err)
	}
	if err := p.Model.Validate(); err != nil {
		return nil, errorf(CodeInvalidParams, "params.model: %v", err)
	}
	inst, key, err := s.instance(params, p.Model)
	if err != nil {
		return nil, errorf(CodeInvalidParams, "params: %v", err)
	}
	plan := lab.Plan{ForkSteps: p.ForkSteps, Arms: []fork.Arm{fork.Off}, Replicas: 1}
	rkey := fmt.Sprint(key, p.ForkSteps)
	s.mu.Lock()
	rn, ok := s.runners[rkey]
	s.mu.Unlock()
	if !ok {
		if rn, err = inst.Runner(plan); err != nil {
			return nil, errorf(CodeInvalidParams, "params: %v", err)
		}
		s.mu.Lock()
		s.runners[rkey] = rn
		s.mu.Unlock()
	}
	var out StartResult
	err = rn.Run(context.Background(), p.Seed, p.Seed+1, func(res *lab.SeedResult) error {
		if res.Err != "" {
			return errors.New(res.Err)
		}
		out.Task = ValuesOf(s.decl.Task, res.Task)
		for _, f := range res.Forks {
			if f.Err != "" {
				return errors.New(f.Err)
			}
			step, over := f.ForkStep, f.Over
			out.Forks = append(out.Forks, WireFork{ForkStep: &step, Over: &over, Checkpoint: append(json.RawMessage{}, f.Checkpoint...),
				Features: ValuesOf(s.decl.Features, f.Features), Hidden: ValuesOf(s.decl.Hidden, f.Hidden), Cost: CostOf(s.decl.Cost, f.Cost)})
		}
		return nil
	})
	if err != nil {
		return nil, errorf(CodeRunFailed, "seed %d: %v", p.Seed, err)
	}
	return out, nil
}

func (s *server) branch(raw json.RawMessage) (any, *rpcError) {
	var p BranchParams
	err := json.Unmarshal(raw, &p)
	if err == nil && (len(bytes.TrimSpace(p.Checkpoint)) == 0 || string(bytes.TrimSpace(p.Checkpoint)) == "null" || len(p.Branches) == 0) {
		err = errors.New("checkpoint and branches are required")
	}
	if err == nil {
		for _, b := range p.Branches {
			if !slices.Contains(fork.Arms, b.Arm) || len(b.NoiseKey) != 16 || b.Replica < 0 {
				err = errors.New("every branch needs an arm, a replica and a noise_key")
			}
		}
	}
	if err != nil {
		return nil, badParams(MethodBranch, raw, err)
	}
	inst, err := s.branchInstance(p.Checkpoint)
	if err != nil {
		return nil, errorf(CodeInternalError, "%v", err)
	}
	out := BranchResult{Branches: make([]WireBranch, len(p.Branches))}
	for i, b := range p.Branches {
		where := fmt.Sprintf("params.branches[%d]", i)
		if !armSupported(s.decl, b.Arm) {
			return nil, errorf(CodeInvalidParams, "%s.arm: world %s declares no intervention for arm %s (its arms: %v)", where, s.decl.Name, b.Arm, s.decl.Arms())
		}
		want, applies := (&Instance{def: &Definition{init: InitializeResult{World: s.decl}}}).interventionName(b.Arm, true)
		switch {
		case b.Intervention == nil:
			if b.Arm == fork.On || b.Arm == fork.Placebo {
				return nil, errorf(CodeInvalidParams, "%s.intervention: arm %s applies %s, got null", where, b.Arm, want)
			}
		case !applies || *b.Intervention != want:
			return nil, errorf(CodeInvalidParams, "%s.intervention: arm %s applies %s, got %q", where, b.Arm, orNone(want, applies), *b.Intervention)
		}
		fires := b.Intervention != nil
		play := inst.Branch
		if rp, ok := inst.(lab.Replayer); ok && s.opt.Transcripts {
			play = rp.Replay
		}
		o, err := play(p.Checkpoint, b.Arm, b.Replica, func([]world.Value) bool { return fires })
		if err != nil {
			if errors.Is(err, fork.ErrCheckpoint) {
				return nil, errorf(CodeBadCheckpoint, "params.checkpoint: %v", err)
			}
			return nil, errorf(CodeRunFailed, "%s: %v", where, err)
		}
		success := o.Success
		out.Branches[i] = WireBranch{Success: &success, Cost: CostOf(s.decl.Cost, o.Cost), Transcript: o.Transcript}
		out.Branches[i].Score = o.Score
	}
	return out, nil
}

// branchInstance returns the instance of a checkpoint's own configuration
// (its params and model, as the built-in worlds' checkpoints hold them),
// cached by their raw JSON, so that the world is not opened again for
// every branch. A checkpoint without them gets the defaults' instance; its
// branch then says what is wrong with it.
func (s *server) branchInstance(cp json.RawMessage) (lab.Instance, error) {
	var head struct {
		Params json.RawMessage `json:"params"`
		Model  json.RawMessage `json:"model"`
	}
	json.Unmarshal(cp, &head)
	key := string(head.Params) + "\x00" + string(head.Model)
	s.mu.Lock()
	inst, ok := s.byRaw[key]
	s.mu.Unlock()
	if ok {
		return inst, nil
	}
	var params world.Params
	var model fork.Model
	err := json.Unmarshal(head.Params, &params)
	if err == nil {
		params, err = s.decl.Resolve(params)
	}
	if err == nil {
		err = json.Unmarshal(head.Model, &model)
	}
	if err != nil || model.Validate() != nil {
		params, _ = s.decl.Resolve(nil)
		model = fork.Model{}
	}
	inst, _, err = s.instance(params, model)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.byRaw) < 1024 {
		s.byRaw[key] = inst
	}
	s.mu.Unlock()
	return inst, nil
}

func orNone(s string, ok bool) string {
	if !ok {
		return "nothing (null)"
	}
	return s
}
