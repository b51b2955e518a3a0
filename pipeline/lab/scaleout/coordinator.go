package scaleout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/segmentio/kafka-go"
)

// CoordinatorConfig configures the coordinator of a distributed sweep.
type CoordinatorConfig struct {
	Queue Queue
	// Out is the results directory, on storage every worker can write at
	// the same path (a network file system).
	Out string
	// Overwrite replaces a finished sweep in Out, or abandons an
	// unfinished distributed sweep of another spec there.
	Overwrite bool
	// MaxAttempts is how many attempts a unit gets before it is written
	// as error rows; default 3.
	MaxAttempts int
	// Lease is how long an attempt whose worker stopped heartbeating
	// still counts as running; default 10s.
	Lease time.Duration
	// Version is this forklab's version, recorded in the manifest; workers
	// of another version refuse the units.
	Version string
	// Progress, if set, is called with the sweep's status whenever it
	// changes, and every second.
	Progress func(Status)
	// Logf, if set, gets a line per event worth telling (picked up,
	// published, a unit redone, no worker in the group).
	Logf func(format string, args ...any)
	// NoWorkers is how long the group may have no member, while units
	// are left, before the coordinator says so and what to start
	// (again every ten times as long while it lasts); default 30s.
	NoWorkers time.Duration
}

// Status is a distributed sweep's progress as its coordinator sees it.
type Status struct {
	Sweep string
	// Units is the sweep's unit count; Done how many are finished, Poison
	// how many of those as error rows.
	Units, Done, Poison uint64
	// Seeds is the sweep's seed count (over every configuration);
	// SeedsDone those finished, counting the progress of running units.
	Seeds, SeedsDone uint64
	// ErrorPairs counts the finished units' error pairs.
	ErrorPairs int64
	// Failed counts failed attempts; Running the units being run now.
	Failed, Running int
	// LastFailure says which attempt failed last and why ("" if none).
	LastFailure string
	// Workers counts the worker processes in the workers' consumer
	// group, as the group last described itself (asked every
	// groupEvery), or running a unit; before the group's first answer,
	// those running a unit or heard from (any report: a unit started,
	// progress, done, an attempt failed) in the last 30s.
	Workers int
	// Members counts the group's members as it last described itself
	// (one per unit a worker runs at once; -1 before the first answer);
	// NoWorkersSince is since when the group has had no member and no
	// unit was running (zero while it has some, or has not answered
	// yet).
	Members        int
	NoWorkersSince time.Time
	// Retries counts the coordinator's Kafka requests that failed and
	// were retried (reads of the results topic, writes, offset look-ups:
	// a broker restarting, a network cut).
	Retries int64
	// PickedUp: this coordinator continues one that stopped.
	PickedUp bool
	// Since is when this coordinator started waiting.
	Since time.Time
}

// sweepRecord is the distributed sweep's record in the staging
// directory: what a restarted coordinator picks up, and what tells a
// worker that a unit's sweep is still the directory's.
type sweepRecord struct {
	Sweep       string     `json:"sweep"`
	Queue       string     `json:"queue"`
	Brokers     []string   `json:"brokers"`
	Spec        sweep.Spec `json:"spec"`
	Units       uint64     `json:"units"`
	MaxAttempts int        `json:"max_attempts"`
	LeaseMS     int64      `json:"lease_ms"`
	// ResultsStart is where, in each partition of the results topic, the
	// sweep's reports begin.
	ResultsStart map[int]int64 `json:"results_start"`
	// UnitsStart is where, in each partition of the units topic, the
	// sweep's unit records begin: were retention to remove records above
	// it, the unfinished units are published again.
	UnitsStart map[int]int64 `json:"units_start"`
	// Published: every unit is on the units topic.
	Published bool      `json:"published"`
	Created   time.Time `json:"created"`
}

func recordPath(stagingDir string) string {
	return filepath.Join((&sweep.Staging{Dir: stagingDir}).StateDir(sweep.DistributedState), "sweep.json")
}

func readRecord(stagingDir string) (sweepRecord, error) {
	var rec sweepRecord
	b, err := os.ReadFile(recordPath(stagingDir))
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(b, &rec)
}

func writeRecord(stagingDir string, rec sweepRecord) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	p := recordPath(stagingDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, append(b, '\n'))
}

func sameSpec(a, b sweep.Spec) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// Coordinate runs the distributed sweep of r into cfg.Out: it publishes
// the sweep's units on the queue's units topic, follows the workers'
// reports on the results topic (cfg.Progress), and when every unit is in,
// writes the configuration tables and the manifest (every file with its
// size, rows and CRC-32C, checked) and publishes the directory.
//
// The coordinator holds the output's staging lock while it runs. Stopped
// (ctx cancelled, or killed), it leaves the workers going; run again with
// the same spec and output, it picks the sweep up: the record in the
// staging directory names the sweep and where its reports begin, the
// units finished meanwhile are in the ledger and on the results topic, and
// units it had not finished publishing are published (again: a unit
// published twice is done once).
func Coordinate(ctx context.Context, r sweep.Resolved, cfg CoordinatorConfig) (sweep.Result, error) {
	var res sweep.Result
	if len(cfg.Queue.Brokers) == 0 {
		return res, errors.New("no Kafka brokers given (--brokers host:port,…)")
	}
	if len(r.Spec.MaxCost) > 0 {
		return res, errors.New("max_cost (--max-cost) is not enforced across the workers of a distributed sweep: leave it out, or run the sweep in one process")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 10 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Progress == nil {
		cfg.Progress = func(Status) {}
	}
	if cfg.NoWorkers <= 0 {
		cfg.NoWorkers = 30 * time.Second
	}
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return res, err
	}
	stDir := sweep.StagingDir(out)
	rec, recErr := readRecord(stDir)
	pickUp := recErr == nil && sameSpec(rec.Spec, r.Spec) && rec.Queue == cfg.Queue.name()
	if recErr == nil && !pickUp {
		if !cfg.Overwrite {
			return res, fmt.Errorf("output %s holds an unfinished distributed sweep (%s, on queue %s) of another spec or queue: run it again with its own spec and --queue to pick it up, or pass --overwrite to abandon it",
				cfg.Out, rec.Sweep, rec.Queue)
		}
		// Let the old sweep's running units end before clearing: their
		// workers check the sweep before each unit, not during one.
		waitQuiet(ctx, (&sweep.Staging{Dir: stDir}).StateDir(attemptsDir), time.Duration(rec.LeaseMS)*time.Millisecond)
	}
	st, err := sweep.Stage(out, cfg.Overwrite, pickUp)
	if err != nil {
		return res, err
	}
	c, err := dial(ctx, cfg.Queue)
	if err != nil {
		st.Release()
		return res, err
	}
	defer c.close()
	co := &coordinator{cfg: cfg, r: r, st: st, c: c, done: map[uint64]doneUnit{}, running: map[uint64]runningUnit{}, seen: map[string]time.Time{}}
	co.status.PickedUp = pickUp
	if pickUp {
		co.rec = rec
		cfg.Logf("picking up sweep %s: its record is in %s", rec.Sweep, stDir)
	} else {
		if err := co.start(ctx); err != nil {
			st.Release()
			return res, err
		}
	}
	res, err = co.run(ctx)
	if err != nil {
		st.Release()
		return res, err
	}
	return res, nil
}

// waitQuiet waits until no attempt under dir is live, or for lease.
func waitQuiet(ctx context.Context, dir string, lease time.Duration) {
	deadline := time.Now().Add(lease)
	for time.Now().Before(deadline) {
		live := false
		units, _ := os.ReadDir(dir)
		for _, u := range units {
			as, _ := readAttempts(dir, u.Name())
			for _, a := range as {
				live = live || a.live(lease, time.Now())
			}
		}
		if !live {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

type coordinator struct {
	cfg     CoordinatorConfig
	r       sweep.Resolved
	st      *sweep.Staging
	c       *conn
	rec     sweepRecord
	done    map[uint64]doneUnit
	running map[uint64]runningUnit
	failed  map[failedKey]bool
	seen    map[string]time.Time
	status  Status
	// group is the workers' group as it last described itself: its
	// members' worker processes.
	group map[string]bool
	// told is when the coordinator last said that no worker is there.
	told time.Time
	// readErrors counts failed reads of the results topic, retried.
	readErrors atomic.Int64
}

// groupEvery is how often the coordinator asks the group for its members.
const groupEvery = 5 * time.Second

// failedKey names a failed attempt: two workers that find the same silent
// attempt report it alike.
type failedKey struct {
	seq     uint64
	attempt int
	err     string
}

type doneUnit struct {
	seeds  uint64
	errors int64
	poison bool
}

type runningUnit struct {
	seeds  uint64
	at     time.Time
	worker string // the worker process running it
}

// process names the worker process of a member ID-k.
func process(member string) string {
	if i := strings.LastIndexByte(member, '-'); i > 0 {
		return member[:i]
	}
	return member
}

// start records a new sweep in the staging directory.
func (co *coordinator) start(ctx context.Context) error {
	starts, err := co.c.endOffsets(ctx, co.cfg.Queue.ResultsTopic())
	if err != nil {
		return fmt.Errorf("results topic %s: %w", co.cfg.Queue.ResultsTopic(), err)
	}
	units, err := co.c.endOffsets(ctx, co.cfg.Queue.UnitsTopic())
	if err != nil {
		return fmt.Errorf("units topic %s: %w", co.cfg.Queue.UnitsTopic(), err)
	}
	co.rec = sweepRecord{Sweep: newSweepID(), Queue: co.cfg.Queue.name(), Brokers: co.cfg.Queue.Brokers, Spec: co.r.Spec,
		Units: co.r.UnitCount(), MaxAttempts: co.cfg.MaxAttempts, LeaseMS: co.cfg.Lease.Milliseconds(),
		ResultsStart: starts, UnitsStart: units, Created: time.Now().UTC()}
	// The ledger's spec: workers refuse to add units of another.
	uw, err := sweep.NewUnitWriter(co.r, co.st, sweep.Options{SweepID: co.rec.Sweep})
	if err != nil {
		return err
	}
	uw.Close()
	return writeRecord(co.st.Dir, co.rec)
}

// msgSpec is the spec as unit records carry it: an external agent's
// environment stays out of Kafka (it holds API keys); workers give their
// agents their own environment.
func msgSpec(s sweep.Spec) sweep.Spec {
	if s.Agent != nil && s.Agent.Environment != nil {
		a := *s.Agent
		a.Environment = nil
		s.Agent = &a
	}
	return s
}

func newSweepID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// unitMsg is unit u's record.
func (co *coordinator) unitMsg(u sweep.Unit) UnitMsg {
	return UnitMsg{Sweep: co.rec.Sweep, Out: co.st.Out, ForklabVersion: co.cfg.Version, Spec: msgSpec(co.r.Spec),
		Seq: co.r.UnitSeq(u), Unit: u, MaxAttempts: co.rec.MaxAttempts, LeaseMS: co.rec.LeaseMS}
}

// publish puts every unfinished unit on the units topic, in batches.
func (co *coordinator) publish(ctx context.Context) error {
	if co.rec.Published {
		// Again (retention removed some of the records): from here on.
		units, err := co.c.endOffsets(ctx, co.cfg.Queue.UnitsTopic())
		if err != nil {
			return fmt.Errorf("units topic %s: %w", co.cfg.Queue.UnitsTopic(), err)
		}
		co.rec.UnitsStart = units
	}
	topic := co.cfg.Queue.UnitsTopic()
	var batch []kafka.Message
	var n uint64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := co.c.produce(ctx, batch...)
		batch = batch[:0]
		return err
	}
	var err error
	co.r.Units(func(u sweep.Unit) bool {
		if _, ok := co.done[co.r.UnitSeq(u)]; ok {
			return true
		}
		var m kafka.Message
		if m, err = co.unitMsg(u).record(topic); err != nil {
			return false
		}
		batch = append(batch, m)
		n++
		if len(batch) == 500 {
			err = flush()
		}
		return err == nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("publish units on %s: %w", topic, err)
	}
	co.rec.Published = true
	if err := writeRecord(co.st.Dir, co.rec); err != nil {
		return err
	}
	co.cfg.Logf("published %s of sweep %s on %s", plural.Count(n, "unit"), co.rec.Sweep, topic)
	return co.c.produce(ctx, Report{Kind: KindPublished, Sweep: co.rec.Sweep, Worker: "coordinator", Units: co.rec.Units}.record(co.cfg.Queue.ResultsTopic()))
}

// run publishes what is left to publish, follows the reports until every
// unit is in, and finalizes.
func (co *coordinator) run(ctx context.Context) (sweep.Result, error) {
	r := co.r
	co.failed = map[failedKey]bool{}
	co.status.Sweep, co.status.Units, co.status.Since = co.rec.Sweep, r.UnitCount(), time.Now()
	co.status.Seeds = r.Spec.Population().Len() * uint64(len(r.Configs))
	// Units finished before this coordinator started (a pick-up), as the
	// ledger has them: reports may have aged out of the topic.
	entries, err := sweep.FinishedUnits(co.st)
	if err != nil {
		return sweep.Result{}, err
	}
	for _, e := range entries {
		seq := r.UnitSeq(e.Unit)
		if u, ok := r.UnitAt(seq); ok && u == e.Unit {
			co.done[seq] = doneUnit{seeds: u.Seeds.Len(), errors: e.Errors}
		}
	}
	reports, stop, err := co.follow(ctx)
	if err != nil {
		return sweep.Result{}, err
	}
	defer stop()
	co.status.Members = -1
	members := co.watchGroup(ctx)
	if !co.rec.Published {
		if err := co.publish(ctx); err != nil {
			return sweep.Result{}, err
		}
	}
	if err := co.guardRetention(ctx); err != nil {
		if ctx.Err() != nil || co.c.watch.Err() != nil {
			return sweep.Result{}, err
		}
		co.cfg.Logf("check the units topic's retention: %v", err)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastGuard := time.Now()
	for {
		for uint64(len(co.done)) < co.status.Units {
			co.update()
			select {
			case <-ctx.Done():
				return sweep.Result{}, ctx.Err()
			case <-co.c.watch.Gone():
				return sweep.Result{}, fmt.Errorf("%w; the workers go on, and running the same command again picks the sweep up", co.c.watch.Err())
			case g := <-members:
				co.group, co.status.Members = g.workers, g.members
			case rep, ok := <-reports:
				if !ok {
					return sweep.Result{}, errors.New("the results topic readers stopped")
				}
				co.take(rep)
			case <-tick.C:
				if time.Since(lastGuard) > time.Minute {
					lastGuard = time.Now()
					if err := co.guardRetention(ctx); err != nil {
						co.cfg.Logf("check the units topic's retention: %v", err)
					}
				}
			}
		}
		co.update()
		res, err := sweep.Run(ctx, r, co.st, sweep.Options{FinalizeOnly: true, Version: co.cfg.Version, SweepID: co.rec.Sweep})
		var ue *sweep.UnitError
		if errors.As(err, &ue) {
			// A unit reported done whose files are gone or damaged
			// since: write it again.
			co.cfg.Logf("%v: publishing it again", err)
			if err := sweep.Redo(co.st, ue.Unit); err != nil {
				return res, err
			}
			delete(co.done, r.UnitSeq(ue.Unit))
			m, err := co.unitMsg(ue.Unit).record(co.cfg.Queue.UnitsTopic())
			if err == nil {
				err = co.c.produce(ctx, m)
			}
			if err != nil {
				return res, err
			}
			continue
		}
		if err != nil {
			return res, err
		}
		if err := co.c.produce(ctx, Report{Kind: KindFinalized, Sweep: co.rec.Sweep, Worker: "coordinator", Units: co.rec.Units}.record(co.cfg.Queue.ResultsTopic())); err != nil {
			co.cfg.Logf("report the sweep finalized: %v", err)
		}
		return res, nil
	}
}

// guardRetention publishes the unfinished units again if the units
// topic's retention has removed records where the sweep's begin: they may
// have been among them.
func (co *coordinator) guardRetention(ctx context.Context) error {
	firsts, err := co.c.startOffsets(ctx, co.cfg.Queue.UnitsTopic())
	if err != nil {
		return err
	}
	for p, first := range firsts {
		if first > co.rec.UnitsStart[p] {
			co.cfg.Logf("the units topic's retention removed records of partition %d from offset %d on, where this sweep's begin: publishing its unfinished units again", p, co.rec.UnitsStart[p])
			return co.publish(ctx)
		}
	}
	return nil
}

// take applies one report of the sweep.
func (co *coordinator) take(rep Report) {
	if rep.Worker != "" && rep.Worker != "coordinator" {
		co.seen[process(rep.Worker)] = time.Now()
	}
	u, ok := co.r.UnitAt(rep.Seq)
	if !ok || (rep.Kind != KindPublished && rep.Kind != KindFinalized && u != rep.Unit) {
		return
	}
	switch rep.Kind {
	case KindStarted, KindProgress:
		if _, ok := co.done[rep.Seq]; !ok {
			co.running[rep.Seq] = runningUnit{seeds: rep.Seeds, at: time.Now(), worker: process(rep.Worker)}
		}
	case KindFailed:
		if k := (failedKey{rep.Seq, rep.Attempt, rep.Error}); !co.failed[k] {
			co.failed[k] = true
			co.status.Failed++
			co.status.LastFailure = fmt.Sprintf("unit %s attempt %d (worker %s): %s", u.ID(), rep.Attempt, rep.Worker, rep.Error)
			co.cfg.Logf("unit %s: attempt %d of %d failed on worker %s: %s", u.ID(), rep.Attempt, co.rec.MaxAttempts, rep.Worker, rep.Error)
		}
		delete(co.running, rep.Seq)
	case KindDone:
		d, had := co.done[rep.Seq]
		d.seeds, d.errors = u.Seeds.Len(), rep.Errors
		d.poison = d.poison || rep.Poison
		co.done[rep.Seq] = d
		delete(co.running, rep.Seq)
		if rep.Poison && !had {
			co.cfg.Logf("unit %s written as error rows: %s", u.ID(), rep.Error)
		}
	}
}

// update recomputes the status and hands it to Progress.
func (co *coordinator) update() {
	s := &co.status
	s.Done, s.Poison, s.SeedsDone, s.ErrorPairs = uint64(len(co.done)), 0, 0, 0
	for _, d := range co.done {
		s.SeedsDone += d.seeds
		s.ErrorPairs += d.errors
		if d.poison {
			s.Poison++
		}
	}
	now := time.Now()
	s.Running = 0
	for seq, ru := range co.running {
		if now.Sub(ru.at) > time.Minute {
			delete(co.running, seq) // its worker went quiet
			continue
		}
		s.Running++
		s.SeedsDone += ru.seeds
	}
	// The workers: the group's own view once it answered; before, those
	// running a unit or heard from lately.
	workers := map[string]bool{}
	for _, ru := range co.running {
		workers[ru.worker] = true
	}
	for w, at := range co.seen {
		if now.Sub(at) < 30*time.Second {
			workers[w] = true
		} else {
			delete(co.seen, w)
		}
	}
	if s.Members >= 0 {
		// The group's view, and the workers running a unit (a member
		// is out of the group while it rejoins: a rebalance, a broker
		// restarting).
		workers = maps.Clone(co.group)
		for _, ru := range co.running {
			workers[ru.worker] = true
		}
	}
	s.Workers = len(workers)
	s.Retries = co.readErrors.Load() + co.c.retries.Load()
	switch {
	case s.Members != 0 || s.Running > 0:
		if !co.told.IsZero() {
			co.cfg.Logf("%s in group %s again", plural.Count(s.Workers, "worker"), co.cfg.Queue.Group())
		}
		s.NoWorkersSince, co.told = time.Time{}, time.Time{}
	case s.NoWorkersSince.IsZero():
		s.NoWorkersSince = now
	}
	if !s.NoWorkersSince.IsZero() && s.Done < s.Units {
		idle := now.Sub(s.NoWorkersSince)
		if idle >= co.cfg.NoWorkers && (co.told.IsZero() || now.Sub(co.told) >= 10*co.cfg.NoWorkers) {
			co.told = now
			q := co.cfg.Queue
			co.cfg.Logf("no worker has been in group %s for %s, and %d of %d units are left: start some, on machines that mount %s: forklab worker --brokers %s --queue %s",
				q.Group(), idle.Round(time.Second), s.Units-s.Done, s.Units, co.st.Out, strings.Join(q.Brokers, ","), q.name())
		}
	}
	co.cfg.Progress(*s)
}

// groupView is the workers' group as it described itself.
type groupView struct {
	members int
	workers map[string]bool
}

// watchGroup asks the workers' group for its members every groupEvery
// (kafka-go's readers name a member by its client id, the member's
// name: the worker process is its prefix) and sends each answer; a failed
// request sends nothing (the reports still count workers).
func (co *coordinator) watchGroup(ctx context.Context) <-chan groupView {
	out := make(chan groupView, 1)
	go func() {
		t := time.NewTicker(groupEvery)
		defer t.Stop()
		for {
			dctx, cancel := context.WithTimeout(ctx, groupEvery)
			res, err := co.c.client.DescribeGroups(dctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{co.cfg.Queue.Group()}})
			cancel()
			if err == nil && len(res.Groups) == 1 && res.Groups[0].Error == nil {
				g := groupView{members: len(res.Groups[0].Members), workers: map[string]bool{}}
				for _, m := range res.Groups[0].Members {
					g.workers[process(m.ClientID)] = true
				}
				select {
				case out <- g:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// follow reads every partition of the results topic from where the
// sweep's reports begin and sends the sweep's reports on the returned
// channel until stop is called.
func (co *coordinator) follow(ctx context.Context) (<-chan Report, func(), error) {
	topic := co.cfg.Queue.ResultsTopic()
	var n int
	err := co.c.again(ctx, func(ctx context.Context) (err error) {
		n, err = co.c.partitions(ctx, topic)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("results topic %s: %w", topic, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan Report, 256)
	var wg sync.WaitGroup
	for p := range n {
		rd := kafka.NewReader(kafka.ReaderConfig{Brokers: co.cfg.Queue.Brokers, Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 8 << 20, MaxWait: 500 * time.Millisecond, ReadBackoffMin: 50 * time.Millisecond, ReadBackoffMax: time.Second})
		start, ok := co.rec.ResultsStart[p]
		if !ok {
			start = kafka.FirstOffset // a partition added since
		}
		// An offset retention has removed moves up to the log start: the
		// ledger covers the units reported there.
		if err := rd.SetOffset(start); err != nil {
			cancel()
			return nil, nil, err
		}
		wg.Go(func() {
			defer rd.Close()
			delay, streak := fetchBackoffMin, 0
			for {
				m, err := rd.ReadMessage(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					// A broker restarting, a network cut: the reader
					// reconnects by itself and goes on from its offset;
					// the watch ends the coordinator if the cluster stays
					// out of reach.
					if streak++; streak == 1 {
						co.cfg.Logf("results topic %s partition %d: %v; retrying", topic, p, err)
					}
					co.readErrors.Add(1)
					select {
					case <-ctx.Done():
						return
					case <-time.After(delay):
					}
					delay = min(2*delay, fetchBackoffMax)
					continue
				}
				delay, streak = fetchBackoffMin, 0
				if string(m.Key) != co.rec.Sweep {
					continue
				}
				rep, err := decodeReport(m.Value)
				if err != nil || rep.Sweep != co.rec.Sweep {
					continue
				}
				select {
				case out <- rep:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(out) }()
	return out, func() { cancel(); wg.Wait() }, nil
}
