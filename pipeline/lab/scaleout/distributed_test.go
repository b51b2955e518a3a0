package scaleout_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/scaleout/faulty"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/broker"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster starts a development cluster of n brokers (stream/broker, the
// cluster forklab kafka serve runs) in this process, topics replicated
// across them, and returns their addresses.
func cluster(t testing.TB, n int) []string {
	t.Helper()
	c, err := broker.StartCluster(broker.ClusterConfig{Brokers: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.Addrs()
}

// smallUnits is a noisy counter sweep of 1024-seed units: 12 of them.
func smallUnits() sweep.Spec {
	spec := sweep.DefaultSpec()
	spec.ForkAt = []int{2, 3}
	spec.Model.Temperature = 0.05
	spec.UnitSeeds = 1024
	spec.Seeds = sweep.Range{Start: 0, End: 12*1024 - 100}
	return spec
}

type pool struct {
	t       testing.TB
	q       scaleout.Queue
	mu      sync.Mutex
	workers []*scaleout.Worker
	wg      sync.WaitGroup
	cancel  []context.CancelFunc
	errs    []error
}

// start starts a worker of parallel members.
func (p *pool) start(id string, parallel int) *scaleout.Worker {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := scaleout.NewWorker(ctx, scaleout.WorkerConfig{Queue: p.q, ID: id, Parallel: parallel, SessionTimeout: 6 * time.Second,
		Version: "test", Logf: func(f string, a ...any) { p.t.Logf(f, a...) }})
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.workers = append(p.workers, w)
	p.cancel = append(p.cancel, cancel)
	p.mu.Unlock()
	p.wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, fmt.Errorf("worker %s: %w", id, err))
			p.mu.Unlock()
		}
	})
	return w
}

// stop drains every worker and fails the test on a worker's error.
func (p *pool) stop() {
	for _, w := range p.workers {
		w.Drain()
	}
	p.wg.Wait()
	for _, c := range p.cancel {
		c()
	}
	for _, err := range p.errs {
		p.t.Error(err)
	}
}

func (p *pool) stats() scaleout.WorkerStats {
	var s scaleout.WorkerStats
	for _, w := range p.workers {
		x := w.Stats()
		s.Units += x.Units
		s.Again += x.Again
		s.Poison += x.Poison
		s.Failed += x.Failed
		s.Deferred += x.Deferred
	}
	return s
}

// A distributed sweep over a 3-broker cluster with replicated topics: two
// workers (one of two members) write the single-process sweep's files byte
// for byte, and its manifest's rows and checksums; every unit is run once.
func TestDistributedSweep(t *testing.T) {
	brokers := cluster(t, 3)
	spec := smallUnits()
	single := singleProcess(t, spec)
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	q := scaleout.Queue{Brokers: brokers, Name: "t1", Partitions: 6}
	p := &pool{t: t, q: q}
	p.start("a", 2)
	p.start("b", 1)
	defer p.stop()
	out := filepath.Join(t.TempDir(), "out")
	var last scaleout.Status
	res, err := scaleout.Coordinate(context.Background(), r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test",
		Progress: func(s scaleout.Status) { last = s }})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "distributed against one process", tableFiles(t, single), tableFiles(t, out))
	sameManifestRows(t, single, out)
	if res.Manifest.ForklabVersion != "test" || res.Manifest.SweepID != last.Sweep || last.Done != 12 || last.Units != 12 || last.SeedsDone != spec.Seeds.Len() || last.Poison != 0 {
		t.Fatalf("result %+v, last status %+v", res.Manifest.ForklabVersion, last)
	}
	p.stop()
	if s := p.stats(); s.Units != 12 || s.Poison != 0 || s.Failed != 0 {
		t.Fatalf("workers: %+v, want 12 units run", s)
	}
	p.workers = nil
	// The topics are replicated over the three brokers.
	assertReplicated(t, brokers, q.UnitsTopic(), 3)
}

// A coordinator stopped midway, restarted, picks its sweep up from the
// topics and the staging directory: it publishes no unit twice when it
// had published them all, and finalizes once every unit is in.
func TestCoordinatorPicksUp(t *testing.T) {
	s := stoppedAfterPublishing(t, "t2")
	if !errors.Is(s.err, context.Canceled) {
		t.Fatalf("stopped coordinator: %v", s.err)
	}
	p := &pool{t: t, q: s.q}
	w := p.start("a", 1)
	defer p.stop()
	// Let the worker finish some units with no coordinator listening.
	for w.Stats().Units < 3 {
		time.Sleep(50 * time.Millisecond)
	}
	logs, err := s.coordinate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) == 0 || !strings.HasPrefix(logs[0], "picking up sweep") {
		t.Fatalf("restarted coordinator said %q", logs)
	}
	for _, l := range logs {
		if strings.HasPrefix(l, "published") {
			t.Fatalf("the restarted coordinator published again: %q", l)
		}
	}
	spec, out := s.spec, s.out
	sameFiles(t, "picked-up sweep against one process", tableFiles(t, singleProcess(t, spec)), tableFiles(t, out))
}

// assertReplicated fails unless every partition of topic has rf replicas.
func assertReplicated(t testing.TB, brokers []string, topic string, rf int) {
	t.Helper()
	parts, err := scaleout.TopicReplicas(context.Background(), brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) == 0 {
		t.Fatalf("topic %s has no partitions", topic)
	}
	for p, n := range parts {
		if n != rf {
			t.Fatalf("topic %s partition %d has %d replicas, want %d", topic, p, n, rf)
		}
	}
}

// A unit whose world panics is tried MaxAttempts times, then written as
// error rows naming each attempt; the other units finish as they would
// have, and the sweep finishes.
func TestPoisonUnit(t *testing.T) {
	brokers := cluster(t, 1)
	spec := smallUnits()
	spec.World = faulty.Name
	spec.Params = world.Params{"crash_seed": 5000}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	q := scaleout.Queue{Brokers: brokers, Name: "t3", Partitions: 4}
	p := &pool{t: t, q: q}
	p.start("a", 1)
	p.start("b", 1)
	defer p.stop()
	out := filepath.Join(t.TempDir(), "out")
	var last scaleout.Status
	res, err := scaleout.Coordinate(context.Background(), r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test", MaxAttempts: 2,
		Progress: func(s scaleout.Status) { last = s }})
	if err != nil {
		t.Fatal(err)
	}
	if last.Poison != 1 || last.Failed != 2 {
		t.Fatalf("status %+v, want 1 poison unit after 2 failed attempts", last)
	}
	// Unit 4 holds seeds 4096:5120: 1024 seeds × 2 fork steps × 1 arm.
	if res.Manifest.Errors != 2048 {
		t.Fatalf("manifest errors %d, want 2048", res.Manifest.Errors)
	}
	got := ducktest.Query(t, out, `SELECT status, min(seed), max(seed), count(*), count(label), min(error) FROM {pairs} GROUP BY status ORDER BY status`)
	wantErr := "unit c0-s000004 failed 2 attempts, the retry limit, and was not run again: attempt 1 (worker "
	if len(got) != 2 || got[0][0] != "error" || got[0][1] != "4096" || got[0][2] != "5119" || got[0][3] != "2048" || got[0][4] != "0" ||
		!strings.HasPrefix(got[0][5], wantErr) || !strings.Contains(got[0][5], "): panic: faulty: seed 5000 (at faulty.go:") ||
		!strings.Contains(got[0][5], "; attempt 2 (worker ") || got[1][0] != "ok" || got[1][3] != fmt.Sprint(2*(spec.Seeds.Len()-1024)) {
		t.Fatalf("pairs by status: %q", got)
	}
	// The other units are the counter's own.
	counterSpec := spec
	counterSpec.World = "counter"
	counterSpec.Params = nil
	want := ducktest.Query(t, singleProcess(t, counterSpec), `SELECT seed, fork_step, arm, label FROM {pairs} WHERE seed NOT BETWEEN 4096 AND 5119 ORDER BY ALL`)
	have := ducktest.Query(t, out, `SELECT seed, fork_step, arm, label FROM {pairs} WHERE status = 'ok' ORDER BY ALL`)
	if fmt.Sprint(want) != fmt.Sprint(have) {
		t.Fatal("the units around the poison unit differ from the counter's")
	}
	p.stop()
	if s := p.stats(); s.Poison != 1 || s.Failed != 2 {
		t.Fatalf("workers: %+v", s)
	}
	p.workers = nil
}

// Refusals: an unfinished distributed sweep of another spec in the
// directory (without --overwrite), and no brokers.
func TestCoordinatorRefusals(t *testing.T) {
	brokers := cluster(t, 1)
	spec := smallUnits()
	r, _ := spec.Resolve()
	q := scaleout.Queue{Brokers: brokers, Name: "t4", Partitions: 2}
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := scaleout.Coordinate(ctx, r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first coordinator: %v", err)
	}
	spec.Seeds.End++
	r2, _ := spec.Resolve()
	_, err := scaleout.Coordinate(context.Background(), r2, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test"})
	if err == nil || !strings.Contains(err.Error(), "holds an unfinished distributed sweep") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("another spec: %v", err)
	}
	if _, err := scaleout.Coordinate(context.Background(), r2, scaleout.CoordinatorConfig{Out: out}); err == nil || !strings.Contains(err.Error(), "no Kafka brokers") {
		t.Fatalf("no brokers: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the output directory was created")
	}
}

// deleteRecords removes every record of topic (as retention would).
func deleteRecords(t testing.TB, brokers []string, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for p := range int32(4) {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, -1 // -1: up to the high watermark
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	res, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range res.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("delete records of %s[%d]: error code %d", topic, p.Partition, p.ErrorCode)
			}
		}
	}
}

// Retention that removed a sweep's unit records before any worker read
// them loses no unit: the coordinator, restarted, sees the units topic's
// log start past where its records began and publishes the unfinished
// units again.
func TestRetentionRepublishes(t *testing.T) {
	s := stoppedAfterPublishing(t, "t5")
	deleteRecords(t, s.brokers, s.q.UnitsTopic())
	p := &pool{t: t, q: s.q}
	p.start("a", 2)
	defer p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs, err := s.coordinate(ctx)
	if err != nil {
		t.Fatalf("%v (said %q)", err, logs)
	}
	if len(logs) < 3 || !strings.Contains(logs[1], "retention removed records") || !strings.HasPrefix(logs[2], "published 12 units") {
		t.Fatalf("the restarted coordinator said %q", logs)
	}
}

// stoppedSweep is a distributed sweep of smallUnits() whose coordinator
// published its units and was stopped before any worker took one.
type stoppedSweep struct {
	brokers []string
	spec    sweep.Spec
	r       sweep.Resolved
	q       scaleout.Queue
	out     string // the results directory; its staging directory holds the sweep
	err     error  // the stopped coordinator's
}

// stoppedAfterPublishing starts a one-broker cluster and, with no worker,
// a coordinator of smallUnits() on queue name, and stops it (its context
// cancelled) once it has published its units.
func stoppedAfterPublishing(t *testing.T, name string) stoppedSweep {
	t.Helper()
	s := stoppedSweep{brokers: cluster(t, 1), spec: smallUnits(), out: filepath.Join(t.TempDir(), "out")}
	var err error
	if s.r, err = s.spec.Resolve(); err != nil {
		t.Fatal(err)
	}
	s.q = scaleout.Queue{Brokers: s.brokers, Name: name, Partitions: 4}
	ctx, cancel := context.WithCancel(context.Background())
	published := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := scaleout.Coordinate(ctx, s.r, scaleout.CoordinatorConfig{Queue: s.q, Out: s.out, Version: "test",
			Logf: func(f string, a ...any) {
				if strings.HasPrefix(f, "published") {
					once.Do(func() { close(published) })
				}
			}})
		errc <- err
	}()
	<-published
	cancel()
	s.err = <-errc
	return s
}

// coordinate runs the sweep's coordinator again, to the end, and returns
// the lines it logged.
func (s stoppedSweep) coordinate(ctx context.Context) ([]string, error) {
	var logs []string
	var mu sync.Mutex
	_, err := scaleout.Coordinate(ctx, s.r, scaleout.CoordinatorConfig{Queue: s.q, Out: s.out, Version: "test",
		Logf: func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(logs), err
}
