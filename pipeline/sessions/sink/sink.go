// Package sink copies the session log's events into Parquet continuously,
// exactly once: a Kafka-Connect-style sink that reads the data topic by
// partition and offset and resumes where it stopped.
//
// # Output
//
// Under OUT/sink/ the events are Hive-partitioned by the UTC date of the
// record that holds them (the Kafka timestamp), one file per date per
// batch of records:
//
//	OUT/sink/event_date=2025-06-01/forklab.streams+0+0000000000001200+0000000000001799.parquet
//	OUT/sink/_state/forklab.streams+0.json
//
// A batch is a range of Kafka offsets [first, last] of one partition; every
// record in it has been read, and each of its events is in the file of its
// date named topic+partition+first+last. The columns are the events table's
// (schemas.SessionEvent, built by agent.EventFold.Row as forklab log export
// builds them), with generation, kafka_partition, kafka_offset and
// appended_at filled in.
//
// # Exactly once
//
// The sink's progress is a state file per partition in OUT/sink/_state: the
// offset after the last committed batch, and everything the rows of the next
// batch depend on — the partition's streams as kafkalog.Replay folds them
// (generations, record numbers, forks' inherited records, message counts,
// so indexes continue) and each selected stream's agent.EventFold. A batch
// is committed in this order:
//
//  1. each of its files is written under a temporary name, fsynced, and
//     renamed into place; the date directories are fsynced;
//  2. the state, advanced past the batch, is written the same way
//     (temporary file, fsync, rename, fsync of _state).
//
// A crash before step 2 leaves the old state: the restarted sink reads the
// same records again from the same state, so it makes the same rows and the
// same files, byte for byte. Where the crash came after some renames, the
// files themselves say where the batch ended (their names start at the
// committed offset), and the sink closes the batch at that offset again
// whatever its rotation settings or the time: so a rewritten file is the
// same file, and no event is in two files. A crash after step 2 leaves
// nothing to redo. A file that exists already is compared with the new one
// and kept; a difference (which only retention racing a crash can cause)
// is reported, never overwritten.
//
// The state is a file beside the output, not a Kafka consumer group,
// because it is more than an offset: the offset and the streams' fold must
// change together, in one atomic rename, or a restart would number events
// from a state that does not match its offset. It moves with the directory,
// needs no group coordinator, and two sinks cannot share a directory (a
// lock file).
//
// # Gaps
//
// Records retention removed before the sink read them cannot be copied. The
// sink reports each such gap with its size — Kafka offsets and records of a
// partition, and per stream the records or inherited events that are
// missing — on its log and in the state file, and goes on from the first
// record Kafka still holds. It never skips silently.
package sink

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/forklab/forklab/internal/dirlock"
	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/stream/kafkalog"
)

// Dir is the folder under the output directory the sink writes into.
const Dir = "sink"

// StateDir is the folder of the state files under Dir.
const StateDir = "_state"

// LockName is the lock file a running sink holds in OUT/sink.
const LockName = ".lock"

// Config configures a sink run.
type Config struct {
	// Brokers are the Kafka bootstrap addresses of the log's cluster
	// (forklab log serve --kafka-port, or the cluster of --brokers).
	Brokers []string
	// Topic is the log's data topic; default "forklab.streams".
	Topic string
	// Out is the output directory; files go to Out/sink/.
	Out string
	// Prefix selects the streams whose names start with it; "" selects
	// all. A sink directory keeps the prefix it was first run with.
	Prefix string
	// Follow keeps reading (long polls) after the end of the log until ctx
	// ends; without it the run stops at the end as of its start.
	Follow bool
	// RotateRecords closes a batch once it holds this many events;
	// default 10,000. It bounds the sink's memory.
	RotateRecords int
	// RotateInterval closes a batch this long after its first record was
	// read, even if it is not full (with Follow); default 1 minute.
	RotateInterval time.Duration
	// FetchBytes bounds one fetch from Kafka; default 128 KiB. kafka-go
	// decodes a fetch whole, each record batch into pages of 64 KiB of its
	// own, so with the small batches of a lightly loaded log this bounds
	// the sink's memory more than the bytes themselves do.
	FetchBytes int
	// CacheBytes bounds the record values kept for forks, which copy their
	// source's events; older ones are fetched from Kafka. Default 32 MiB.
	CacheBytes int64
	// RetryFor is how long a partition keeps retrying a Kafka it cannot
	// read (a broker restarting, a network cut), starting again from its
	// last commit with backoff, before the run fails (with Follow too: a
	// sink that follows the log rides out outages shorter than this);
	// default kafkadial.DefaultRetryFor (--retry-for).
	RetryFor time.Duration
	// DialTimeout bounds how long a run without Follow tries to reach
	// Kafka and find its topic before it fails; default
	// kafkadial.DefaultTimeout (--dial-timeout). With Follow it waits for
	// a topic the cluster does not have yet until ctx ends, and for a
	// cluster it cannot reach for RetryFor.
	DialTimeout time.Duration
	// Logf reports files written, gaps and retries; nil discards.
	Logf func(format string, args ...any)

	// testHook, when set, runs at the named points of a commit; an error
	// stops the worker there, as a crash would (the random-kill test's
	// child process kills itself instead).
	testHook func(point string) error
}

func (c *Config) defaults() {
	if c.Topic == "" {
		c.Topic = "forklab.streams"
	}
	if c.RotateRecords <= 0 {
		c.RotateRecords = 10000
	}
	if c.RotateInterval <= 0 {
		c.RotateInterval = time.Minute
	}
	if c.FetchBytes <= 0 {
		c.FetchBytes = 128 << 10
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 32 << 20
	}
	if c.RetryFor <= 0 {
		c.RetryFor = kafkadial.DefaultRetryFor
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Report says what a run did.
type Report struct {
	// Files written (rewritten ones included), Rewritten: files that
	// existed already with the same bytes (a batch redone after a crash).
	Files, Rewritten int
	// Events written to files, and Records read from Kafka.
	Events, Records int64
	// Differing lists files that existed with other bytes than the batch
	// made again; the existing file was kept.
	Differing []string
	// Gaps found in this run.
	Gaps []Gap
	// Superseded lists selected stream generations that a newer
	// generation of their name replaced although their own partition does
	// not delete them (retention removed the delete with the create, or a
	// create given up on landed late): met in one partition as the newer
	// generation's first record, or live in one partition's fold while a
	// newer one is live in another's (kafkalog.CrossCheck, after every
	// run). Their rows in the files are of a generation that is over: a
	// query wants the newest generation of the name.
	Superseded []kafkalog.GenConflict
	// Partitions are the per-partition positions at the end of the run.
	Partitions []Position
	// Retries counts the times a partition started again from its last
	// commit after an error reaching Kafka.
	Retries int
	Elapsed time.Duration
}

// Position is where the sink stands in one partition.
type Position struct {
	Partition int32
	// Next is the committed offset: every record below it is in files.
	Next int64
	// HighWatermark is the partition's end as last seen.
	HighWatermark int64
}

// Gap is a part of the log the sink could not copy.
type Gap struct {
	Partition int32 `json:"partition"`
	// From and To are the Kafka offsets of the missing range, inclusive,
	// when it is a range of the partition; Records its size.
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Records int64 `json:"records"`
	// Stream and Gen name the stream generation, for a gap inside one
	// stream; Events counts its missing events when they are known.
	Stream string `json:"stream,omitempty"`
	Gen    int64  `json:"gen,omitempty"`
	Events int64  `json:"events,omitempty"`
	// What says what is missing and why, in a sentence.
	What string `json:"what"`
	// Found is when the sink found it.
	Found time.Time `json:"found"`
}

// ErrUsage marks errors in what the caller asked (a directory of another
// selection, a topic the cluster lacks): exit status 2 in the CLI.
var ErrUsage = errors.New("usage")

// Run copies the selected streams' events from Kafka into cfg.Out/sink
// until the end of the log (or, with Follow, until ctx ends: the batch in
// progress is committed first). Each partition runs on its own goroutine.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: no Kafka brokers", ErrUsage)
	}
	if cfg.Out == "" {
		return nil, fmt.Errorf("%w: no output directory", ErrUsage)
	}
	start := time.Now()
	root := filepath.Join(cfg.Out, Dir)
	unlock, err := dirlock.Lock(root, LockName)
	if err != nil {
		if errors.Is(err, dirlock.ErrLocked) {
			return nil, fmt.Errorf("%w: %v: another forklab log sink writes there", ErrUsage, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	defer unlock()

	rd := kafkalog.NewReader(cfg.Brokers, cfg.Topic)
	defer rd.Close()
	n, err := partitions(ctx, &cfg, rd)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	// With Follow, a partition that fails stops the others (each commits
	// its open batch): a sink half running would look alive.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, n)
	positions := make([]Position, n)
	workers := make([]*worker, n)
	for p := 0; p < n; p++ {
		w := &worker{cfg: &cfg, rd: rd, part: int32(p), root: root, rep: rep, mu: &mu}
		workers[p] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[p] = w.run(ctx); errs[p] != nil {
				cancel()
			}
			positions[p] = Position{Partition: int32(p), Next: w.next, HighWatermark: w.hwm}
		}()
	}
	wg.Wait()
	// A name live in two partitions' folds: only the newer generation is.
	var reps []*kafkalog.Replay
	for _, w := range workers {
		if w.replay != nil {
			reps = append(reps, w.replay)
		}
	}
	for _, c := range kafkalog.CrossCheck(reps) {
		if workers[0].selected(c.Name) {
			workers[c.Partition].superseded(c)
		}
	}
	rep.Partitions = positions
	for _, w := range workers {
		rep.Retries += w.retries
	}
	rep.Elapsed = time.Since(start)
	return rep, errors.Join(errs...)
}

// partitions waits for the topic (with Follow) or fails at once when the
// cluster does not have it.
func partitions(ctx context.Context, cfg *Config, rd *kafkalog.Reader) (int, error) {
	wait := cfg.DialTimeout
	if wait <= 0 {
		wait = kafkadial.DefaultTimeout
	}
	deadline := time.Now().Add(wait)
	var last error // the last real error, not the deadline's own
	var unreachable time.Time
	for logged := false; ; {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if !cfg.Follow {
			actx, cancel = context.WithDeadline(ctx, deadline)
		}
		n, err := rd.Partitions(actx)
		cancel()
		if err == nil {
			return n, nil
		}
		if last == nil || !errors.Is(err, context.DeadlineExceeded) {
			last = err
		}
		if errors.Is(err, kafkalog.ErrNoTopic) && !cfg.Follow {
			return 0, fmt.Errorf("%w: the Kafka cluster at %v has no topic %s: is this the log's cluster (forklab log serve --kafka-port), and its --topic?", ErrUsage, cfg.Brokers, cfg.Topic)
		}
		if !cfg.Follow && time.Now().After(deadline) {
			return 0, kafkadial.Unreachable(cfg.Brokers, wait, last)
		}
		if errors.Is(err, kafkalog.ErrNoTopic) {
			unreachable = time.Time{} // the cluster answers: wait for the topic
		} else if unreachable.IsZero() {
			unreachable = time.Now()
		} else if d := time.Since(unreachable); d > cfg.RetryFor {
			return 0, fmt.Errorf("Kafka at %s %w for %s (last: %v): stopping (--retry-for sets how long to wait)", strings.Join(cfg.Brokers, ","), kafkadial.ErrGone, d.Round(time.Second), last)
		}
		if !logged {
			cfg.Logf("waiting for topic %s at %v: %v", cfg.Topic, cfg.Brokers, err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
