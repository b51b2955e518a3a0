package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/stream/bench"
	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// TestMain doubles as the load generator of the profile: with
// FORKLAB_PROFILE_LOAD set to a URL it runs the append load against it (in
// a process of its own, so the service's profile is the service's) and
// prints the result as JSON.
func TestMain(m *testing.M) {
	if u := os.Getenv("FORKLAB_PROFILE_LOAD"); u != "" {
		producers, _ := strconv.Atoi(os.Getenv("FORKLAB_PROFILE_PRODUCERS"))
		d, _ := time.ParseDuration(os.Getenv("FORKLAB_PROFILE_DURATION"))
		r, err := bench.Appends(context.Background(), bench.Target{Name: "forklab", URL: u},
			bench.AppendConfig{Producers: producers, BodyBytes: 100, Duration: d, Warmup: time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	os.Exit(m.Run())
}

// TestAppendProfile measures where an append's time goes, end to end, and
// prints the breakdown docs/session-log.md gives: the service (embedded
// broker, every batch synced) under the benchmark's load (producers with
// one 100-byte append in flight each, from another process), its stages
// timed from inside (HTTP in, queue and group-commit linger, decision,
// produce through kafka-go and the broker, sync, commit, HTTP out), and the
// same produce load against the broker alone, without HTTP. It compares
// the broker's write-ahead file (each batch written and fdatasynced while
// it is produced: the default), the log syncing kfake's segment file after
// each produce (one fdatasync of a growing file, outside the broker's
// request loop), and kfake syncing it (two fsyncs inside its loop). A
// measurement, not a test: it runs with FORKLAB_PROFILE=1 (make
// bench-log-profile); FORKLAB_PROFILE_CPU=DIR writes CPU profiles there.
func TestAppendProfile(t *testing.T) {
	if os.Getenv("FORKLAB_PROFILE") == "" {
		t.Skip("a measurement: FORKLAB_PROFILE=1 (make bench-log-profile)")
	}
	producers := 16
	if n, err := strconv.Atoi(os.Getenv("FORKLAB_PROFILE_PRODUCERS")); err == nil && n > 0 {
		producers = n
	}
	dur := 5 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FORKLAB_PROFILE_DURATION")); err == nil && d > 0 {
		dur = d
	}
	fmt.Printf("append path: %d producers, one 100-byte append in flight each, %s; per append, mean µs\n", producers, dur)
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer out.Flush()
	fmt.Fprintln(out, "sync\tappends/s\tlatency\tp50\tHTTP in\tqueue+linger\tdecide\tproduce\tsync\tcommit\tHTTP out\toutside handler\tbatch\tCPU/append\t")
	for _, mode := range []string{"journal", "segment", "kfake"} {
		name := map[string]string{"journal": "journal (1 fdatasync beside the produce)", "segment": "segment (1 fdatasync after it)",
			"kfake": "kfake (2 fsyncs)"}[mode]
		st := &kafkalog.Stages{}
		svc, err := service.Start(context.Background(), service.Config{
			Addr: "127.0.0.1:0", DataDir: t.TempDir(), KfakeSync: mode == "kfake", NoJournal: mode == "segment",
			Log:    kafkalog.Config{Stages: st, Logf: func(string, ...any) {}},
			Server: server.Config{Stages: st},
		})
		if err != nil {
			t.Fatal(err)
		}
		stopCPU := cpuProfile(t, "append-"+mode)
		cpu0 := cpuTime()
		res := load(t, svc.URL, producers, dur)
		cpu := cpuTime() - cpu0
		stopCPU()
		svc.Close(context.Background())
		per := func(v int64, n int64) string { return fmt.Sprintf("%.0f", float64(v)/float64(max(n, 1))/1e3) }
		ops, reqs := st.Ops.Load(), st.Requests.Load()
		handler := float64(st.HTTPIn.Load()+st.Log.Load()+st.HTTPOut.Load()) / float64(max(reqs, 1))
		// The mean latency, by Little's law: each producer has one append
		// in flight.
		mean := float64(producers) / res.PerSecond * 1e9
		fmt.Fprintf(out, "%s\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.1f\t%.0f\t\n", name, res.PerSecond, mean/1e3, float64(res.P50)/1e3,
			per(st.HTTPIn.Load(), reqs), per(st.Queue.Load(), ops), per(st.Decide.Load(), ops), per(st.Produce.Load(), ops),
			per(st.Sync.Load(), ops), per(st.Commit.Load(), ops), per(st.HTTPOut.Load(), reqs),
			(mean-handler)/1e3, float64(st.Records.Load())/float64(max(st.Batches.Load(), 1)),
			float64(cpu)/float64(max(reqs, 1))/1e3)
	}
	out.Flush()
	fmt.Println("(latency is the mean as the load generator sees it, p50 its median; 'outside handler' is the mean less the handler's: HTTP parsing and transport on both sides; batch is records per produce; CPU/append is this process's CPU time, both cores, per append)")
	brokerAlone(t, producers)
}

// load runs the append load from another process.
func load(t *testing.T, url string, producers int, d time.Duration) bench.AppendResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FORKLAB_PROFILE_LOAD="+url, "FORKLAB_PROFILE_PRODUCERS="+strconv.Itoa(producers),
		"FORKLAB_PROFILE_DURATION="+d.String())
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var r bench.AppendResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("load: %v: %s", err, b)
	}
	return r
}

// brokerAlone is the floor: the same appends as produce requests of
// producers records each, sent one at a time through kafka-go to the
// embedded broker, synced as the log syncs them.
func brokerAlone(t *testing.T, batch int) {
	fmt.Printf("\nbroker alone: produce requests of %d records (100 B, the log's headers), one at a time, acks=all, then the sync\n", batch)
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer out.Flush()
	fmt.Fprintln(out, "sync\tproduces/s\trecords/s\tp50 produce\tp50 sync\tp99 total\t")
	val := make([]byte, 100)
	hdr := []kafka.Header{{Key: "forklab-op", Value: []byte("append")}, {Key: "forklab-stream", Value: []byte("bench-s-1")},
		{Key: "forklab-gen", Value: []byte("1")}, {Key: "forklab-rec", Value: []byte("12345")}, {Key: "content-type", Value: []byte("application/octet-stream")},
		{Key: "producer-id", Value: []byte("bench")}, {Key: "producer-epoch", Value: []byte("0")}, {Key: "producer-seq", Value: []byte("12345")}}
	for _, mode := range []string{"none", "journal (1 fdatasync beside the produce)", "segment (1 fdatasync after it)", "kfake (2 fsyncs)"} {
		b, err := broker.Start(broker.Config{DataDir: t.TempDir(), NoSync: mode == "none", KfakeSync: mode == "kfake (2 fsyncs)"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		cl := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
		if _, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		recs := make([]kafka.Record, batch)
		var prod, sync, total []time.Duration
		next := int64(0)
		t0 := time.Now()
		for time.Since(t0) < 3*time.Second {
			for i := range recs {
				recs[i] = kafka.Record{Key: kafka.NewBytes([]byte("bench-s-1")), Value: kafka.NewBytes(val), Headers: hdr}
			}
			s := time.Now()
			var journaled func() error
			if j := b.Journal("t"); j != nil && strings.HasPrefix(mode, "journal") {
				jrecs := make([]broker.Record, batch)
				for i := range jrecs {
					jrecs[i] = broker.Record{Key: []byte("bench-s-1"), Value: val, Headers: hdr}
				}
				journaled = j.Write(0, next, jrecs)
			}
			res, err := cl.Produce(ctx, &kafka.ProduceRequest{Topic: "t", RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
			if err != nil || res.Error != nil {
				t.Fatal(err, res)
			}
			next = res.BaseOffset + int64(batch)
			p := time.Now()
			if journaled != nil {
				err = journaled()
			} else {
				err = b.SyncPartition("t", 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			prod, sync, total = append(prod, p.Sub(s)), append(sync, time.Since(p)), append(total, time.Since(s))
		}
		el := time.Since(t0)
		b.Close()
		slices.Sort(prod)
		slices.Sort(sync)
		slices.Sort(total)
		n := len(total)
		fmt.Fprintf(out, "%s\t%.0f\t%.0f\t%.0fµs\t%.0fµs\t%.0fµs\t\n", mode, float64(n)/el.Seconds(), float64(n*batch)/el.Seconds(),
			float64(prod[n/2])/1e3, float64(sync[n/2])/1e3, float64(total[n*99/100])/1e3)
	}
}

// cpuProfile starts a CPU profile when FORKLAB_PROFILE_CPU names a directory.
func cpuProfile(t *testing.T, name string) func() {
	dir := os.Getenv("FORKLAB_PROFILE_CPU")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
