package client_test

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// TestMain doubles as the server process of the crash tests: with
// FORKLAB_TEST_SERVE set to a data directory it runs the session-log
// service (embedded broker, fsync per batch) until killed; and as a
// 3-broker development cluster with FORKLAB_TEST_CLUSTER=1 (it prints
// "BROKERS host:port,…").
//
// With FORKLAB_TEST_BROKERS=host:port,… every service of these tests runs
// on that cluster instead of the embedded broker (make log-cluster-test):
// 3 partitions replicated 3 times, a topic of its own per data directory.
func TestMain(m *testing.M) {
	if os.Getenv("FORKLAB_TEST_CLUSTER") != "" {
		clusterForever()
		return
	}
	if dir := os.Getenv("FORKLAB_TEST_SERVE"); dir != "" {
		serveForever(dir)
		return
	}
	os.Exit(m.Run())
}

func clusterForever() {
	c, err := broker.StartCluster(broker.ClusterConfig{Brokers: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	fmt.Println("BROKERS", strings.Join(c.Addrs(), ","))
	select {}
}

// onCluster points cfg at the cluster FORKLAB_TEST_BROKERS names, if any:
// a topic of its own for the data directory (the same after a restart),
// 3 partitions, replication factor 3.
func onCluster(cfg *service.Config) {
	b := os.Getenv("FORKLAB_TEST_BROKERS")
	if b == "" {
		return
	}
	cfg.Brokers = strings.Split(b, ",")
	h := fnv.New64a()
	h.Write([]byte(cfg.DataDir))
	cfg.Log.Topic = fmt.Sprintf("test-%016x", h.Sum64())
	cfg.Log.Partitions, cfg.Log.ReplicationFactor = 3, 3
}

// needsEmbedded skips a test that injects faults into the embedded broker
// when the tests run on a cluster.
func needsEmbedded(t *testing.T, svc *service.Service) {
	t.Helper()
	if svc.Broker == nil {
		t.Skip("injects faults into the embedded broker; FORKLAB_TEST_BROKERS runs on a cluster")
	}
}

func serveForever(dir string) {
	// Snapshots as often as FORKLAB_TEST_SNAPSHOT_RECORDS says (-1: off),
	// so that a test can kill the service in the middle of one. The log's
	// events go to stderr, one per line, for the tests to watch.
	every, _ := strconv.Atoi(os.Getenv("FORKLAB_TEST_SNAPSHOT_RECORDS"))
	cfg := service.Config{
		Addr: "127.0.0.1:0", DataDir: dir,
		Log: kafkalog.Config{SnapshotRecords: every, SnapshotMinInterval: time.Millisecond,
			Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }},
		Server: server.Config{LongPollTimeout: time.Second},
	}
	onCluster(&cfg)
	svc, err := service.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	if svc.Broker != nil {
		fmt.Fprintf(os.Stderr, "journal: produced again %d records\n", svc.Broker.Recovered)
	}
	fmt.Println("URL", svc.URL)
	select {}
}

// startService starts an in-process service on a fresh or existing data
// directory (no fsync: these tests do not crash the machine).
func startService(t testing.TB, dir string) *service.Service {
	t.Helper()
	return startServiceSnapshots(t, dir, 0)
}

// startServiceSnapshots is startService with kafkalog.Config's
// SnapshotRecords (0: the default, -1: no snapshots, every start rebuilds).
func startServiceSnapshots(t testing.TB, dir string, snapshotRecords int) *service.Service {
	t.Helper()
	cfg := service.Config{
		Addr: "127.0.0.1:0", DataDir: dir, NoSync: true,
		Log:    kafkalog.Config{Logf: func(string, ...any) {}, SnapshotRecords: snapshotRecords},
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	}
	onCluster(&cfg)
	svc, err := service.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start service: %v", err)
	}
	return svc
}

func stopService(t testing.TB, svc *service.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc.Close(ctx)
}

// serverProcess is the service running in a child process.
type serverProcess struct {
	cmd *exec.Cmd
	url string
	// events receives the log's event lines (stderr), when asked for.
	events chan string
}

// startProcess runs this test binary as a server on dir and waits for its
// URL. env adds environment variables (FORKLAB_TEST_SNAPSHOT_RECORDS).
func startProcess(t *testing.T, dir string, env ...string) *serverProcess {
	t.Helper()
	p := launch(t, dir, env...)
	select {
	case p.url = <-p.urlCh:
	case <-time.After(60 * time.Second):
		t.Fatal("server process did not start")
	}
	return p.serverProcess
}

// launching is a server process started but not yet listening.
type launching struct {
	*serverProcess
	urlCh chan string
}

// launch starts the server process without waiting for it.
func launch(t *testing.T, dir string, env ...string) launching {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "FORKLAB_TEST_SERVE="+dir), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{cmd: cmd, events: make(chan string, 1<<16)}
	t.Cleanup(func() { p.kill() })
	go func() {
		sc := bufio.NewScanner(errs)
		for sc.Scan() {
			select {
			case p.events <- sc.Text():
			default: // nobody is watching: drop
			}
		}
	}()
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "URL "); ok {
				got <- u
			}
		}
	}()
	return launching{p, got}
}

// waitEvent waits for a log event line containing s; it drains the lines
// before it.
func (p *serverProcess) waitEvent(t *testing.T, s string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line := <-p.events:
			if strings.Contains(line, s) {
				return line
			}
		case <-deadline:
			t.Fatalf("no %q from the server within %s", s, within)
		}
	}
}

// kill sends SIGKILL: no shutdown code runs.
func (p *serverProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}
