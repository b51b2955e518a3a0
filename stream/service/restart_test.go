package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/service"
)

// TestRestartTime measures how long the service takes to restart and
// answer its first append with a log of 1, 5 and 10 million records:
// loading the latest snapshot and replaying what follows it, beside a full
// rebuild from the data topic, and the embedded broker's own start (kfake
// loading its segment files) that both include. The log grows from one
// size to the next: 10,000 streams of ~48-byte appends, written in-process
// without HTTP. A measurement, not a test: FORKLAB_BENCH_RESTART=1 (make
// bench-log-restart); FORKLAB_BENCH_RESTART_SIZES=1000000,5000000 changes
// the sizes.
func TestRestartTime(t *testing.T) {
	if os.Getenv("FORKLAB_BENCH_RESTART") == "" {
		t.Skip("a measurement: FORKLAB_BENCH_RESTART=1 (make bench-log-restart)")
	}
	sizes := []int{1_000_000, 5_000_000, 10_000_000}
	if v := os.Getenv("FORKLAB_BENCH_RESTART_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	dir := t.TempDir()
	const streams = 10_000
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "records\tdata\tbroker start\tlog from snapshot\t(replayed)\trestart from snapshot\tlog rebuild\trestart with rebuild\t")
	written := 0
	for _, size := range sizes {
		// Grow the log to size records, stopping cleanly (a snapshot on
		// close), then append a tail after the last snapshot, as a crash
		// would leave it: up to 100,000 records.
		tail := min(50_000, size/20)
		svc := startBench(t, dir, 0, false)
		t0 := time.Now()
		fillLog(t, svc.Log, streams, written, size-tail)
		gen := time.Since(t0)
		svc.Close(context.Background())
		svc = startBench(t, dir, -1, true) // a crash: no snapshot after the tail
		fillLog(t, svc.Log, streams, size-tail, size)
		svc.Close(context.Background())
		written = size
		t.Logf("%d records written in %s", size, gen.Round(time.Second))

		b1, snap, replayed := timeRestart(t, dir, 0)
		b2, full, _ := timeRestart(t, dir, -1)
		r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		fmt.Fprintf(out, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", size, du(filepath.Join(dir, "kafka")), r((b1+b2)/2),
			r(snap), replayed, r(b1+snap), r(full), r(b2+full))
		out.Flush()
	}
	fmt.Println("(broker start: kfake loading its files; log: from then to the first append answered, loading the snapshot and replaying the records after it, or rebuilding from the data topic; restart: both)")
}

// startBench starts the service on dir: snapshots as in
// kafkalog.Config.SnapshotRecords; crash: none is written on close, as a
// crash leaves the log.
func startBench(t *testing.T, dir string, snapshots int, crash bool) *service.Service {
	t.Helper()
	cfg := kafkalog.Config{SnapshotRecords: snapshots, NoSnapshotOnClose: crash, Logf: func(string, ...any) {}}
	svc, err := service.Start(context.Background(), service.Config{Addr: "127.0.0.1:0", DataDir: dir, NoSync: true, Log: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// fillLog appends records from..to-1 over streams streams, 64 writers at
// once.
func fillLog(t *testing.T, l *kafkalog.Log, streams, from, to int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < streams; i++ {
		name := "session/" + strconv.Itoa(i)
		if _, err := l.Head(name); err == nil {
			continue
		}
		if _, err := l.Create(ctx, kafkalog.CreateRequest{Name: name, ContentType: "application/json", TTL: -1}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	const writers = 64
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := from + w; n < to; n += writers {
				body := fmt.Sprintf(`{"turn":%d,"kind":"tool_call","ok":true}`, n)
				if _, err := l.Append(ctx, kafkalog.AppendRequest{Name: "session/" + strconv.Itoa(n%streams), ContentType: "application/json", Body: []byte(body)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// timeRestart starts the embedded broker on dir, then the log on it, and
// answers one append; snapshots as in kafkalog.Config.SnapshotRecords (-1:
// a full rebuild). It returns the broker's start and the log's, to the
// first append answered, and the records replayed.
func timeRestart(t *testing.T, dir string, snapshots int) (brokerStart, logStart time.Duration, replayed int) {
	t.Helper()
	t0 := time.Now()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t1 := time.Now()
	svc, err := service.Start(context.Background(), service.Config{Addr: "127.0.0.1:0", Brokers: b.Addrs(),
		Log: kafkalog.Config{SnapshotRecords: snapshots, NoSnapshotOnClose: true, Logf: func(string, ...any) {}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Log.Append(context.Background(), kafkalog.AppendRequest{Name: "session/0", ContentType: "application/json", Body: []byte(`{"first":true}`)}); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	for _, r := range svc.Log.Restored() {
		if snapshots >= 0 && !r.FromSnapshot {
			t.Fatalf("partition %d not restored from its snapshot: %s", r.Partition, r.Why)
		}
		replayed += r.Replayed
	}
	svc.Close(context.Background())
	return t1.Sub(t0), t2.Sub(t1), replayed
}

// du is the size of the files under dir.
func du(dir string) string {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
