package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forklab/forklab/pipeline/world"
	gojson "github.com/goccy/go-json"
)

// Config says how to run an agent.
type Config struct {
	// Command starts one agent process.
	Command Command
	// Parallel is the number of agent processes (default 1).
	Parallel int
	// Timeout bounds each request: a reply must come within Timeout per
	// run or branch the request asks for (default 60s); a batch line
	// within the deadline of its largest request. An agent that misses it
	// is killed and restarted.
	Timeout time.Duration
	// Retries is how many times a failed request is sent again, to a
	// restarted process if it was the process that failed, before its
	// runs become error rows (default 2; 0 never retries).
	Retries int
	// Backoff is the pause before the first retry; it doubles with each
	// further retry, up to 30s (default 250ms).
	Backoff time.Duration
	// LogDir receives the agents' standard error, process N's in
	// agent-N.log, appended to across restarts; "" leaves it on forklab's
	// own standard error.
	LogDir string
	// Client names forklab in initialize.
	Client ClientInfo
}

// DefaultTimeout and DefaultRetries are Config's defaults.
const (
	DefaultTimeout = 60 * time.Second
	DefaultRetries = 2
)

// StartupTimeout is the least time a new process has to answer initialize
// (its Timeout if longer): interpreters and models take a while to load.
const StartupTimeout = 30 * time.Second

func (c *Config) fill() {
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.Backoff <= 0 {
		c.Backoff = 250 * time.Millisecond
	}
	if c.Client.Name == "" {
		c.Client = ClientInfo{Name: "forklab", Version: "dev"}
	}
}

// Stats count what a pool sent and what went wrong, for progress lines
// and tests.
type Stats struct {
	// Requests counts requests sent, per method, retries included.
	Requests map[string]int64
	// Retries counts requests sent again after a failure.
	Retries int64
	// Processes counts agent processes started, the first included.
	Processes int64
	// Failed counts requests that failed for good (error rows).
	Failed int64
}

// Pool is a set of long-lived agent processes answering requests. Any
// process may answer any request: the protocol requires an agent's
// answers to depend only on the request. Safe for concurrent use.
type Pool struct {
	cfg   Config
	slots chan *slot
	all   []*slot

	mu       sync.Mutex
	init     *InitializeResult
	declJSON []byte
	closed   bool

	requests  sync.Map // method -> *atomic.Int64
	retries   atomic.Int64
	processes atomic.Int64
	failed    atomic.Int64
}

// slot is one place in the pool: a process, started on demand and
// restarted after a failure.
type slot struct {
	n int
	c *conn
}

// newPool returns a pool that starts its processes on demand.
func newPool(cfg Config) *Pool {
	cfg.fill()
	p := &Pool{cfg: cfg, slots: make(chan *slot, cfg.Parallel)}
	for i := range cfg.Parallel {
		s := &slot{n: i + 1}
		p.all = append(p.all, s)
		p.slots <- s
	}
	return p
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	st := Stats{Requests: map[string]int64{}, Retries: p.retries.Load(), Processes: p.processes.Load(), Failed: p.failed.Load()}
	p.requests.Range(func(k, v any) bool {
		st.Requests[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return st
}

func (p *Pool) count(method string, n int) {
	v, _ := p.requests.LoadOrStore(method, new(atomic.Int64))
	v.(*atomic.Int64).Add(int64(n))
}

// SetLogDir sends the standard error of processes started from now on to
// dir/agent-N.log.
func (p *Pool) SetLogDir(dir string) {
	p.mu.Lock()
	p.cfg.LogDir = dir
	p.mu.Unlock()
}

// Close shuts every process down (shutdown, then EOF, then SIGKILL after
// a grace period) and refuses further requests.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var wg sync.WaitGroup
	for range p.all {
		s := <-p.slots
		if s.c != nil {
			wg.Add(1)
			go func(c *conn) { defer wg.Done(); c.close(5 * time.Second) }(s.c)
			s.c = nil
		}
	}
	wg.Wait()
	return nil
}

// call is one request of a batch handed to Pool.do, and its fate.
type call struct {
	method string
	params any
	// units is the work the request asks for (runs or branches): the
	// reply's deadline is Timeout × units (of the largest in a batch).
	units int
	// decode checks and keeps a result; its error names the offending
	// field and makes the attempt fail.
	decode func(json.RawMessage) error
	// err is the final error once do returns, nil on success.
	err      error
	attempts int
	id       int64
	// raw is the result decode accepted.
	raw json.RawMessage
}

// errRefused marks an error reply forklab will not retry.
type refusal struct{ *WireError }

// do sends calls to the pool's processes, retrying failed ones with
// backoff up to Retries times, and returns once each has succeeded or
// failed for good (its err). Calls the agent may batch go as batch lines
// on their first attempt; retries go one per line, so that one bad request
// does not fail its neighbours. It returns an error only when ctx ends.
func (p *Pool) do(ctx context.Context, calls []*call) error {
	pending := calls
	for retry := 0; len(pending) > 0; retry++ {
		if retry > 0 {
			d := p.cfg.Backoff << min(retry-1, 10)
			d = min(d, 30*time.Second)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			p.retries.Add(int64(len(pending)))
		}
		var s *slot
		select {
		case s = <-p.slots:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := p.attempt(ctx, s, pending, retry == 0)
		p.slots <- s
		if err != nil {
			return err
		}
		next := pending[:0:0]
		for _, c := range pending {
			if c.err == nil {
				continue
			}
			var r refusal
			if errors.As(c.err, &r) || c.attempts > p.cfg.Retries {
				p.failed.Add(1)
				if c.attempts > 1 {
					c.err = fmt.Errorf("%w (%d attempts)", c.err, c.attempts)
				}
				continue
			}
			next = append(next, c)
		}
		pending = next
	}
	return nil
}

// attempt sends calls once on slot s: as batch lines when batch is set
// and the agent takes batches, one per line otherwise. It returns an error
// only when ctx ended; each call's err says how it fared.
func (p *Pool) attempt(ctx context.Context, s *slot, calls []*call, batch bool) error {
	for _, c := range calls {
		c.attempts++
		c.err = nil
	}
	if err := p.ensure(ctx, s); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, c := range calls {
			c.err = err
		}
		return nil
	}
	size := 1
	if batch {
		size = max(1, p.init.Capabilities.Batch)
	}
	for lo := 0; lo < len(calls); lo += size {
		group := calls[lo:min(lo+size, len(calls))]
		if s.c == nil { // killed by an earlier group
			if err := p.ensure(ctx, s); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				for _, c := range group {
					c.err = err
				}
				continue
			}
		}
		if err := p.exchange(ctx, s, group, size > 1 && len(group) > 1); err != nil {
			return err
		}
	}
	return nil
}

// exchange sends one line (a request, or a batch when asBatch) and reads
// its reply.
func (p *Pool) exchange(ctx context.Context, s *slot, group []*call, asBatch bool) error {
	reqs := make([]request, len(group))
	units := 0
	for i, c := range group {
		c.id = s.c.id()
		reqs[i] = request{JSONRPC: "2.0", ID: c.id, Method: c.method, Params: c.params}
		// A batch line gets the deadline of its largest request: an agent
		// that takes batches says its requests are quick.
		units = max(units, c.units, 1)
		p.count(c.method, 1)
	}
	var line []byte
	var err error
	if asBatch {
		line, err = gojson.Marshal(reqs)
	} else {
		line, err = gojson.Marshal(reqs[0])
	}
	if err != nil {
		for _, c := range group {
			c.err = refusal{&WireError{Code: CodeInvalidParams, Message: "forklab could not encode the request: " + err.Error()}}
		}
		return nil
	}
	method := group[0].method
	reply, err := s.c.call(ctx, line, p.cfg.Timeout*time.Duration(units), method)
	if err != nil {
		s.c.kill()
		s.c = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.failGroup(group, err, asBatch)
		return nil
	}
	if err := p.match(s, group, reply, asBatch); err != nil {
		// The process wrote something that is not the reply: it cannot
		// be trusted with the next request.
		s.c.kill()
		s.c = nil
		p.failGroup(group, err, asBatch)
	}
	return nil
}

// failGroup records the failure of a whole line. A batch of several
// requests cannot tell which of them broke the process: its requests are
// sent again one by one without the attempt counting against them.
func (p *Pool) failGroup(group []*call, err error, asBatch bool) {
	for _, c := range group {
		if c.err != nil {
			continue
		}
		c.err = err
		if asBatch && len(group) > 1 {
			c.attempts--
		}
	}
}

// match pairs a reply line with the calls of the request line and decodes
// each result. An error means the line was not a reply to the request.
func (p *Pool) match(s *slot, group []*call, reply []byte, asBatch bool) error {
	who := s.c.name
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s wrote a malformed %s reply: %s", ErrAgent, who, group[0].method, fmt.Sprintf(format, args...))
	}
	trimmed := bytes.TrimSpace(reply)
	if len(trimmed) == 0 {
		return bad("an empty line")
	}
	byID := make(map[int64]*call, len(group))
	for _, c := range group {
		byID[c.id] = c
	}
	// The fast path: a batch reply decoded in one pass.
	if asBatch && trimmed[0] == '[' {
		var resps []response
		d := gojson.NewDecoder(bytes.NewReader(trimmed))
		d.DisallowUnknownFields()
		if d.Decode(&resps) == nil && len(resps) == len(group) && p.deliver(who, byID, resps) {
			return nil
		}
	}
	var elems []json.RawMessage
	if trimmed[0] == '[' {
		if err := gojson.Unmarshal(trimmed, &elems); err != nil {
			return bad("the line is not JSON (%v): %s", err, clip(reply))
		}
	} else {
		if !json.Valid(trimmed) {
			return bad("the line is not JSON: %s", clip(reply))
		}
		elems = []json.RawMessage{trimmed}
	}
	byID = make(map[int64]*call, len(group))
	for _, c := range group {
		byID[c.id] = c
	}
	if len(elems) == 1 && len(group) > 1 {
		// A batch refused as a whole (the agent could not read it): its
		// requests go again one by one.
		var r response
		if json.Unmarshal(elems[0], &r) == nil && r.Error != nil && string(r.ID) == "null" {
			p.failGroup(group, fmt.Errorf("%w: %s refused a batch of %d %s requests: %s", ErrAgent, who, len(group), group[0].method, r.Error.Error()), true)
			return nil
		}
	}
	if asBatch != (trimmed[0] == '[') || len(elems) != len(group) {
		if len(elems) == 1 {
			var r response
			if json.Unmarshal(elems[0], &r) == nil && r.Error != nil && string(r.ID) == "null" {
				return fmt.Errorf("%w: %s could not read the %s request: %s", ErrAgent, who, group[0].method, r.Error.Error())
			}
		}
		return bad("%d responses for %d requests: %s", len(elems), len(group), clip(reply))
	}
	for _, e := range elems {
		r, err := decodeResponse(e)
		if err != nil {
			return bad("%v", err)
		}
		var id int64
		if err := json.Unmarshal(r.ID, &id); err != nil {
			if r.Error != nil {
				return fmt.Errorf("%w: %s could not read the %s request: %s", ErrAgent, who, group[0].method, r.Error.Error())
			}
			return bad("id %s is not one of the request's", r.ID)
		}
		c, ok := byID[id]
		if !ok {
			return bad("id %d is not one of the request's", id)
		}
		delete(byID, id)
		if r.Error != nil {
			c.err = agentError(who, c.method, r.Error)
			continue
		}
		if err := c.decode(r.Result); err != nil {
			c.err = fmt.Errorf("%w: %s wrote a malformed %s reply: %v", ErrAgent, who, c.method, err)
		} else {
			c.raw = r.Result
		}
	}
	return nil
}

// deliver hands each response of a batch to its call, if every response
// has a sound envelope and an id of the batch, each once; otherwise it
// reports false and the line is examined again to word what is wrong.
func (p *Pool) deliver(who string, byID map[int64]*call, resps []response) bool {
	seen := make(map[int64]bool, len(resps))
	for i := range resps {
		r := &resps[i]
		if checkEnvelope(r) != nil {
			return false
		}
		id, err := strconv.ParseInt(string(r.ID), 10, 64)
		if err != nil || byID[id] == nil || seen[id] {
			return false
		}
		seen[id] = true
	}
	for i := range resps {
		r := &resps[i]
		id, _ := strconv.ParseInt(string(r.ID), 10, 64)
		c := byID[id]
		if r.Error != nil {
			c.err = agentError(who, c.method, r.Error)
			continue
		}
		if err := c.decode(r.Result); err != nil {
			c.err = fmt.Errorf("%w: %s wrote a malformed %s reply: %v", ErrAgent, who, c.method, err)
		} else {
			c.raw = r.Result
		}
	}
	return true
}

// agentError turns an error reply into a call's error: a refusal when it
// is not worth retrying.
func agentError(who, method string, e *WireError) error {
	err := &WireError{Code: e.Code, Message: fmt.Sprintf("%s answered %s with an error: %s", who, method, e.Message), Data: e.Data}
	if !e.Retryable() {
		return refusal{err}
	}
	return err
}

// decodeResponse checks one response object's envelope.
func decodeResponse(b []byte) (response, error) {
	var r response
	d := gojson.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		if verr := ValidateJSON("response", "the line", b); verr != nil {
			return r, verr
		}
		return r, fmt.Errorf("%v: %s", err, clip(b))
	}
	return r, checkEnvelope(&r)
}

// checkEnvelope reports a response that breaks JSON-RPC 2.0's shape.
func checkEnvelope(r *response) error {
	switch {
	case r.JSONRPC != "2.0":
		return fmt.Errorf("jsonrpc must be \"2.0\", got %q", r.JSONRPC)
	case len(r.ID) == 0:
		return errors.New("id is missing")
	case (r.Result != nil) == (r.Error != nil):
		return errors.New("a response holds exactly one of result and error")
	}
	return nil
}

// clip shortens a line for an error message.
func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// ensure starts s's process if it has none, and initializes it.
func (p *Pool) ensure(ctx context.Context, s *slot) error {
	if s.c != nil {
		return nil
	}
	p.mu.Lock()
	closed, logDir := p.closed, p.cfg.LogDir
	p.mu.Unlock()
	if closed {
		return errors.New("the agent pool is closed")
	}
	c, err := p.spawn(fmt.Sprintf("agent process %d", s.n), logDir, fmt.Sprintf("agent-%d.log", s.n))
	if err != nil {
		return err
	}
	res, err := initialize(ctx, c, p.cfg)
	if err != nil {
		c.kill()
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dj, err := json.Marshal(res.World)
	if err != nil {
		c.kill()
		return err
	}
	if p.init == nil {
		p.init, p.declJSON = res, dj
	} else if !bytes.Equal(dj, p.declJSON) || res.ProtocolVersion != p.init.ProtocolVersion || res.Capabilities != p.init.Capabilities {
		c.kill()
		return fmt.Errorf("%w: %s declared another world or capabilities than the first agent process: every process of an agent must declare the same", ErrAgent, c.name)
	}
	s.c = c
	return nil
}

// spawn starts one process with its standard error in logDir/logName (or
// forklab's own when logDir is "").
func (p *Pool) spawn(name, logDir, logName string) (*conn, error) {
	p.processes.Add(1)
	if logDir == "" {
		return start(p.cfg.Command, name, nil, "")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent log directory: %w", err)
	}
	path := filepath.Join(logDir, logName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(f, "--- forklab: %s started %s: %s\n", name, time.Now().UTC().Format(time.RFC3339), p.cfg.Command.Line)
	c, err := start(p.cfg.Command, name, f, path)
	if err == nil {
		// Errors name the log as it is found in the results directory.
		c.shown = filepath.Join(filepath.Base(logDir), logName)
	}
	return c, err
}

// initialize performs the handshake on a new process and checks the
// declaration.
func initialize(ctx context.Context, c *conn, cfg Config) (*InitializeResult, error) {
	line, err := json.Marshal(request{JSONRPC: "2.0", ID: c.id(), Method: MethodInitialize,
		Params: InitializeParams{ProtocolVersions: []string{Version}, Client: cfg.Client}})
	if err != nil {
		return nil, err
	}
	reply, err := c.call(ctx, line, max(cfg.Timeout, StartupTimeout), MethodInitialize)
	if err != nil {
		return nil, err
	}
	r, err := decodeResponse(bytes.TrimSpace(reply))
	if err != nil {
		return nil, fmt.Errorf("%w: %s wrote a malformed initialize reply: %v", ErrAgent, c.name, err)
	}
	if r.Error != nil {
		if r.Error.Code == CodeUnsupportedProto {
			return nil, fmt.Errorf("%w: %s speaks none of the protocol versions forklab offered (%s): %s", ErrAgent, c.name, Version, r.Error.Message)
		}
		return nil, fmt.Errorf("%w: %s refused initialize: %s", ErrAgent, c.name, r.Error.Error())
	}
	res, err := DecodeInitialize(r.Result)
	if err != nil {
		return nil, fmt.Errorf("%w: %s wrote a malformed initialize reply: %v", ErrAgent, c.name, err)
	}
	return res, nil
}

// DecodeInitialize checks an initialize result against its schema and the
// declaration's rules (world.Declaration.Validate), and returns it with the
// parameters' defaults in their canonical types.
func DecodeInitialize(raw json.RawMessage) (*InitializeResult, error) {
	if err := ValidateJSON("initialize.result", "result", raw); err != nil {
		return nil, err
	}
	var res InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("result: %v", err)
	}
	if err := normalizeDeclaration(&res.World); err != nil {
		return nil, fmt.Errorf("result.world: %v", err)
	}
	return &res, nil
}

// normalizeDeclaration puts parameter defaults in their canonical Go types
// and empty lists where JSON had none, then validates the declaration.
func normalizeDeclaration(d *world.Declaration) error {
	for i := range d.Params {
		v, err := d.Params[i].Parse(d.Params[i].Default)
		if err != nil {
			return fmt.Errorf("parameter %s's default: %v", d.Params[i].Name, err)
		}
		d.Params[i].Default = v
	}
	if d.Params == nil {
		d.Params = []world.Param{}
	}
	if d.Task == nil {
		d.Task = []world.Field{}
	}
	if d.Hidden == nil {
		d.Hidden = []world.Field{}
	}
	if d.Interventions == nil {
		d.Interventions = []world.Intervention{}
	}
	return d.Validate()
}
