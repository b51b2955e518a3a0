package agentproc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
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
	// Parallel is the number of agent processes (default DefaultParallel:
	// one per CPU).
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
	// agent-N.log, appended to across restarts, capped and rotated
	// (LogMaxMB, LogBackups); "" leaves it on forklab's own standard
	// error until SetLogDir.
	LogDir string
	// HoldStderr keeps the agents' standard error off forklab's own while
	// no LogDir is set: it is held in memory (the latest HeldBytes of each
	// process) and written to the log file SetLogDir names. A sweep sets
	// it: its first process starts before the sweep knows its directory.
	HoldStderr bool
	// Client names forklab in initialize.
	Client ClientInfo
	// Warn, if set, is told (once per pool, from any goroutine) of a
	// batch line that failed as a whole — a missing response, a batch
	// refused with id null, garbage, a crash — whose requests were then
	// sent one per line: a one-line warning for people, naming what the
	// agent did and pointing at forklab agent check.
	Warn func(string)
	// FailFast, if set, stops the pool's work once the agent is failing
	// (failfast.go): every request after that fails with a *FailingError
	// saying why, and Definition.Failing returns it. nil: never.
	FailFast *FailFast
}

// DefaultParallel is Config.Parallel's default: one agent process per CPU
// (runtime.NumCPU), so that a sweep keeps the machine busy; --parallel
// and the spec's agent.parallel change it.
func DefaultParallel() int { return runtime.NumCPU() }

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
		c.Parallel = DefaultParallel()
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
	cfg Config
	all []*slot
	// idle holds a token per slot not in use; free lists those slots
	// (under freeMu). take prefers a slot whose process runs, so that a
	// process is started only when the work needs one more at once: its
	// start-up is paid once, and only when it buys parallelism.
	idle   chan struct{}
	freeMu sync.Mutex
	free   []*slot

	mu     sync.Mutex
	init   *InitializeResult
	first  string // names the process whose declaration init is
	closed bool
	// live are the processes started, by slot number, for SetLogDir.
	live map[int]*conn

	requests    sync.Map // method -> *atomic.Int64
	brk         *breaker // nil without Config.FailFast
	warnedBatch atomic.Bool
	retries     atomic.Int64
	processes   atomic.Int64
	failed      atomic.Int64
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
	p := &Pool{cfg: cfg, idle: make(chan struct{}, cfg.Parallel), brk: newBreaker(cfg.FailFast)}
	for i := range cfg.Parallel {
		s := &slot{n: i + 1}
		p.all = append(p.all, s)
		p.put(s)
	}
	return p
}

// take returns an idle slot, once the caller has received a token from
// p.idle: the one used last among those whose process runs, else the
// lowest-numbered.
func (p *Pool) take() *slot {
	p.freeMu.Lock()
	defer p.freeMu.Unlock()
	pick := -1
	for i := len(p.free) - 1; i >= 0; i-- {
		if p.free[i].c != nil {
			pick = i
			break
		}
	}
	if pick < 0 {
		for i, s := range p.free {
			if pick < 0 || s.n < p.free[pick].n {
				pick = i
			}
		}
	}
	s := p.free[pick]
	p.free = append(p.free[:pick], p.free[pick+1:]...)
	return s
}

// put makes slot s idle again.
func (p *Pool) put(s *slot) {
	p.freeMu.Lock()
	p.free = append(p.free, s)
	p.freeMu.Unlock()
	p.idle <- struct{}{}
}

// Parallel is the number of processes the pool runs.
func (p *Pool) Parallel() int { return p.cfg.Parallel }

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

// SetLogDir sends the standard error of the pool's processes to
// dir/agent-N.log: of those started from now on, and from now on of those
// running (the first process, started to learn the declaration before the
// sweep knew its directory). A running process whose file cannot be opened
// keeps writing where it did; a new one fails to start, saying why.
func (p *Pool) SetLogDir(dir string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.LogDir = dir
	for n, c := range p.live {
		c.stderr.to(logTargetIn(dir, n))
	}
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
		<-p.idle
		s := p.take()
		if s.c != nil {
			wg.Add(1)
			go func(c *conn) { defer wg.Done(); c.close() }(s.c)
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
	// gaveUp is set by decode when the result reports every run or branch
	// it asked for as failed (a branch result of error entries only): for
	// fail-fast, the attempt failed.
	gaveUp bool
	// decode checks and keeps a result; its error names the offending
	// field and makes the attempt fail.
	decode func(json.RawMessage) error
	// err is the final error once do returns, nil on success.
	err      error
	attempts int
	id       int64
	// raw is the result decode accepted.
	raw json.RawMessage
	// reply is the error reply as the agent sent it, if it sent one.
	reply *WireError
}

// refusal marks an error reply forklab will not retry.
type refusal struct{ *WireError }

// Unwrap gives the error reply, for errors.As.
func (r refusal) Unwrap() error { return r.WireError }

// replyCode returns the code of the error reply err carries, if it
// carries one (an agent's answer, as opposed to a failure of the process).
func replyCode(err error) (int, bool) {
	var we *WireError
	if errors.As(err, &we) {
		return we.Code, true
	}
	return 0, false
}

// do sends calls to the pool's processes, retrying failed ones with
// backoff up to Retries times, and returns once each has succeeded or
// failed for good (its err). Calls the agent may batch go as batch lines
// on their first attempt; retries go one per line, so that one bad request
// does not fail its neighbours. It returns an error only when ctx ends, or
// when fail-fast stopped the pool's work (a *FailingError).
func (p *Pool) do(ctx context.Context, calls []*call) error {
	p.brk.begin()
	pending := calls
	for retry := 0; len(pending) > 0; retry++ {
		if err := p.brk.failure(); err != nil {
			return err
		}
		if retry > 0 {
			d := p.cfg.Backoff << min(retry-1, 10)
			d = min(d, 30*time.Second)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-p.brk.done():
				t.Stop()
				return p.brk.failure()
			}
			p.retries.Add(int64(len(pending)))
		}
		select {
		case <-p.idle:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.brk.done():
			return p.brk.failure()
		}
		s := p.take()
		err := p.attempt(ctx, s, pending, retry == 0)
		p.put(s)
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
		c.err, c.raw, c.reply, c.gaveUp = nil, nil, nil, false
	}
	if err := p.ensure(ctx, s); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrInconsistent) {
			return err
		}
		p.brk.record(true, err) // a process that would not start
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
				if errors.Is(err, ErrInconsistent) {
					return err
				}
				p.brk.record(true, err)
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

// exchange sends one line (a request, or a batch when asBatch) on s's
// process and reads its reply; a process that fails it — it died, hung,
// or wrote a line that is not the reply or a result that breaks the
// schema — is killed, and the next attempt starts a new one.
func (p *Pool) exchange(ctx context.Context, s *slot, group []*call, asBatch bool) error {
	units := 0
	for _, c := range group {
		// A batch line gets the deadline of its largest request: an agent
		// that takes batches says its requests are quick.
		units = max(units, c.units, 1)
		p.count(c.method, 1)
	}
	if err := roundTrip(ctx, s.c, group, asBatch, p.cfg.Timeout*time.Duration(units)); err != nil {
		var refused batchRefused
		if !errors.As(err, &refused) {
			// It cannot be trusted with the next request.
			s.c.kill()
			s.c = nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.brk.record(true, err)
		if failGroup(group, err) && asBatch {
			p.batchFailed(len(group), group[0].method, err)
		}
		return nil
	}
	// The line was answered: it failed only if every request in it did.
	var cause error
	for _, c := range group {
		if c.err == nil && !c.gaveUp {
			p.brk.record(false, nil)
			return nil
		}
		if cause == nil {
			cause = c.err
			if cause == nil {
				cause = fmt.Errorf("%s reported every branch of the %s request as failed", s.c.who(), c.method)
			}
		}
	}
	p.brk.record(true, cause)
	return nil
}

// batchFailed warns, once per pool, that a batch line failed as a whole:
// its requests go again one per line, which hides a broken batch
// implementation unless someone is told.
func (p *Pool) batchFailed(n int, method string, err error) {
	if p.cfg.Warn == nil || !p.warnedBatch.CompareAndSwap(false, true) {
		return
	}
	p.cfg.Warn(fmt.Sprintf("a batch of %d %s requests failed as a whole: %s; its requests were sent again one per line (each try counts against --retries); check the agent's batches with forklab agent check %s",
		n, method, errText(err), shellQuote(p.cfg.Command.Line)))
}

// shellQuote quotes s for a shell command line: 'python3 agent.py'.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// roundTrip sends group on c as one line — a JSON-RPC batch when asBatch,
// else the one request — numbering the requests with c's next ids, waits
// up to timeout for the reply line, and matches it to the requests
// (matchReply). Every reply forklab reads, in a sweep, a fork or agent
// check, goes through here. It returns an error when the process failed:
// it exited, missed the deadline, wrote a line that is not the reply, or
// a result that breaks the schema or the declaration (the caller kills
// it). Each call's err then says how it fared: nil with its result
// decoded (raw), an error reply, a result refused, or — still nil, for
// the caller to set (failGroup) — the line failed before its response.
func roundTrip(ctx context.Context, c *conn, group []*call, asBatch bool, timeout time.Duration) error {
	reqs := make([]request, len(group))
	for i, cl := range group {
		cl.id = c.id()
		reqs[i] = request{JSONRPC: "2.0", ID: cl.id, Method: cl.method, Params: cl.params}
	}
	var line []byte
	var err error
	if asBatch {
		line, err = marshalLine(reqs)
	} else {
		line, err = marshalLine(reqs[0])
	}
	if err != nil {
		for _, cl := range group {
			cl.err = refusal{&WireError{Code: CodeInvalidParams, Message: "forklab could not encode the request: " + err.Error()}}
		}
		return nil
	}
	reply, err := c.call(ctx, line, timeout, group[0].method)
	if err != nil {
		return err
	}
	return matchReply(c, group, reply, asBatch)
}

// marshalLine encodes a request line without encoding/json's HTML
// escaping: a checkpoint or an event an agent wrote goes back to it byte
// for byte but for white space (docs/agent-protocol.md, "branch"), its
// <, >, & and U+2028/U+2029 as it wrote them.
func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// failGroup records the failure of a whole line on the calls it left
// without an answer (neither a result nor an error), and reports whether
// there were any. Each such call has had an attempt: a batch's requests
// are sent again one per line, so that one bad request does not fail its
// neighbours, each try counted against Retries.
func failGroup(group []*call, err error) bool {
	left := false
	for _, c := range group {
		if c.err != nil || c.raw != nil {
			continue
		}
		c.err = err
		left = true
	}
	return left
}

// batchRefused is a batch line the agent answered with one error
// response, id null: it could not read it, and goes on serving.
type batchRefused struct{ error }

func (b batchRefused) Unwrap() error { return b.error }

// matchReply pairs a reply line of process c with the calls of the
// request line and decodes each result: every response's envelope
// checked, its id one of the request's (each once), its result decoded by
// its call's decoder. An error means the process failed the request: the
// line was not a reply to it, or a result broke the schema or the
// declaration (that call's err says so; the others keep their answers).
func matchReply(c *conn, group []*call, reply []byte, asBatch bool) error {
	who := c.who()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s wrote a malformed %s reply: %s%s", ErrAgent, who, group[0].method, fmt.Sprintf(format, args...), c.logHint())
	}
	malformed := func(cl *call, err error) error {
		return fmt.Errorf("%w: %s wrote a malformed %s reply: %w%s", ErrAgent, who, cl.method, err, c.logHint())
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
		if d.Decode(&resps) == nil && len(resps) == len(group) {
			if ok, err := deliver(who, byID, resps, malformed); ok {
				return err
			}
		}
	}
	var elems []json.RawMessage
	if trimmed[0] == '[' {
		if err := gojson.Unmarshal(trimmed, &elems); err != nil {
			return bad("%v", notJSON(trimmed))
		}
	} else {
		elems = []json.RawMessage{trimmed}
	}
	if len(elems) == 1 && len(group) > 1 {
		// A batch refused as a whole (the agent could not read it): its
		// requests go again one by one.
		var r response
		if json.Unmarshal(elems[0], &r) == nil && r.Error != nil && string(r.ID) == "null" {
			return batchRefused{fmt.Errorf("%w: %s refused a batch of %d %s requests (one error response, id null): %s", ErrAgent, who, len(group), group[0].method, r.Error.Error())}
		}
	}
	if asBatch != (trimmed[0] == '[') || len(elems) != len(group) {
		if len(elems) == 1 {
			r, err := decodeResponse(elems[0])
			if err != nil {
				return bad("%v", err)
			}
			if r.Error != nil && string(r.ID) == "null" {
				return fmt.Errorf("%w: %s could not read the %s request: %s%s", ErrAgent, who, group[0].method, r.Error.Error(), c.logHint())
			}
		}
		return bad("%d responses for %d requests: %s", len(elems), len(group), clip(reply))
	}
	var first error
	for _, e := range elems {
		r, err := decodeResponse(e)
		if err != nil {
			return bad("%v", err)
		}
		var id int64
		if err := json.Unmarshal(r.ID, &id); err != nil {
			if r.Error != nil && string(r.ID) == "null" {
				return fmt.Errorf("%w: %s could not read the %s request: %s%s", ErrAgent, who, group[0].method, r.Error.Error(), c.logHint())
			}
			return bad("id %s is not one of the request's (%s)", r.ID, expectedIDs(byID))
		}
		cl, ok := byID[id]
		if !ok {
			return bad("id %d is not one of the request's (%s)", id, expectedIDs(byID))
		}
		delete(byID, id)
		if r.Error != nil {
			cl.err, cl.reply = agentError(who, cl.method, r.Error), r.Error
			continue
		}
		if err := cl.decode(r.Result); err != nil {
			cl.err = malformed(cl, err)
			first = cmp.Or(first, cl.err)
		} else {
			cl.raw = r.Result
		}
	}
	return first
}

// expectedIDs words the ids a reply may still carry: "expected id 7",
// "expected one of ids 7, 9", or "expected one of ids 2 to 65" for a
// batch of consecutive ids.
func expectedIDs(byID map[int64]*call) string {
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	switch n := len(ids); {
	case n == 0:
		return "every id of the request was answered already"
	case n == 1:
		return fmt.Sprintf("expected id %d", ids[0])
	case ids[n-1]-ids[0] == int64(n-1) && n > 2:
		return fmt.Sprintf("expected one of ids %d to %d", ids[0], ids[n-1])
	}
	text := make([]string, 0, 6)
	for i, id := range ids {
		if i == 5 {
			text = append(text, "…")
			break
		}
		text = append(text, strconv.FormatInt(id, 10))
	}
	return "expected one of ids " + strings.Join(text, ", ")
}

// deliver hands each response of a batch to its call, if every response
// has a sound envelope and an id of the batch, each once; otherwise it
// reports false and the line is examined again to word what is wrong.
// Its error is the first result a decoder refused (malformed words it),
// as matchReply's.
func deliver(who string, byID map[int64]*call, resps []response, malformed func(*call, error) error) (bool, error) {
	seen := make(map[int64]bool, len(resps))
	for i := range resps {
		r := &resps[i]
		if checkEnvelope(r) != nil {
			return false, nil
		}
		id, err := strconv.ParseInt(string(r.ID), 10, 64)
		if err != nil || byID[id] == nil || seen[id] {
			return false, nil
		}
		seen[id] = true
	}
	var first error
	for i := range resps {
		r := &resps[i]
		id, _ := strconv.ParseInt(string(r.ID), 10, 64)
		c := byID[id]
		if r.Error != nil {
			c.err, c.reply = agentError(who, c.method, r.Error), r.Error
			continue
		}
		if err := c.decode(r.Result); err != nil {
			c.err = malformed(c, err)
			first = cmp.Or(first, c.err)
		} else {
			c.raw = r.Result
		}
	}
	return true, first
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

// decodeResponse checks one response object's envelope. A line that is
// not JSON, a notification or a request where a reply was expected are
// told apart, quoting (a prefix of) the line.
func decodeResponse(b []byte) (response, error) {
	var r response
	d := gojson.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		if !json.Valid(b) {
			return r, notJSON(b)
		}
		var probe struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if json.Unmarshal(b, &probe) == nil && probe.Method != nil {
			if probe.ID == nil {
				return r, fmt.Errorf("a notification (no id) where a reply was expected: %s; forklab-agent/1 has no notifications: write logs to stderr", clip(b))
			}
			return r, fmt.Errorf("a request (method %q) where a reply was expected: %s; an agent only answers", *probe.Method, clip(b))
		}
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
	case r.JSONRPC == nil:
		return errors.New(`the key "jsonrpc" is missing: every reply carries "jsonrpc":"2.0"`)
	case *r.JSONRPC != "2.0":
		return fmt.Errorf("jsonrpc must be \"2.0\", got %q", *r.JSONRPC)
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

// ErrInconsistent marks an agent whose processes declared different
// worlds, protocol versions or capabilities: its answers cannot be put in
// one table, so the sweep stops (docs/agent-protocol.md, "initialize").
var ErrInconsistent = errors.New("the agent's processes disagree")

// ensure starts s's process if it has none, and initializes it. A process
// whose declaration differs from the first process's is killed and the
// error, ErrInconsistent, names the first field that differs.
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
	c, err := p.spawn(s.n, logDir)
	if err != nil {
		return err
	}
	p.count(MethodInitialize, 1)
	res, err := initialize(ctx, c, []string{Version}, p.cfg.Client, max(p.cfg.Timeout, StartupTimeout))
	if err != nil {
		c.kill()
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil {
		p.live = map[int]*conn{}
	}
	if p.init == nil {
		p.init, p.first = res, c.who()
	} else if diff := declarationDiff(p.init, res); diff.path != "" {
		c.kill()
		return fmt.Errorf("%w: %s declared otherwise than %s: %s; every process of an agent must declare the same world, protocol version and capabilities", ErrInconsistent, c.who(), p.first, diff)
	}
	if p.cfg.LogDir != logDir && p.cfg.LogDir != "" { // SetLogDir came meanwhile
		c.stderr.to(logTargetIn(p.cfg.LogDir, s.n))
	}
	s.c = c
	p.live[s.n] = c
	return nil
}

// spawn starts process n of the pool, its standard error in
// logDir/agent-N.log (or forklab's own when logDir is "").
func (p *Pool) spawn(n int, logDir string) (*conn, error) {
	p.processes.Add(1)
	var t *logTarget
	if logDir != "" {
		lt := logTargetIn(logDir, n)
		t = &lt
	}
	return start(p.cfg.Command, fmt.Sprintf("agent process %d", n), t, p.cfg.HoldStderr)
}

// logTargetIn is process n's log file in dir, appended to across restarts;
// messages name it as found in the results directory (agent-logs/agent-N.log).
func logTargetIn(dir string, n int) logTarget {
	name := fmt.Sprintf("agent-%d.log", n)
	return logTarget{path: filepath.Join(dir, name), shown: filepath.Join(filepath.Base(dir), name)}
}

// initialize performs the handshake on a new process, offering versions,
// and checks the declaration. An error reply's code is in the error
// (replyCode).
func initialize(ctx context.Context, c *conn, versions []string, client ClientInfo, timeout time.Duration) (*InitializeResult, error) {
	var res *InitializeResult
	cl := &call{method: MethodInitialize, units: 1, params: InitializeParams{ProtocolVersions: versions, Client: client},
		decode: func(raw json.RawMessage) error {
			var err error
			res, err = DecodeInitialize(raw)
			return err
		}}
	if err := roundTrip(ctx, c, []*call{cl}, false, timeout); err != nil {
		if cl.err == nil && ctx.Err() == nil { // not a declaration refused
			err = startFailure{err}
		}
		return nil, err
	}
	if e := cl.reply; e != nil {
		if e.Code == CodeUnsupportedProto {
			return nil, fmt.Errorf("%w: %s speaks none of the protocol versions forklab offered (%s): %w", ErrAgent, c.who(), strings.Join(versions, ", "), e)
		}
		return nil, startFailure{fmt.Errorf("%w: %s refused initialize: %w", ErrAgent, c.who(), e)}
	}
	if cl.err != nil {
		return nil, cl.err
	}
	return res, nil
}

// startFailure is a process that failed initialize — it exited, hung,
// wrote something that is not the reply, or answered with an error other
// than -32002 — as opposed to one whose declaration was refused.
type startFailure struct{ error }

func (s startFailure) Unwrap() error { return s.error }

// fieldDiff is the first field in which two declarations differ: its path
// ("world.version") and its value in each, as JSON.
type fieldDiff struct{ path, first, now string }

// String words the difference, the first process's value first:
// `world.version: "1" vs "1.1"`.
func (d fieldDiff) String() string { return fmt.Sprintf("%s: %s vs %s", d.path, d.first, d.now) }

// declarationDiff compares what two processes declared in initialize —
// the protocol version, the world and the capabilities — and returns the
// first field that differs; its path is "" when they agree.
func declarationDiff(first, now *InitializeResult) fieldDiff {
	generic := func(r *InitializeResult) any {
		b, _ := json.Marshal(struct {
			ProtocolVersion string            `json:"protocol_version"`
			World           world.Declaration `json:"world"`
			Capabilities    Capabilities      `json:"capabilities"`
		}{r.ProtocolVersion, r.World, r.Capabilities})
		var v any
		json.Unmarshal(b, &v)
		return v
	}
	return firstDiff(nil, generic(first), generic(now), nil)
}

// firstDiff walks two decoded JSON values in step from the place steps
// names and returns the first place where they differ (maps by sorted key,
// arrays by index), its path written as forklab writes paths
// (world.PathText: forks[0].checkpoint.ts). skip, if not nil, names
// places not compared, whatever they hold.
func firstDiff(steps []world.PathStep, a, b any, skip func([]world.PathStep) bool) fieldDiff {
	if skip != nil && len(steps) > 0 && skip(steps) {
		return fieldDiff{}
	}
	show := func(v any) string {
		b, _ := marshalLine(v) // the agent's text as it wrote it: no \u003c for <
		return string(b)
	}
	at := func(s world.PathStep) []world.PathStep { return append(steps[:len(steps):len(steps)], s) }
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			av, aok := x[k]
			bv, bok := y[k]
			here := at(world.PathStep{Key: k})
			switch {
			case !aok || !bok:
				if skip != nil && skip(here) {
					continue
				}
				if !aok {
					return fieldDiff{world.PathText(here), "nothing", show(bv)}
				}
				return fieldDiff{world.PathText(here), show(av), "nothing"}
			}
			if d := firstDiff(here, av, bv, skip); d.path != "" {
				return d
			}
		}
		return fieldDiff{}
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		for i := range min(len(x), len(y)) {
			if d := firstDiff(at(world.PathStep{IsIndex: true, Index: i}), x[i], y[i], skip); d.path != "" {
				return d
			}
		}
		if len(x) != len(y) {
			return fieldDiff{world.PathText(steps), fmt.Sprintf("%d entries", len(x)), fmt.Sprintf("%d entries", len(y))}
		}
		return fieldDiff{}
	}
	if sa, sb := show(a), show(b); sa != sb {
		return fieldDiff{world.PathText(steps), sa, sb}
	}
	return fieldDiff{}
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

// notJSON words why a line that json.Valid refused is not JSON, quoting
// it. A NaN or an Infinity — what Python's json.dumps and other encoders
// write for a float that is not finite — is named with where it stands:
// `result.forks[0].features.rate is NaN, which JSON does not allow: write
// null or a string`.
func notJSON(b []byte) error {
	if path, tok := nonFinite(b); tok != "" {
		if path == "" {
			path = "the line"
		}
		return fmt.Errorf("the line is not JSON: %s", nonFiniteText(path, tok))
	}
	return fmt.Errorf("the line is not JSON: %s", clip(b))
}

// nonFiniteText words a NaN or Infinity found at path. A branch's score
// is never null: it is said so there.
func nonFiniteText(path, tok string) string {
	if strings.HasSuffix(path, ".score") {
		return fmt.Sprintf("%s is %s, which JSON does not allow: a score is a finite number within the declared range", path, tok)
	}
	return fmt.Sprintf("%s is %s, which JSON does not allow: write null or a string (a nullable field takes null)", path, tok)
}

// nonFinite finds the first bare NaN, Infinity or -Infinity outside the
// strings of b and returns its path below b's top ("forks[0].features.rate",
// "[1].result", "" for the top itself) and the token; token "" when there
// is none.
func nonFinite(b []byte) (path, token string) {
	type frame struct {
		obj bool
		key string
		idx int
	}
	var stack []frame
	inKey := false // the next string of the object on top is a key
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if inKey && len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].key = string(b[i+1 : min(j, len(b))])
				inKey = false
			}
			i = j
		case '{':
			stack = append(stack, frame{obj: true})
			inKey = true
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].obj {
					inKey = true
				} else {
					stack[n-1].idx++
				}
			}
		case 'N', 'I', '-':
			for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
				if bytes.HasPrefix(b[i:], []byte(tok)) {
					var p strings.Builder
					for _, f := range stack {
						if f.obj {
							if p.Len() > 0 {
								p.WriteByte('.')
							}
							p.WriteString(f.key)
						} else {
							fmt.Fprintf(&p, "[%d]", f.idx)
						}
					}
					return p.String(), tok
				}
			}
		}
	}
	return "", ""
}
