package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/segmentio/kafka-go"
)

// WorkerConfig configures a worker process.
type WorkerConfig struct {
	Queue Queue
	// ID names the worker in reports and attempt records (letters,
	// digits, '.', '_', '-'); default HOST-PID.
	ID string
	// Parallel is how many units the worker runs at once, each as its own
	// member of the consumer group (ID-0, ID-1, …); default one per CPU.
	Parallel int
	// SessionTimeout is how long Kafka waits for a silent member (a
	// worker killed) before giving its partitions to the others; default
	// 10s, at least the cluster's group.min.session.timeout.ms (6s).
	SessionTimeout time.Duration
	// MaxUnits, if positive, makes the worker leave after finishing that
	// many units (tests, benchmarks).
	MaxUnits int
	// Version is this forklab's version: units published by another are
	// refused.
	Version string
	// Logf, if set, gets a line per unit and event.
	Logf func(format string, args ...any)
	// Debug logs kafka-go's errors through Logf too.
	Debug bool
	// FirstMember numbers the members ID-FirstMember, ID-FirstMember+1, …
	// (forklab worker runs each member in a process of its own).
	FirstMember int
	// OnAttempt, if set, is told where each attempt's record is when the
	// attempt starts (running) and when it ends or is withdrawn: forklab
	// worker's supervising process marks the attempt failed if the member
	// process dies meanwhile (MarkCrashed).
	OnAttempt func(path string, running bool)
	// OnDone, if set, is called for each unit the worker ran and
	// finished.
	OnDone func()
	// OpenAgent starts the external agent of a sweep whose spec has one
	// (forklab worker wires agentproc here, with its --agent command and
	// --agent-env); nil refuses such sweeps.
	OpenAgent func(ctx context.Context, a sweep.AgentSpec) (Agent, error)
	// Token is the session log's bearer token, for a sweep of the sessions
	// under a prefix of the log (sweep --runs URL).
	Token string
}

// Agent is an external agent's world as a worker runs it: a definition
// whose runners speak forklab-agent/1 to a pool of agent processes
// (agentproc.Definition).
type Agent interface {
	lab.Definition
	// SetJournal keeps the seeds the agent finished in dir, so that a
	// unit run again pays for none of them twice.
	SetJournal(dir string)
	// SetLogDir sends the agent processes' standard error to files in
	// dir.
	SetLogDir(dir string)
	Close() error
	// An Agent may also have Failing() error: the error that stopped its
	// work because it is failing (agentproc.FailFast), nil before; the
	// worker then stops once the failed attempt is recorded.
}

// WorkerStats counts what a worker did.
type WorkerStats struct {
	// Units it ran and finished; Again found finished already (a record
	// delivered twice); Poison written as error rows; Failed attempts;
	// Deferred units put back because another worker was running them.
	Units, Again, Poison, Failed, Deferred int64
	// FetchErrors counts fetches from the units topic that failed and
	// were retried (a rebalance in progress, a timeout, a broker
	// restarting).
	FetchErrors int64
	// Vanished counts attempts found running without a heartbeat for a
	// lease: their workers vanished (killed, preempted); the units were
	// run again, and those attempts did not count as failed.
	Vanished int64
}

// Worker takes units from a queue's units topic as members of its
// consumer group, runs them into their sweeps' staging directories and
// reports them on the results topic.
//
// For each unit record, in order:
//
//  1. A unit of a sweep its directory no longer holds (finished, or
//     replaced) is skipped.
//  2. A unit already finished (ledger entry, files of the recorded sizes)
//     is reported done again: the record was delivered twice.
//  3. A unit another worker is running (a live attempt) is put back at
//     the end of its partition, after a second's pause.
//  4. A unit with MaxAttempts failed attempts is written as error rows
//     (poison) and reported done.
//  5. A unit with more failed attempts than its record knew of (its last
//     worker was killed) is put back at the end of its partition with the
//     new count, so a unit that kills its workers never holds up the
//     units behind it.
//  6. A unit of an external agent's sweep whose agent this worker cannot
//     start (OpenAgent fails) gets a failed attempt, recorded and
//     reported, and goes back (or, at the limit, is written as error
//     rows); then the worker stops, its record committed, leaving its
//     partitions to workers that can start the agent.
//  7. Otherwise the worker records an attempt and runs the unit: files
//     (temporary name, fsync, rename), ledger entry, report done. A
//     failure (the world panicked or gave up) is recorded on the attempt
//     and the unit goes back to the end of its partition, or, at the
//     limit, is written as error rows.
//
// Only then is the record's offset committed: a worker killed anywhere
// before leaves the record to be delivered again, and the steps above make
// a second delivery harmless. A failure to write the output (a full disk,
// a lost mount) is not the unit's: the worker stops with the error and
// leaves the unit to the others.
type Worker struct {
	cfg WorkerConfig
	// newReader makes a member's consumer-group reader (kafka.NewReader;
	// tests give faults).
	newReader func(kafka.ReaderConfig) fetcher
	// stepHook, if set, runs after each step of a unit (tests kill the
	// process there).
	stepHook func(Step)
	conn     *conn
	drain    chan struct{}
	once     sync.Once
	done     atomic.Int64
	stats    struct {
		sync.Mutex
		WorkerStats
	}
}

var idChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// CleanID makes id a worker name: letters, digits, '.', '_' and '-', any
// other character replaced by '_'.
func CleanID(id string) string { return idChars.ReplaceAllString(id, "_") }

// NewWorker connects to the queue's cluster, creating the topics if they
// are missing.
func NewWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	cfg.ID = CleanID(cfg.ID)
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.GOMAXPROCS(0)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c, err := dial(ctx, cfg.Queue)
	if err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, conn: c, drain: make(chan struct{}),
		newReader: func(rc kafka.ReaderConfig) fetcher { return kafka.NewReader(rc) }}, nil
}

// ID is the worker's name.
func (w *Worker) ID() string { return w.cfg.ID }

// Drain makes the worker finish the units it is running, take no more,
// leave the group and return from Run.
func (w *Worker) Drain() { w.once.Do(func() { close(w.drain) }) }

// Stats returns what the worker did so far.
func (w *Worker) Stats() WorkerStats {
	w.stats.Lock()
	defer w.stats.Unlock()
	return w.stats.WorkerStats
}

func (w *Worker) count(f func(*WorkerStats)) {
	w.stats.Lock()
	f(&w.stats.WorkerStats)
	w.stats.Unlock()
}

// errFatal marks an error that stops the worker.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }
func (e errFatal) Unwrap() error { return e.err }

// errStopAfter stops the worker once the record in hand is committed: the
// unit was dealt with (reported, put back or written as error rows), but
// the worker cannot go on (it cannot start the sweep's agent).
type errStopAfter struct{ err error }

func (e errStopAfter) Error() string { return e.err.Error() }
func (e errStopAfter) Unwrap() error { return e.err }

// errAgentStart is sweepOf's error for an agent the worker could not
// start: an attempt at the unit that failed.
type errAgentStart struct{ err error }

func (e errAgentStart) Error() string { return e.err.Error() }
func (e errAgentStart) Unwrap() error { return e.err }

// Run runs the worker's members until Drain (after their current units)
// or until ctx is cancelled (abandoning their current units, which go to
// other workers), and returns the first error that stopped a member.
func (w *Worker) Run(ctx context.Context) error {
	defer w.conn.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The cluster out of reach for longer than RetryFor: stop, the
		// units in hand abandoned (their attempts withdrawn).
		select {
		case <-w.conn.watch.Gone():
			cancel()
		case <-ctx.Done():
		}
	}()
	errs := make(chan error, w.cfg.Parallel)
	var wg sync.WaitGroup
	for k := range w.cfg.Parallel {
		m := &member{w: w, id: fmt.Sprintf("%s-%d", w.cfg.ID, w.cfg.FirstMember+k), sweeps: map[string]*memberSweep{}, told: map[time.Time]bool{}}
		wg.Go(func() {
			defer m.close()
			if err := m.run(ctx); err != nil {
				errs <- err
				w.Drain() // the others finish their units and stop too
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := w.conn.watch.Err(); err != nil {
		return fmt.Errorf("worker %s: %w; its units go to other workers", w.cfg.ID, err)
	}
	return <-errs
}

// member is one consumer of the group, running one unit at a time.
type member struct {
	w      *Worker
	id     string
	sweeps map[string]*memberSweep
	// told marks the vanished attempts (by start time) already counted.
	told map[time.Time]bool
	// seeds finished in the running unit, for progress reports.
	seeds atomic.Uint64
}

// memberSweep is what a member keeps of a sweep it ran units of.
type memberSweep struct {
	r     sweep.Resolved
	st    *sweep.Staging
	uw    *sweep.UnitWriter
	agent Agent
	used  time.Time
}

func (s *memberSweep) close() {
	s.uw.Close()
	if s.r.Source != nil {
		s.r.Source.Close()
	}
	if s.agent != nil {
		s.agent.Close()
	}
}

func (m *member) close() {
	for _, s := range m.sweeps {
		s.close()
	}
}

func (m *member) logf(format string, args ...any) {
	m.w.cfg.Logf("worker %s: "+format, append([]any{m.id}, args...)...)
}

// Step names the points between the steps of a unit a member runs, in
// their order (docs/scale-out.md, "The order of a unit's steps"): the
// record fetched; the attempt recorded; the unit's files and ledger entry
// written (and the attempt marked done); the unit reported done,
// acknowledged; the record's offset committed.
type Step string

// The steps of a unit, in order.
const (
	StepFetched   Step = "fetched"
	StepAttempt   Step = "attempt"
	StepWritten   Step = "written"
	StepReported  Step = "reported"
	StepCommitted Step = "committed"
)

// attempt tells OnAttempt, if set, that the attempt recorded at path
// runs, or no longer does.
func (m *member) attempt(path string, running bool) {
	if m.w.cfg.OnAttempt != nil {
		m.w.cfg.OnAttempt(path, running)
	}
}

// step runs the worker's step hook, if any.
func (m *member) step(s Step) {
	if m.w.stepHook != nil {
		m.w.stepHook(s)
	}
}

// fetcher is what a member needs of a kafka.Reader in a consumer group
// (tests give it faults).
type fetcher interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// readerConfig is the member's consumer-group reader.
func (m *member) readerConfig() kafka.ReaderConfig {
	cfg := m.w.cfg
	rc := kafka.ReaderConfig{
		Brokers: cfg.Queue.Brokers, GroupID: cfg.Queue.Group(), Topic: cfg.Queue.UnitsTopic(),
		// The client id names the member in the group's own view
		// (DescribeGroups): the coordinator counts the workers there.
		Dialer:   &kafka.Dialer{ClientID: m.id, Timeout: 10 * time.Second, DualStack: true},
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 500 * time.Millisecond,
		// One record at a time: a member holds no units it is not
		// running, so a rebalance moves nothing it would have to drop.
		QueueCapacity: 1,
		// Commits are explicit and synchronous, after the unit is in.
		CommitInterval:         0,
		StartOffset:            kafka.FirstOffset,
		SessionTimeout:         cfg.SessionTimeout,
		HeartbeatInterval:      max(cfg.SessionTimeout/10, 300*time.Millisecond),
		RebalanceTimeout:       30 * time.Second,
		JoinGroupBackoff:       time.Second,
		ReadBackoffMin:         50 * time.Millisecond,
		ReadBackoffMax:         time.Second,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 5 * time.Second,
	}
	if cfg.Debug {
		rc.ErrorLogger = kafka.LoggerFunc(func(f string, a ...any) { m.logf("kafka: "+f, a...) })
	}
	return rc
}

// fetchBackoff bounds the pause after a failed fetch: it doubles from the
// first to the last while the failures go on.
const (
	fetchBackoffMin = 50 * time.Millisecond
	fetchBackoffMax = 5 * time.Second
)

func (m *member) run(ctx context.Context) error {
	r := m.w.newReader(m.readerConfig())
	defer func() { closeReader(r) }() // leaves the group: the partitions move at once
	fetch, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	go func() {
		select {
		case <-m.w.drain:
			stopFetch()
		case <-fetch.Done():
		}
	}()
	delay, streak := fetchBackoffMin, 0
	for {
		rec, err := r.FetchMessage(fetch)
		if err != nil {
			if fetch.Err() != nil {
				return nil
			}
			// A rebalance in progress, a fetch that timed out, a broker
			// restarting: the reader rejoins and reconnects by itself;
			// only a cluster out of reach for longer than RetryFor ends
			// the worker (Run returns the watch's error).
			m.w.count(func(st *WorkerStats) { st.FetchErrors++ })
			if streak++; streak == 1 || streak%20 == 0 {
				m.logf("fetch: %v (%d in a row; retrying)", err, streak)
			}
			if errors.Is(err, io.EOF) {
				// The reader is closed: take a new one (a new member).
				closeReader(r)
				r = m.w.newReader(m.readerConfig())
			}
			select {
			case <-fetch.Done():
				return nil
			case <-time.After(delay):
			}
			delay = min(2*delay, fetchBackoffMax)
			continue
		}
		if streak > 0 {
			m.logf("fetching again after %d errors", streak)
		}
		delay, streak = fetchBackoffMin, 0
		if err := m.handle(ctx, rec); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var stop errStopAfter
			if !errors.As(err, &stop) {
				return err
			}
			if cerr := r.CommitMessages(ctx, rec); cerr != nil {
				m.logf("commit %s[%d]@%d: %v", rec.Topic, rec.Partition, rec.Offset, cerr)
			}
			return stop.err
		}
		if err := r.CommitMessages(ctx, rec); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The group rebalanced meanwhile: the record comes again,
			// to whoever has its partition, and is found finished.
			m.logf("commit %s[%d]@%d: %v", rec.Topic, rec.Partition, rec.Offset, err)
		}
		m.step(StepCommitted)
		if cfg := m.w.cfg; cfg.MaxUnits > 0 && m.w.done.Load() >= int64(cfg.MaxUnits) {
			m.w.Drain()
		}
	}
}

// closeReader closes r, leaving the group, but waits at most 5s for it:
// with the cluster out of reach, leaving would wait for the connection's
// own timeouts (the group drops the member after its session timeout
// anyway).
func closeReader(r fetcher) {
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// sweepState says whether msg's sweep is still its directory's.
type sweepState int

const (
	// active: the staging directory's record names the sweep.
	active sweepState = iota
	// gone: the directory holds another sweep, or a finished one, or is
	// gone: the unit is skipped.
	gone
	// unsure: no record, yet neither a finished sweep (a network file
	// system's stale view, or another sweep being written there without
	// Kafka): the unit is looked at again later.
	unsure
)

// stateOf reads the state of msg's sweep from its output directory. An
// error reading the record (other than its absence) is returned: the unit
// must not be skipped on a storage hiccup.
func stateOf(msg UnitMsg) (sweepState, error) {
	stDir := sweep.StagingDir(msg.Out)
	rec, err := readRecord(stDir)
	switch {
	case err == nil && rec.Sweep == msg.Sweep:
		return active, nil
	case err == nil:
		return gone, nil
	case !errors.Is(err, fs.ErrNotExist):
		return active, fmt.Errorf("read the sweep's record in %s: %w", stDir, err)
	}
	if _, err := os.Stat(filepath.Join(msg.Out, sweep.ManifestName)); err == nil {
		return gone, nil // published (by this sweep's coordinator or over it)
	}
	_, err1 := os.Stat(stDir)
	_, err2 := os.Stat(msg.Out)
	if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
		return gone, nil // removed
	}
	return unsure, nil
}

// sweepOf returns the member's state of msg's sweep, resolving its spec
// the first time.
func (m *member) sweepOf(ctx context.Context, msg UnitMsg) (*memberSweep, error) {
	if s, ok := m.sweeps[msg.Sweep]; ok {
		s.used = time.Now()
		return s, nil
	}
	st := &sweep.Staging{Out: msg.Out, Dir: sweep.StagingDir(msg.Out)}
	var (
		r     sweep.Resolved
		agent Agent
		err   error
	)
	if a := msg.Spec.Agent; a != nil {
		if m.w.cfg.OpenAgent == nil {
			return nil, errFatal{fmt.Errorf("sweep %s runs an external agent, which this worker cannot start", msg.Sweep)}
		}
		if agent, err = m.w.cfg.OpenAgent(ctx, *a); err != nil {
			return nil, errAgentStart{err}
		}
		agent.SetJournal(st.JournalDir())
		agent.SetLogDir(filepath.Join(st.Dir, sweep.AgentLogs, m.id))
		r, err = msg.Spec.ResolveWith(agent)
	} else {
		r, err = msg.Spec.Resolve()
	}
	if err == nil && r.Spec.Runs != nil {
		// A recorded population: this worker reads it too, and finds it
		// as the coordinator listed it, or runs nothing of it.
		o := recorded.Options{Token: m.w.cfg.Token}
		if l, ok := agent.(recorded.Lister); ok {
			o.Agent = l
		}
		if c, ok := agent.(interface{ Inspects() bool }); ok {
			o.NeedFeatures = !c.Inspects()
		}
		err = r.OpenRuns(ctx, o)
	}
	if err != nil {
		if agent != nil {
			agent.Close()
		}
		return nil, errFatal{fmt.Errorf("sweep %s: this worker cannot run its spec: %w", msg.Sweep, err)}
	}
	uw, err := sweep.NewUnitWriter(r, st, sweep.Options{SweepID: msg.Sweep, Progress: func(n, _ int) { m.seeds.Add(uint64(n)) }})
	if err != nil {
		if agent != nil {
			agent.Close()
		}
		return nil, errFatal{fmt.Errorf("sweep %s: %w", msg.Sweep, err)}
	}
	// Keep the four sweeps used last.
	for len(m.sweeps) >= 4 {
		var oldest string
		for id, s := range m.sweeps {
			if oldest == "" || s.used.Before(m.sweeps[oldest].used) {
				oldest = id
			}
		}
		m.sweeps[oldest].close()
		delete(m.sweeps, oldest)
	}
	s := &memberSweep{r: r, st: st, uw: uw, agent: agent, used: time.Now()}
	m.sweeps[msg.Sweep] = s
	return s, nil
}

// handle processes one unit record; a nil return lets the record be
// committed.
func (m *member) handle(ctx context.Context, rec kafka.Message) error {
	m.step(StepFetched)
	msg, err := decodeUnit(rec.Value)
	if err != nil {
		m.logf("skipped %s[%d]@%d: %v", rec.Topic, rec.Partition, rec.Offset, err)
		return nil
	}
	if msg.ForklabVersion != m.w.cfg.Version {
		return errFatal{fmt.Errorf("sweep %s was published by forklab %s; this worker is forklab %s: run workers of the coordinator's version (their files must be the same bytes)",
			msg.Sweep, msg.ForklabVersion, m.w.cfg.Version)}
	}
	u, id := msg.Unit, msg.Unit.ID()
	state, err := stateOf(msg)
	if err != nil {
		return errFatal{fmt.Errorf("unit %s of sweep %s: %w", id, short(msg.Sweep), err)}
	}
	switch state {
	case gone:
		if s, ok := m.sweeps[msg.Sweep]; ok {
			s.close()
			delete(m.sweeps, msg.Sweep)
		}
		m.logf("unit %s of sweep %s: %s no longer holds that sweep (finished, replaced or removed): skipped", id, short(msg.Sweep), msg.Out)
		return nil
	case unsure:
		m.logf("unit %s of sweep %s: %s has no record of the sweep yet: put back", id, short(msg.Sweep), msg.Out)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		return m.putBack(ctx, msg, msg.Failures)
	}
	s, err := m.sweepOf(ctx, msg)
	var ase errAgentStart
	if errors.As(err, &ase) {
		return m.agentFailed(ctx, msg, ase.err)
	}
	if err != nil {
		return err
	}
	if got, ok := s.r.UnitAt(msg.Seq); !ok || got != u {
		m.logf("skipped unit %s of sweep %s: it is not unit %d of the spec", id, short(msg.Sweep), msg.Seq)
		return nil
	}
	report := Report{Sweep: msg.Sweep, Worker: m.id, Seq: msg.Seq, Unit: u}
	if e, ok := sweep.Finished(s.st, u, false); ok {
		r := report
		r.Kind, r.Again, r.Seeds, r.Errors, r.Bytes = KindDone, true, u.Seeds.Len(), e.Errors, entryBytes(e)
		m.w.count(func(st *WorkerStats) { st.Again++ })
		return m.mustReport(ctx, r)
	}
	adir, as, live, now, err := attemptsAt(s.st, msg)
	if err != nil {
		return err
	}
	lease := msg.Lease()
	if live {
		// Another worker has it in hand (a rebalance gave its partition
		// away mid-unit): look again later.
		m.w.count(func(st *WorkerStats) { st.Deferred++ })
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		return m.putBack(ctx, msg, msg.Failures)
	}
	failed, why := failures(as)
	for _, a := range as {
		if a.vanished(lease, now) && !m.told[a.Started] {
			m.told[a.Started] = true
			m.w.count(func(st *WorkerStats) { st.Vanished++ })
			m.logf("unit %s of sweep %s: worker %s vanished while running it (no heartbeat since %s): running it again; not a failed attempt",
				id, short(msg.Sweep), a.Worker, a.beat.UTC().Format(time.RFC3339))
		}
	}
	if failed >= msg.MaxAttempts {
		return m.poison(ctx, s, msg, report, why)
	}
	if failed > msg.Failures {
		r := report
		r.Kind, r.Attempt, r.Error = KindFailed, failed, why[len(why)-1]
		m.w.count(func(st *WorkerStats) { st.Failed++ })
		m.tryReport(r)
		m.logf("unit %s of sweep %s: attempt %d failed: %s; put back", id, short(msg.Sweep), failed, why[len(why)-1])
		return m.putBack(ctx, msg, failed)
	}
	ra, err := startAttempt(adir, id, m.id, msg.Sweep, lease)
	if err != nil {
		return errFatal{fmt.Errorf("record an attempt at unit %s in %s: %w", id, adir, err)}
	}
	m.attempt(ra.path, true)
	defer m.attempt(ra.path, false)
	m.step(StepAttempt)
	attemptNo := len(as) + 1
	r := report
	r.Kind, r.Attempt = KindStarted, attemptNo
	m.tryReport(r)
	m.seeds.Store(0)
	stopProgress := m.progress(report, attemptNo)
	start := time.Now()
	e, err := s.uw.Write(ctx, u)
	stopProgress()
	took := time.Since(start)
	switch {
	case err == nil:
		if err := ra.end(attemptDone, ""); err != nil {
			m.logf("unit %s: record the attempt's end: %v", id, err)
		}
		r := report
		r.Kind, r.Attempt, r.Seeds, r.Errors, r.Bytes, r.Seconds = KindDone, attemptNo, u.Seeds.Len(), e.Errors, entryBytes(e), took.Seconds()
		m.w.count(func(st *WorkerStats) { st.Units++ })
		m.w.done.Add(1)
		if m.w.cfg.OnDone != nil {
			m.w.cfg.OnDone()
		}
		m.logf("unit %s of sweep %s: done in %s (%s, %s)", id, short(msg.Sweep), took.Round(time.Millisecond), plural.Count(u.Seeds.Len(), "seed"), plural.Count(e.Errors, "error pair"))
		m.step(StepWritten)
		if err := m.mustReport(ctx, r); err != nil {
			return err
		}
		m.step(StepReported)
		return nil
	case ctx.Err() != nil:
		ra.withdraw()
		return ctx.Err()
	case outputError(err, s.st.Dir):
		ra.withdraw()
		if rec, rerr := readRecord(s.st.Dir); rerr != nil || rec.Sweep != msg.Sweep {
			// Another worker finished the unit too, and the coordinator
			// published the sweep under this one's feet.
			m.logf("unit %s of sweep %s: the sweep was published meanwhile: dropped", id, short(msg.Sweep))
			return nil
		}
		if e, ok := sweep.Finished(s.st, u, false); ok {
			r := report
			r.Kind, r.Again, r.Seeds, r.Errors, r.Bytes = KindDone, true, u.Seeds.Len(), e.Errors, entryBytes(e)
			m.w.count(func(st *WorkerStats) { st.Again++ })
			return m.mustReport(ctx, r)
		}
		return errFatal{fmt.Errorf("unit %s of sweep %s: cannot write %s: %w", id, short(msg.Sweep), msg.Out, err)}
	}
	reason := attemptError(u, err)
	if err := ra.end(attemptFailed, reason); err != nil {
		return errFatal{fmt.Errorf("record the failed attempt at unit %s: %w", id, err)}
	}
	m.w.count(func(st *WorkerStats) { st.Failed++ })
	why = append(why, fmt.Sprintf("attempt %d (worker %s): %s", len(why)+1, m.id, reason))
	r = report
	r.Kind, r.Attempt, r.Error, r.Seconds = KindFailed, attemptNo, reason, took.Seconds()
	m.tryReport(r)
	m.logf("unit %s of sweep %s: attempt %d failed: %s", id, short(msg.Sweep), attemptNo, reason)
	var done error
	if len(why) >= msg.MaxAttempts {
		done = m.poison(ctx, s, msg, report, why)
	} else {
		done = m.putBack(ctx, msg, len(why))
	}
	if f := agentFailing(s.agent); f != nil && done == nil {
		// Its agent failed fast (agentproc.FailFast): every unit would
		// fail here; the units are better served by other workers.
		return errStopAfter{fmt.Errorf("sweep %s: this worker's agent is failing: %w; unit %s's attempt is recorded as failed and reported, and the unit left to other workers: fix the agent (forklab agent check shows what is wrong) and start this worker again", short(msg.Sweep), f, id)}
	}
	return done
}

// agentFailing is the error that stopped agent's work because it is
// failing (agentproc.Definition.Failing), or nil.
func agentFailing(agent Agent) error {
	if f, ok := agent.(interface{ Failing() error }); ok && agent != nil {
		return f.Failing()
	}
	return nil
}

// attemptsAt reads the attempts at msg's unit recorded under st's state
// directory adir, and says whether one of them is live (another worker
// holds the unit within its lease) at now; a read error is fatal to the
// worker.
func attemptsAt(st *sweep.Staging, msg UnitMsg) (adir string, as []attempt, live bool, now time.Time, err error) {
	id := msg.Unit.ID()
	adir = st.StateDir(attemptsDir)
	if as, err = readAttempts(adir, id); err != nil {
		return adir, nil, false, now, errFatal{fmt.Errorf("read the attempts at unit %s in %s: %w", id, adir, err)}
	}
	now, lease := time.Now(), msg.Lease()
	for _, a := range as {
		live = live || a.live(lease, now)
	}
	return adir, as, live, now, nil
}

// agentFailed deals with msg's unit when this worker could not start its
// sweep's agent (a command it cannot run here, a missing interpreter, an
// agent that fails initialize): that is a failed attempt at the unit,
// recorded and reported like any other, and the unit goes back to the end
// of its partition, or, at the attempt limit, is written as error rows
// (which needs the declaration the coordinator staged, not the agent). A
// unit found finished is reported again. Then the worker stops, once the
// record is committed: every unit of the sweep would fail here, and its
// partitions are better served by other workers.
func (m *member) agentFailed(ctx context.Context, msg UnitMsg, cause error) error {
	u, id := msg.Unit, msg.Unit.ID()
	st := &sweep.Staging{Out: msg.Out, Dir: sweep.StagingDir(msg.Out)}
	reason := fmt.Sprintf("worker %s could not start the agent: %v", m.w.cfg.ID, cause)
	stop := errStopAfter{fmt.Errorf("sweep %s: cannot start its agent: %w; unit %s's attempt is recorded as failed and reported, and the unit left to other workers: fix the command (a path relative to another directory?) or give this worker --agent CMD",
		short(msg.Sweep), cause, id)}
	report := Report{Sweep: msg.Sweep, Worker: m.id, Seq: msg.Seq, Unit: u}
	if e, ok := sweep.Finished(st, u, false); ok {
		r := report
		r.Kind, r.Again, r.Seeds, r.Errors, r.Bytes = KindDone, true, u.Seeds.Len(), e.Errors, entryBytes(e)
		m.w.count(func(st *WorkerStats) { st.Again++ })
		if err := m.mustReport(ctx, r); err != nil {
			return err
		}
		return stop
	}
	adir, as, live, _, err := attemptsAt(st, msg)
	if err != nil {
		return err
	}
	lease := msg.Lease()
	if live {
		// Another worker has it in hand: leave it to that one.
		if err := m.putBack(ctx, msg, msg.Failures); err != nil {
			return err
		}
		return stop
	}
	_, why := failures(as)
	ra, err := startAttempt(adir, id, m.id, msg.Sweep, lease)
	if err == nil {
		err = ra.end(attemptFailed, reason)
	}
	if err != nil {
		return errFatal{fmt.Errorf("record the failed attempt at unit %s in %s: %w", id, adir, err)}
	}
	m.w.count(func(st *WorkerStats) { st.Failed++ })
	why = append(why, fmt.Sprintf("attempt %d (worker %s): %s", len(why)+1, m.id, reason))
	r := report
	r.Kind, r.Attempt, r.Error = KindFailed, len(as)+1, reason
	if err := m.mustReport(ctx, r); err != nil {
		return err
	}
	m.logf("unit %s of sweep %s: attempt %d failed: %s", id, short(msg.Sweep), len(as)+1, reason)
	if len(why) < msg.MaxAttempts {
		if err := m.putBack(ctx, msg, len(why)); err != nil {
			return err
		}
		return stop
	}
	rs, err := resolveUnstarted(msg)
	if err != nil {
		return errFatal{fmt.Errorf("unit %s of sweep %s: %w", id, short(msg.Sweep), err)}
	}
	if err := m.poison(ctx, &memberSweep{r: rs, st: st}, msg, report, why); err != nil {
		return err
	}
	return stop
}

// resolveUnstarted resolves msg's spec without its agent, through the
// declaration the coordinator staged beside the ledger: enough to write
// the unit's error rows.
func resolveUnstarted(msg UnitMsg) (sweep.Resolved, error) {
	_, decl, err := sweep.StagedSpec(msg.Out)
	if err != nil {
		return sweep.Resolved{}, err
	}
	r, err := msg.Spec.ResolveWith(declared{decl})
	if err != nil {
		return r, fmt.Errorf("the staged spec: %w", err)
	}
	if got, ok := r.UnitAt(msg.Seq); !ok || got != msg.Unit {
		return r, fmt.Errorf("it is not unit %d of the staged spec", msg.Seq)
	}
	return r, nil
}

// poison writes msg's unit as error rows and reports it done.
func (m *member) poison(ctx context.Context, s *memberSweep, msg UnitMsg, report Report, why []string) error {
	u := msg.Unit
	reason := poisonReason(u, why)
	e, err := writePoison(ctx, s.r, s.st, msg.Sweep, u, reason)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errFatal{fmt.Errorf("unit %s of sweep %s: write its error rows: %w", u.ID(), short(msg.Sweep), err)}
	}
	m.w.count(func(st *WorkerStats) { st.Poison++ })
	m.logf("unit %s of sweep %s: written as error rows: %s", u.ID(), short(msg.Sweep), reason)
	r := report
	r.Kind, r.Poison, r.Seeds, r.Errors, r.Bytes, r.Error = KindDone, true, u.Seeds.Len(), e.Errors, entryBytes(e), reason
	return m.mustReport(ctx, r)
}

// putBack writes msg again at the end of its partition with failures.
func (m *member) putBack(ctx context.Context, msg UnitMsg, failures int) error {
	msg.Failures = failures
	rec, err := msg.record(m.w.cfg.Queue.UnitsTopic())
	if err != nil {
		return errFatal{err}
	}
	if err := m.w.conn.produce(ctx, rec); err != nil {
		return fmt.Errorf("put unit %s back on %s: %w", msg.Unit.ID(), m.w.cfg.Queue.UnitsTopic(), err)
	}
	return nil
}

// mustReport writes r, acknowledged, before the unit's record is
// committed: a unit is never committed unreported.
func (m *member) mustReport(ctx context.Context, r Report) error {
	if err := m.w.conn.produce(ctx, r.record(m.w.cfg.Queue.ResultsTopic())); err != nil {
		return fmt.Errorf("report unit %s: %w", r.Unit.ID(), err)
	}
	return nil
}

// tryReport writes r in the background; a report lost is only progress
// not shown.
func (m *member) tryReport(r Report) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.w.conn.produce(ctx, r.record(m.w.cfg.Queue.ResultsTopic())); err != nil {
			m.logf("report %s of unit %s: %v", r.Kind, r.Unit.ID(), err)
		}
	}()
}

// progress reports the running unit's finished seeds every two seconds
// while they change, and every 20 seconds anyway (a slow agent's seed
// must not make the coordinator think the worker went quiet), until the
// returned stop is called.
func (m *member) progress(report Report, attemptNo int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		var last uint64
		sent := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if n := m.seeds.Load(); n != last || time.Since(sent) >= 20*time.Second {
					last, sent = n, time.Now()
					r := report
					r.Kind, r.Attempt, r.Seeds = KindProgress, attemptNo, n
					m.tryReport(r)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// attemptError words a failed attempt's error without the unit's name,
// which every line about it already gives.
func attemptError(u sweep.Unit, err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, fmt.Sprintf("unit %s (config %d, seeds %s): ", u.ID(), u.Config, u.Seeds))
	msg = strings.TrimPrefix(msg, fmt.Sprintf("unit config_id=%d/part-%06d.parquet: ", u.Config, u.Index))
	return msg
}

func entryBytes(e sweep.UnitEntry) int64 {
	var n int64
	for _, f := range e.Files {
		n += f.Bytes
	}
	return n
}

// outputError reports an error writing a file under dir, the staging
// directory: the storage's fault, not the unit's (an agent's broken pipe
// is the unit's).
func outputError(err error, dir string) bool {
	under := func(p string) bool {
		rel, err := filepath.Rel(dir, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	var pe *fs.PathError
	var le *os.LinkError
	return errors.As(err, &pe) && under(pe.Path) || errors.As(err, &le) && (under(le.Old) || under(le.New))
}

// short abbreviates a sweep id for log lines.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
