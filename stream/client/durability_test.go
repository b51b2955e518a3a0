package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/forklab/forklab/stream/client"
)

// TestDuplicateAndGapAcrossRestart checks the producer rules before and
// after the service restarts: Kafka alone carries the producer state, in
// the records (a full rebuild) or in the snapshot a clean stop writes.
func TestDuplicateAndGapAcrossRestart(t *testing.T) {
	for _, c := range []struct {
		name      string
		snapshots int
	}{{"from a snapshot", 0}, {"full rebuild", -1}} {
		t.Run(c.name, func(t *testing.T) { duplicateAndGapAcrossRestart(t, c.snapshots) })
	}
}

func duplicateAndGapAcrossRestart(t *testing.T, snapshots int) {
	dir := t.TempDir()
	svc := startServiceSnapshots(t, dir, snapshots)
	ctx := context.Background()
	c := client.New(svc.URL)
	c.Create(ctx, "s", client.CreateOptions{ContentType: textPlain})
	w := c.NewAppender("s", "worker", 3, textPlain)
	for i := 0; i < 3; i++ {
		if _, err := w.Append(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	h := func(epoch, seq string) map[string]string {
		return map[string]string{"Content-Type": textPlain, "Producer-Id": "worker", "Producer-Epoch": epoch, "Producer-Seq": seq}
	}
	check := func(stage string, epoch, seq, body string, status int, hdr, want string) {
		t.Helper()
		res := post(t, c.URL("s"), h(epoch, seq), body)
		if res.StatusCode != status {
			t.Fatalf("%s: epoch %s seq %s: status %d, want %d", stage, epoch, seq, res.StatusCode, status)
		}
		if hdr != "" && res.Header.Get(hdr) != want {
			t.Fatalf("%s: %s = %q, want %q", stage, hdr, res.Header.Get(hdr), want)
		}
	}
	for _, stage := range []string{"before restart", "after restart"} {
		check(stage, "3", "2", "2", http.StatusNoContent, "Producer-Seq", "2")         // duplicate of the last
		check(stage, "3", "0", "0", http.StatusNoContent, "Producer-Seq", "2")         // duplicate of an older one
		check(stage, "3", "5", "5", http.StatusConflict, "Producer-Expected-Seq", "3") // gap
		check(stage, "2", "3", "3", http.StatusForbidden, "Producer-Epoch", "3")       // stale epoch
		check(stage, "4", "1", "1", http.StatusBadRequest, "", "")                     // new epoch must start at 0
		data, _, err := c.ReadAll(ctx, "s", client.Start)
		if err != nil || string(data) != "012" {
			t.Fatalf("%s: stream %q %v, want \"012\"", stage, data, err)
		}
		if stage == "before restart" {
			stopService(t, svc)
			svc = startServiceSnapshots(t, dir, snapshots)
			c = client.New(svc.URL)
			_, part, _ := svc.Log.Location("s")
			if r := svc.Log.Restored()[part]; r.FromSnapshot != (snapshots >= 0) {
				t.Fatalf("restart: %+v, want from a snapshot: %v", r, snapshots >= 0)
			}
		}
	}
	check("after restart", "3", "3", "3", http.StatusOK, "Producer-Seq", "3")
	data, _, _ := c.ReadAll(ctx, "s", client.Start)
	if string(data) != "0123" {
		t.Fatalf("stream %q", data)
	}
	stopService(t, svc)
}

// TestRecordCopyInvisible puts a second copy of a record in Kafka, as
// kafka-go's Writer did when it retried a produce whose answer it lost (the
// log now produces with one attempt per request, but topics written before
// hold such copies, and so may one written by another tool). The log, whose
// next write lands after a record it did not write, re-reads Kafka; readers
// never see the copy, offsets stay strictly increasing, and a restart
// (rebuild from Kafka) gives the same stream and the same tail offset.
func TestRecordCopyInvisible(t *testing.T) {
	dir := t.TempDir()
	svc := startService(t, dir)
	needsEmbedded(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	c.Create(ctx, "dup", client.CreateOptions{ContentType: textPlain})
	w := c.NewAppender("dup", "p", 0, textPlain)
	w.Append(ctx, []byte("a"))
	if r, err := w.Append(ctx, []byte("b")); err != nil || r.Duplicate {
		t.Fatalf("append b: %+v %v", r, err)
	}
	copyRecord(t, svc.Brokers, "b")
	// The write after the copy lands behind a record the log did not
	// write: answered 503, then found as a duplicate on the retry.
	if r, err := w.Append(ctx, []byte("c")); err != nil || !r.Duplicate {
		t.Fatalf("append c after the copy: %+v %v, want a duplicate found on the retry", r, err)
	}

	// Kafka holds "b" twice.
	if n := countValues(t, svc.Brokers, "b"); n != 2 {
		t.Fatalf("Kafka holds %d copies of \"b\", want 2", n)
	}
	check := func(stage string) string {
		t.Helper()
		data, tail, err := c.ReadAll(ctx, "dup", client.Start)
		if err != nil || string(data) != "abc" {
			t.Fatalf("%s: stream %q %v, want \"abc\"", stage, data, err)
		}
		// Record by record: each read from the previous next offset gives
		// one record, with strictly increasing offsets.
		var got []string
		off := client.Start
		for off != tail {
			ch, err := c.Read(ctx, "dup", off)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(ch.Data))
			if off != client.Start && ch.Next <= off {
				t.Fatalf("%s: offsets not increasing: %s then %s", stage, off, ch.Next)
			}
			off = ch.Next
			if ch.UpToDate {
				break
			}
		}
		if strings.Join(got, "") != "abc" {
			t.Fatalf("%s: records %q", stage, got)
		}
		return tail
	}
	before := check("before restart")
	stopService(t, svc)
	svc = startService(t, dir)
	defer stopService(t, svc)
	c = client.New(svc.URL)
	if after := check("after restart"); after != before {
		t.Fatalf("tail offset %s before restart, %s after", before, after)
	}
	// The producer state survived too: "c" was seq 2.
	if res := post(t, c.URL("dup"), map[string]string{"Content-Type": textPlain, "Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": "2"}, "c"); res.StatusCode != http.StatusNoContent {
		t.Fatalf("duplicate of seq 2 after restart: %d", res.StatusCode)
	}
}

// copyRecord writes the record of the data topic's partition 0 whose value
// is v to Kafka again, key and headers and all.
func copyRecord(t *testing.T, brokers []string, v string) {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := cl.Fetch(context.Background(), &kafka.FetchRequest{Topic: "forklab.streams", Partition: 0, Offset: 0, MaxBytes: 1 << 20})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch: %v %v", err, res.Error)
	}
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			t.Fatalf("no record with value %q", v)
		}
		var key, val bytes.Buffer
		if r.Key != nil {
			key.ReadFrom(r.Key)
		}
		if r.Value != nil {
			val.ReadFrom(r.Value)
		}
		if val.String() != v {
			continue
		}
		p, err := cl.Produce(context.Background(), &kafka.ProduceRequest{Topic: "forklab.streams", Partition: 0, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(kafka.Record{Key: kafka.NewBytes(key.Bytes()), Value: kafka.NewBytes(val.Bytes()), Headers: r.Headers})})
		if err != nil || p.Error != nil {
			t.Fatalf("produce the copy: %v %v", err, p.Error)
		}
		return
	}
}

// countValues counts records with the given value in the data topic.
func countValues(t *testing.T, brokers []string, value string) int {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := cl.Fetch(context.Background(), &kafka.FetchRequest{Topic: "forklab.streams", Partition: 0, Offset: 0, MaxBytes: 1 << 20})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch: %v %v", err, res.Error)
	}
	n := 0
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			break
		}
		var b bytes.Buffer
		if r.Value != nil {
			b.ReadFrom(r.Value)
		}
		if b.String() == value {
			n++
		}
	}
	return n
}

// TestCrashSIGKILL kills the service with SIGKILL while producers append,
// restarts it, and checks that every acknowledged append is there, in order,
// once; that a pre-crash append is still a duplicate; and that a zombie is
// still fenced.
func TestCrashSIGKILL(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	setupZombie(t, client.New(p.url))
	p = crashCycle(t, dir, p, 0, nil, nil, nil)
	checkZombie(t, client.New(p.url))
}

// TestMachineCrash simulates a crash of the machine, not only of the
// process: the page cache is lost, so what the embedded broker wrote but
// did not sync is gone. The log acknowledges an append once its batch is
// synced in the broker's write-ahead file (broker.Journal); kfake's own
// segment files are synced only at checkpoints. After SIGKILL during
// appends the test cuts each segment file of the data topic back to its
// size when the service had started (all that was synced then: the
// broker syncs its files on start, and the appends here are far from
// filling a journal, so no checkpoint came after), or into the middle of
// the first batch after it (a torn write), and restarts: the broker
// produces the journal's records again, and every acknowledged append is
// there, in order, once, at the offset it was acknowledged at; a resent
// append is a duplicate and the zombie is still fenced.
func TestMachineCrash(t *testing.T) {
	for _, c := range []struct {
		name string
		torn int64 // bytes of the first lost batch left behind
	}{{"unsynced writes lost", 0}, {"torn write", 40}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startProcess(t, dir)
			if os.Getenv("FORKLAB_TEST_BROKERS") != "" {
				t.Skip("cuts the embedded broker's files; FORKLAB_TEST_BROKERS runs on a cluster")
			}
			synced := segmentSizes(t, dir)
			ctx := context.Background()
			c0 := client.New(p.url)
			setupZombie(t, c0)
			// An append whose offset the client holds across the crash.
			c0.Create(ctx, "pinned", client.CreateOptions{ContentType: textPlain})
			w := c0.NewAppender("pinned", "p", 0, textPlain)
			first, err := w.Append(ctx, []byte("x;"))
			if err != nil {
				t.Fatal(err)
			}
			second, err := w.Append(ctx, []byte("y;"))
			if err != nil {
				t.Fatal(err)
			}
			p = crashCycle(t, dir, p, 0, nil, nil, func() *serverProcess {
				for path, size := range segmentSizes(t, dir) {
					cut := synced[path] + c.torn
					if cut >= size {
						continue
					}
					if err := os.Truncate(path, cut); err != nil {
						t.Fatal(err)
					}
				}
				l := launch(t, dir)
				line := l.waitEvent(t, "journal: produced again", 60*time.Second)
				var n int
				if _, err := fmt.Sscanf(line[strings.Index(line, "produced again"):], "produced again %d", &n); err != nil || n < 20 {
					t.Fatalf("restart: %q: want at least 20 records produced again from the journal", line)
				}
				select {
				case l.url = <-l.urlCh:
				case <-time.After(60 * time.Second):
					t.Fatal("server process did not start")
				}
				return l.serverProcess
			})
			c1 := client.New(p.url)
			checkZombie(t, c1)
			ch, err := c1.Read(ctx, "pinned", first.Next)
			if err != nil || string(ch.Data) != "y;" || ch.Next != second.Next {
				t.Fatalf("read pinned from %s after the crash: %q next %s %v, want \"y;\" next %s", first.Next, ch.Data, ch.Next, err, second.Next)
			}
		})
	}
}

// segmentSizes are the sizes of the data topic's segment files.
func segmentSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "kafka", "partitions", "forklab.streams-*", "*.dat"))
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, p := range m {
		if st, err := os.Stat(p); err == nil {
			sizes[p] = st.Size()
		}
	}
	return sizes
}

// TestCrashOnCluster runs the crash cycle of TestCrashSIGKILL with the
// service on a 3-broker cluster running in a process of its own (topic
// replicated 3 times, 3 partitions with leaders on different brokers):
// SIGKILL during appends, a restart from the records, then SIGKILL during a
// snapshot and a restart from it. make log-cluster-test runs every test of
// this package on such a cluster.
func TestCrashOnCluster(t *testing.T) {
	brokers := os.Getenv("FORKLAB_TEST_BROKERS")
	if brokers == "" {
		brokers = startCluster(t)
	}
	dir := t.TempDir()
	env := []string{"FORKLAB_TEST_BROKERS=" + brokers, "FORKLAB_TEST_SNAPSHOT_RECORDS=100"}
	p := startProcess(t, dir, env...)
	setupZombie(t, client.New(p.url))
	restart := func() *serverProcess { return startProcess(t, dir, env...) }
	p = crashCycle(t, dir, p, 0, nil, nil, restart)
	checkZombie(t, client.New(p.url))
	p = crashCycle(t, dir, p, 1, nil, func(p *serverProcess) {
		p.waitEvent(t, ": writing", 30*time.Second)
		p.waitEvent(t, ": writing", 30*time.Second)
	}, func() *serverProcess {
		np := restart()
		np.waitEvent(t, "restored from its snapshot", 10*time.Second)
		return np
	})
	checkZombie(t, client.New(p.url))
}

// startCluster runs a 3-broker development cluster in a child process and
// returns its bootstrap addresses.
func startCluster(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FORKLAB_TEST_CLUSTER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() })
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if b, ok := strings.CutPrefix(sc.Text(), "BROKERS "); ok {
				got <- b
			}
		}
	}()
	select {
	case b := <-got:
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("the cluster did not start")
		return ""
	}
}

// TestCrashDuringSnapshot snapshots the state every 100 records and kills
// the service with SIGKILL just after it starts writing one (its chunks
// may be half written, its manifest is not): the restart must use the
// previous snapshot, or none, and replay the rest. Then it kills it in the
// middle of a start (while it reads the data topic) and starts it again.
// Each time every acknowledged append is there once, a resent one is a
// duplicate and the zombie is fenced.
func TestCrashDuringSnapshot(t *testing.T) {
	dir := t.TempDir()
	env := "FORKLAB_TEST_SNAPSHOT_RECORDS=100"
	p := startProcess(t, dir, env)
	setupZombie(t, client.New(p.url))
	kept := map[string]string{}
	for cycle := 0; cycle < 2; cycle++ {
		p = crashCycle(t, dir, p, cycle, kept, func(p *serverProcess) {
			// The second snapshot that starts, so that one is complete.
			p.waitEvent(t, ": writing", 30*time.Second)
			p.waitEvent(t, ": writing", 30*time.Second)
		}, func() *serverProcess {
			np := startProcess(t, dir, env)
			np.waitEvent(t, "restored from its snapshot", 10*time.Second)
			return np
		})
		checkZombie(t, client.New(p.url))
	}
	// Killed while it reads the data topic on start (snapshots off: the
	// whole topic), then started again.
	p.kill()
	l := launch(t, dir, "FORKLAB_TEST_SNAPSHOT_RECORDS=-1")
	l.waitEvent(t, "reading offsets", 30*time.Second)
	l.kill()
	p = startProcess(t, dir, env)
	c := client.New(p.url)
	for name, want := range kept {
		data, _, err := c.ReadAll(context.Background(), name, client.Start)
		if err != nil || string(data) != want {
			t.Fatalf("%s after a crash during a start: %v", name, err)
		}
	}
	checkZombie(t, c)
}

// TestCrashSoak repeats the crash cycle (FORKLAB_SOAK=1, make log-soak),
// checking after every restart every stream written in earlier cycles too.
func TestCrashSoak(t *testing.T) {
	if os.Getenv("FORKLAB_SOAK") == "" {
		t.Skip("set FORKLAB_SOAK=1 (make log-soak)")
	}
	dir := t.TempDir()
	p := startProcess(t, dir)
	setupZombie(t, client.New(p.url))
	kept := map[string]string{}
	for cycle := 0; cycle < 20; cycle++ {
		p = crashCycle(t, dir, p, cycle, kept, nil, nil)
		checkZombie(t, client.New(p.url))
	}
}

func setupZombie(t *testing.T, c *client.Client) {
	ctx := context.Background()
	c.Create(ctx, "fenced", client.CreateOptions{ContentType: textPlain})
	c.NewAppender("fenced", "w", 0, textPlain).Append(ctx, []byte("old;"))
	c.NewAppender("fenced", "w", 1, textPlain).Append(ctx, []byte("new;"))
}

func checkZombie(t *testing.T, c *client.Client) {
	t.Helper()
	_, err := c.NewAppender("fenced", "w", 0, textPlain).Append(context.Background(), []byte("zombie;"))
	var fe *client.FencedError
	if !errors.As(err, &fe) || fe.CurrentEpoch != 1 {
		t.Fatalf("zombie after crash: %v", err)
	}
}

// crashCycle runs producers against the server p, kills it with SIGKILL
// (after a while, or once killWhen returns), restarts it (startProcess, or
// restart) and checks the streams of this cycle and of kept (name → exact
// content from earlier cycles), to which it adds this cycle's.
func crashCycle(t *testing.T, dir string, p *serverProcess, cycle int, kept map[string]string,
	killWhen func(*serverProcess), restart func() *serverProcess) *serverProcess {
	t.Helper()
	ctx := context.Background()
	c := client.New(p.url)
	const producers = 4
	type plog struct {
		acked    []string
		inflight string
	}
	logs := make([]plog, producers)
	var wg sync.WaitGroup
	var ackedN atomic.Int64 // appends acknowledged so far, all producers
	stop := make(chan struct{})
	for i := range producers {
		name := fmt.Sprintf("crash-%d-%d", cycle, i)
		if _, _, err := c.Create(ctx, name, client.CreateOptions{ContentType: textPlain}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.NewAppender(name, "p", 0, textPlain)
			w.MaxAttempts = 1
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				rec := fmt.Sprintf("%s#%d;", name, n)
				logs[i].inflight = rec
				if _, err := w.Append(ctx, []byte(rec)); err != nil {
					return // the server died under us
				}
				logs[i].acked = append(logs[i].acked, rec)
				logs[i].inflight = ""
				ackedN.Add(1)
			}
		}()
	}
	if killWhen != nil {
		// The kill waits for an event (a snapshot being written), which a
		// restarted server may reach before any append of this cycle: let
		// 20 appends be acknowledged first, and forget the events before.
		for deadline := time.Now().Add(30 * time.Second); ackedN.Load() < 20 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		for drained := false; !drained; {
			select {
			case <-p.events:
			default:
				drained = true
			}
		}
		killWhen(p)
	} else {
		time.Sleep(time.Duration(400+100*(cycle%5)) * time.Millisecond)
	}
	p.kill()
	close(stop)
	wg.Wait()

	if restart != nil {
		p = restart()
	} else {
		p = startProcess(t, dir)
	}
	c = client.New(p.url)
	total := 0
	for i := range producers {
		name := fmt.Sprintf("crash-%d-%d", cycle, i)
		data, _, err := c.ReadAll(ctx, name, client.Start)
		if err != nil {
			t.Fatal(err)
		}
		acked := strings.Join(logs[i].acked, "")
		got := string(data)
		if got != acked && got != acked+logs[i].inflight {
			t.Fatalf("%s after crash:\n got %q\nacked %q (+ in flight %q)", name, got, acked, logs[i].inflight)
		}
		total += len(logs[i].acked)
		// The last acknowledged append, resent, is a duplicate.
		if n := len(logs[i].acked); n > 0 {
			seq := fmt.Sprint(n - 1)
			res := post(t, c.URL(name), map[string]string{"Content-Type": textPlain, "Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": seq}, logs[i].acked[n-1])
			if res.StatusCode != http.StatusNoContent {
				t.Fatalf("%s: resent seq %s after crash: %d, want 204", name, seq, res.StatusCode)
			}
		}
		again, _, _ := c.ReadAll(ctx, name, client.Start)
		if !bytes.Equal(again, data) {
			t.Fatalf("%s changed after a duplicate", name)
		}
		if kept != nil {
			kept[name] = got
		}
	}
	if total < 20 {
		t.Fatalf("only %d appends acknowledged before the kill", total)
	}
	for name, want := range kept {
		data, _, err := c.ReadAll(ctx, name, client.Start)
		if err != nil || string(data) != want {
			t.Fatalf("cycle %d: earlier stream %s changed: %v", cycle, name, err)
		}
	}
	t.Logf("cycle %d: %d acknowledged appends survived SIGKILL", cycle, total)
	return p
}

// TestFailedWriteResync makes a produce land in Kafka but answer
// REQUEST_TIMED_OUT (as a broker does when the record is on the leader but
// not on every replica in time): the append is answered 503 (nothing
// acknowledged), the log re-reads Kafka, finds the record, and the client's
// retry with the same seq is a duplicate (204), so the record is in the
// stream, and in Kafka, exactly once.
func TestFailedWriteResync(t *testing.T) {
	dir := t.TempDir()
	svc := startService(t, dir)
	needsEmbedded(t, svc)
	defer func() { stopService(t, svc) }()
	ctx := context.Background()
	c := client.New(svc.URL)
	c.Create(ctx, "f", client.CreateOptions{ContentType: textPlain})
	h := map[string]string{"Content-Type": textPlain, "Producer-Id": "p", "Producer-Epoch": "0"}
	seq := func(n string) map[string]string {
		m := map[string]string{"Producer-Seq": n}
		for k, v := range h {
			m[k] = v
		}
		return m
	}
	if res := post(t, c.URL("f"), seq("0"), "a"); res.StatusCode != http.StatusOK {
		t.Fatalf("seq 0: %d", res.StatusCode)
	}
	fault := svc.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1})
	res := post(t, c.URL("f"), seq("1"), "b")
	fault.Remove()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("append while every produce times out: %d, want 503", res.StatusCode)
	}
	if n := countValues(t, svc.Brokers, "b"); n != 1 {
		t.Fatalf("Kafka holds %d copies of \"b\", want 1: the fault lets the produce land, and the log sends it once", n)
	}
	// The retry: a duplicate, because the failed write did land.
	var res2 *http.Response
	for i := 0; i < 50; i++ {
		if res2 = post(t, c.URL("f"), seq("1"), "b"); res2.StatusCode != http.StatusServiceUnavailable {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res2.StatusCode != http.StatusNoContent || res2.Header.Get("Producer-Seq") != "1" {
		t.Fatalf("retry of seq 1: %d Producer-Seq=%q, want 204 and 1", res2.StatusCode, res2.Header.Get("Producer-Seq"))
	}
	if res := post(t, c.URL("f"), seq("2"), "c"); res.StatusCode != http.StatusOK {
		t.Fatalf("seq 2: %d", res.StatusCode)
	}
	data, _, _ := c.ReadAll(ctx, "f", client.Start)
	if string(data) != "abc" {
		t.Fatalf("stream %q, want \"abc\"", data)
	}
	stopService(t, svc)
	svc = startService(t, dir)
	c = client.New(svc.URL)
	data, _, _ = c.ReadAll(ctx, "f", client.Start)
	if string(data) != "abc" {
		t.Fatalf("after restart %q, want \"abc\"", data)
	}
}
