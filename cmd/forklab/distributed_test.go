package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/netcut"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// waitTCP waits until addr accepts connections.
func waitTCP(tb testing.TB, addr string) {
	tb.Helper()
	for range 600 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%s did not come up", addr)
}

// startBroker runs forklab log serve (the embedded Kafka-protocol broker)
// as its own process and returns its Kafka address.
func startBroker(t *testing.T) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(forklabBin, "log", "serve", "--addr", "127.0.0.1:"+freePort(t), "--kafka-port", port, "--data-dir", t.TempDir(), "--quiet")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	addr := "127.0.0.1:" + port
	waitTCP(t, addr)
	return addr
}

// startCluster runs forklab kafka serve, the 3-broker development cluster
// (topics replicated across the brokers, min.insync.replicas 2), as its own
// process and returns the bootstrap addresses.
func startCluster(t *testing.T) string {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "kafka.addrs")
	cmd := exec.Command(forklabBin, "kafka", "serve", "--brokers", "3", "--addr-file", addrFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	for range 600 {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			addrs := strings.TrimSpace(string(b))
			waitTCP(t, strings.Split(addrs, ",")[0])
			return addrs
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("forklab kafka serve did not come up")
	return ""
}

// assertReplicated fails unless every partition of topic has 3 replicas.
func assertReplicated(t *testing.T, brokers, topic string) {
	t.Helper()
	parts, err := scaleout.TopicReplicas(context.Background(), strings.Split(brokers, ","), topic)
	if err != nil || len(parts) == 0 {
		t.Fatalf("topic %s: %v %v", topic, parts, err)
	}
	for p, n := range parts {
		if n != 3 {
			t.Fatalf("topic %s partition %d has %d replicas, want 3", topic, p, n)
		}
	}
}

// proc is a forklab process the test started.
type proc struct {
	name string
	cmd  *exec.Cmd
	errb *bytes.Buffer
	done chan struct{}
	err  error
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(forklabBin, args...), errb: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.errb
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// runningAttempts lists the running attempts in out's staging directory
// whose heartbeat is fresh: worker member id → attempt file.
func runningAttempts(out string) map[string]string {
	dir := filepath.Join(sweep.StagingDir(out), ".forklab-units", "attempts")
	found := map[string]string{}
	units, _ := os.ReadDir(dir)
	for _, u := range units {
		files, _ := os.ReadDir(filepath.Join(dir, u.Name()))
		for _, f := range files {
			p := filepath.Join(dir, u.Name(), f.Name())
			var a struct{ Worker, State string }
			b, err := os.ReadFile(p)
			fi, serr := os.Stat(p)
			if err != nil || serr != nil || json.Unmarshal(b, &a) != nil || a.State != "running" || time.Since(fi.ModTime()) > time.Second {
				continue
			}
			found[a.Worker] = p
		}
	}
	return found
}

// chaosPlan is how hard the chaos driver hits a distributed sweep.
type chaosPlan struct {
	// spec is the sweep's flags (seeds, world or agent, …).
	spec []string
	// kills is how many workers it SIGKILLs mid-unit (each replaced by a
	// new one); stops how many it stops for good (SIGTERM: they finish
	// their unit and leave), each after a kill.
	kills, stops int
	// coordinatorKill: SIGKILL the coordinator once, after the first
	// worker kill, and start it again.
	coordinatorKill bool
	// report: compare forklab report's output too (slow for big sweeps;
	// identical files imply it).
	report bool
	// cluster runs it on forklab kafka serve's 3-broker cluster instead
	// of forklab log serve's embedded broker.
	cluster bool
	// faults puts the broker (forklab kafka serve, brokers of them,
	// persisted to a data directory) behind netcut proxies it advertises,
	// SIGKILLs it once mid-sweep and starts it again, then cuts the
	// network for cutFor.
	faults  bool
	brokers int
	cutFor  time.Duration
	// churn SIGKILLs a worker (mid-unit or not, replaced at once) every
	// churnEvery, churn times in all, from the first kill on.
	churn      int
	churnEvery time.Duration
	// load keeps that many goroutines busy on the CPU while the sweep
	// runs.
	load int
}

// The distributed sweep under chaos, every unit allowed a single failed
// attempt (--max-attempts 1: a kill counted as a failure would turn its
// unit into error rows): 3 worker processes; the driver SIGKILLs workers
// while they are in the middle of a unit (the unit's attempt record is
// left "running", the proof), starts new ones, stops some for good, kills
// and restarts the coordinator once, SIGKILLs the broker (its data
// directory kept) and starts it again, cuts the network for longer than
// the session timeout, and kills a worker every second for a while, all
// with the CPU busy. Every unit is finished, none lost, none failed: the
// files are the single-process sweep's byte for byte, the manifest lists
// the same rows and checksums and no error. FORKLAB_CHAOS_DISTRIBUTED=1
// (make chaos-distributed) runs the long version on 3 brokers behind 3
// proxies: 12 kills mid-unit, 2 stops, 40 kills a second apart, and the
// same report. Before issue 25, the coordinator stopped at the broker's
// restart ("the results topic readers stopped"), workers exited on
// "fetch: [27] Rebalance In Progress" and "i/o timeout", and each kill
// was a failed attempt.
func TestDistributedChaos(t *testing.T) {
	plan := chaosPlan{spec: []string{"--seeds", "0:1200000", "--unit-seeds", "50000", "--p-stall", "0.1", "--temperature", "0.05"},
		kills: 3, stops: 1, coordinatorKill: true, faults: true, brokers: 1, cutFor: 7 * time.Second, churn: 4, churnEvery: time.Second, load: 2}
	if os.Getenv("FORKLAB_CHAOS_DISTRIBUTED") != "" {
		plan = chaosPlan{spec: []string{"--seeds", "0:12000000", "--p-stall", "0.1", "--temperature", "0.05"}, kills: 12, stops: 2,
			coordinatorKill: true, report: true, faults: true, brokers: 3, cutFor: 10 * time.Second, churn: 40, churnEvery: time.Second, load: 4}
	}
	runChaos(t, plan)
}

// The same through an external agent, on the 3-broker cluster: the Python
// example (the seed's reference core over forklab-agent/1), 2 agent
// processes per unit, 30,000 seeds in units of 2,500; workers SIGKILLed
// mid-unit take their agents with them.
// The agent journals every seed it finished in the output directory, so a
// unit redone pays for none of them twice; the files are the
// single-process agent sweep's. FORKLAB_CHAOS_DISTRIBUTED=1: 10 kills.
func TestDistributedAgentChaos(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	plan := chaosPlan{spec: []string{"--agent", "python3 ../../examples/agents/seed_core.py", "--parallel", "2",
		"--seeds", "0:30000", "--unit-seeds", "2500", "--fork-at", "2,3"}, kills: 2, stops: 1, cluster: true}
	if os.Getenv("FORKLAB_CHAOS_DISTRIBUTED") != "" {
		plan.spec[slices.Index(plan.spec, "--seeds")+1] = "0:400000"
		plan.spec[slices.Index(plan.spec, "--unit-seeds")+1] = "5000"
		plan.kills, plan.stops, plan.report = 10, 2, true
	}
	runChaos(t, plan)
}

// faultyKafka is forklab kafka serve as its own process, its brokers
// behind netcut proxies they advertise, persisted to a data directory so
// that a SIGKILLed cluster starts again with its topics, records and
// groups' offsets.
type faultyKafka struct {
	t        *testing.T
	args     []string
	addrFile string
	proc     *proc
	proxies  []*netcut.Proxy
}

func startFaultyKafka(t *testing.T, brokers int) *faultyKafka {
	t.Helper()
	var ports, adv []string
	k := &faultyKafka{t: t}
	for range brokers {
		port := freePort(t)
		p, err := netcut.Start("0", "127.0.0.1:"+port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		ports, adv, k.proxies = append(ports, port), append(adv, p.Addr()), append(k.proxies, p)
	}
	k.addrFile = filepath.Join(t.TempDir(), "kafka.addrs")
	k.args = []string{"kafka", "serve", "--brokers", strconv.Itoa(brokers), "--ports", strings.Join(ports, ","),
		"--advertise", strings.Join(adv, ","), "--data-dir", t.TempDir(), "--addr-file", k.addrFile}
	k.start()
	t.Cleanup(func() { k.proc.cmd.Process.Signal(syscall.SIGTERM); <-k.proc.done })
	return k
}

func (k *faultyKafka) start() {
	k.t.Helper()
	os.Remove(k.addrFile) // a SIGKILLed cluster leaves it
	k.proc = startProc(k.t, "kafka serve", k.args...)
	k.proc.waitUp(k.t, func() bool {
		b, err := os.ReadFile(k.addrFile)
		return err == nil && len(b) > 0
	})
}

// waitUp waits up to a minute until ready, failing the test if p exits
// first.
func (p *proc) waitUp(t *testing.T, ready func() bool) {
	t.Helper()
	for range 1200 {
		if ready() {
			return
		}
		if p.exited() {
			t.Fatalf("forklab %s: %v: %s", p.name, p.err, p.errb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("forklab %s did not come up: %s", p.name, p.errb)
}

// kill SIGKILLs the cluster's process, waits a moment, and starts it again
// on the same ports and data directory.
func (k *faultyKafka) kill(down time.Duration) {
	k.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-k.proc.done
	time.Sleep(down)
	k.start()
}

func (k *faultyKafka) cut(d time.Duration) {
	for _, p := range k.proxies {
		p.Cut()
	}
	time.Sleep(d)
	for _, p := range k.proxies {
		p.Restore()
	}
}

func (k *faultyKafka) brokers() string {
	var a []string
	for _, p := range k.proxies {
		a = append(a, p.Addr())
	}
	return strings.Join(a, ",")
}

// burn keeps n goroutines busy on the CPU until the returned stop is
// called.
func burn(n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := uint64(1)
			for {
				select {
				case <-done:
					return
				default:
				}
				for range 100000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// runChaos runs plan and checks the result against the single-process sweep.
func runChaos(t *testing.T, plan chaosPlan) {
	began := time.Now()
	var broker string
	var kafka *faultyKafka
	switch {
	case plan.faults:
		kafka = startFaultyKafka(t, plan.brokers)
		broker = kafka.brokers()
	case plan.cluster:
		broker = startCluster(t)
	default:
		broker = startBroker(t)
	}
	spec := plan.spec
	single := filepath.Join(t.TempDir(), "single")
	mustRun(t, append([]string{"sweep", "--out", single, "-q"}, spec...)...)

	out := filepath.Join(t.TempDir(), "out")
	attempts := "20"
	if plan.faults {
		attempts = "1" // nothing but the unit may fail it
	}
	coordArgs := append([]string{"sweep", "--distributed", "--brokers", broker, "--queue", "chaos", "--partitions", "12",
		"--max-attempts", attempts, "--lease", "2s", "--out", out}, spec...)
	t.Logf("%s: the single-process sweep is done", time.Since(began).Round(time.Millisecond))
	stopBurn := burn(plan.load)
	defer stopBurn()
	coord := startProc(t, "coordinator", coordArgs...)
	var (
		mu      sync.Mutex
		workers = map[string]*proc{}
		nextID  int
	)
	startWorker := func() {
		id := fmt.Sprintf("w%d", nextID)
		nextID++
		workers[id] = startProc(t, id, "worker", "--brokers", broker, "--queue", "chaos", "--id", id, "--parallel", "1",
			"--session-timeout", "6s", "-q")
	}
	mu.Lock()
	for range 3 {
		startWorker()
	}
	mu.Unlock()
	defer func() {
		for _, w := range workers {
			w.cmd.Process.Kill()
			<-w.done
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	kills, stops, churned, coordKilled := 0, 0, 0, false
	brokerKilled, cut := false, false
	faultDone := make(chan string, 2)
	var killed []string // attempt files left running by a kill
	next := time.Now().Add(300 * time.Millisecond)
	var nextChurn time.Time
	deadline := time.Now().Add(15 * time.Minute)
	for !coord.exited() {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not finish in 15 minutes; coordinator: %s", coord.errb)
		}
		time.Sleep(20 * time.Millisecond)
		select {
		case what := <-faultDone:
			t.Logf("%s: %s", time.Since(began).Round(time.Millisecond), what)
			if what == "broker restarted" {
				go func() { time.Sleep(2 * time.Second); kafka.cut(plan.cutFor); faultDone <- "network restored" }()
			}
			cut = cut || what == "network restored"
		default:
		}
		if plan.churn > churned && !nextChurn.IsZero() && time.Now().After(nextChurn) {
			// Any worker, mid-unit or not, replaced at once.
			var ids []string
			for id, w := range workers {
				if !w.exited() {
					ids = append(ids, id)
				}
			}
			if len(ids) > 0 {
				slices.Sort(ids)
				id := ids[rng.IntN(len(ids))]
				workers[id].cmd.Process.Signal(syscall.SIGKILL)
				<-workers[id].done
				delete(workers, id)
				startWorker()
				churned++
			}
			nextChurn = time.Now().Add(plan.churnEvery)
		}
		if kills >= plan.kills && stops >= plan.stops || time.Now().Before(next) {
			continue
		}
		// A worker in the middle of a unit.
		running := runningAttempts(out)
		var victims []string
		for member, file := range running {
			id := strings.TrimSuffix(member, "-0")
			if w, ok := workers[id]; ok && !w.exited() {
				victims = append(victims, id+"\x00"+file)
			}
		}
		if len(victims) == 0 {
			continue
		}
		slices.Sort(victims)
		id, file, _ := strings.Cut(victims[rng.IntN(len(victims))], "\x00")
		w := workers[id]
		if kills < plan.kills {
			w.cmd.Process.Signal(syscall.SIGKILL)
			<-w.done
			if b, err := os.ReadFile(file); err == nil && bytes.Contains(b, []byte(`"state":"running"`)) {
				kills++
				killed = append(killed, file)
			}
			delete(workers, id)
			startWorker()
			if plan.coordinatorKill && !coordKilled {
				coordKilled = true
				coord.cmd.Process.Signal(syscall.SIGKILL)
				<-coord.done
				coord = startProc(t, "coordinator", coordArgs...)
			}
			if plan.faults && !brokerKilled {
				brokerKilled = true
				go func() { kafka.kill(2 * time.Second); faultDone <- "broker restarted" }()
			}
			if plan.churn > 0 && nextChurn.IsZero() {
				nextChurn = time.Now().Add(plan.churnEvery)
			}
		} else {
			// Stopped for good: it finishes its unit and leaves; one
			// worker more is started only if fewer than two are left.
			w.cmd.Process.Signal(syscall.SIGTERM)
			stops++
			left := 0
			for _, o := range workers {
				if !o.exited() && o != w {
					left++
				}
			}
			if left < 2 {
				startWorker()
			}
		}
		next = time.Now().Add(time.Duration(300+rng.IntN(700)) * time.Millisecond)
	}
	if brokerKilled {
		for !cut {
			select {
			case what := <-faultDone:
				cut = what == "network restored"
			case <-time.After(time.Minute):
				t.Fatal("the network was not restored")
			}
		}
	}
	if coord.err != nil {
		t.Fatalf("coordinator: %v: %s", coord.err, coord.errb)
	}
	if plan.coordinatorKill && !strings.Contains(coord.errb.String(), "picking up sweep") {
		t.Errorf("the restarted coordinator did not pick the sweep up: %s", coord.errb)
	}
	if kills < plan.kills || stops < plan.stops || churned < plan.churn {
		t.Fatalf("the sweep finished after %d of %d kills mid-unit, %d of %d stops and %d of %d kills a second apart: make it longer",
			kills, plan.kills, stops, plan.stops, churned, plan.churn)
	}
	// Every killed attempt was left mid-unit, and was redone.
	for _, f := range killed {
		b, _ := os.ReadFile(f)
		if len(b) > 0 {
			t.Errorf("attempt record %s survived the publish", f)
		}
	}
	for id, w := range workers {
		if !w.exited() {
			w.cmd.Process.Signal(syscall.SIGTERM)
		}
		<-w.done
		if w.err != nil && w.cmd.ProcessState.ExitCode() != -1 {
			t.Errorf("worker %s: %v: %s", id, w.err, w.errb)
		}
	}
	t.Logf("%s: the distributed sweep is done: %d workers killed mid-unit, %d more a second apart, %d stopped, coordinator killed and restarted: %v, broker killed and restarted: %v, network cut for %s: %v; %d workers started in all",
		time.Since(began).Round(time.Millisecond), kills, churned, stops, coordKilled, brokerKilled, plan.cutFor, cut, nextID)
	stopBurn()
	sameSweep(t, single, out, plan.report)
	if plan.cluster || plan.faults && plan.brokers == 3 {
		assertReplicated(t, broker, "chaos.units")
		assertReplicated(t, broker, "chaos.results")
	}
	m, err := sweep.ReadManifest(out)
	if err != nil || m.Errors != 0 {
		t.Fatalf("manifest errors %d (%v), want none", m.Errors, err)
	}
}

// A unit whose world kills the process running it (the faulty world's
// crash=exit) is tried --max-attempts times and written as error rows
// naming each crash: the worker's supervising process sees its member
// process die mid-unit, marks the attempt failed with the exit status and
// the process's last words, and starts the member again. The workers stay
// up; the other units finish as the counter's, and the sweep completes
// (exit status 5: its numbers are incomplete). On the 3-broker cluster.
func TestDistributedPoisonUnitKillsWorkers(t *testing.T) {
	broker := startCluster(t)
	out := filepath.Join(t.TempDir(), "out")
	coord := startProc(t, "coordinator", "sweep", "--distributed", "--brokers", broker, "--queue", "poison", "--partitions", "4",
		"--max-attempts", "2", "--lease", "1s", "--out", out, "--world", "faulty", "--param", "crash_seed=120000", "--param", "crash=exit",
		"--seeds", "0:250000", "--unit-seeds", "50000", "-q")
	var workers []*proc
	defer func() {
		for _, w := range workers {
			w.cmd.Process.Kill()
			<-w.done
		}
	}()
	alive := func() int {
		n := 0
		for _, w := range workers {
			if !w.exited() {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Minute)
	for !coord.exited() {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not finish; coordinator: %s", coord.errb)
		}
		// A supervisor: keep two workers up.
		for alive() < 2 {
			workers = append(workers, startProc(t, "w", "worker", "--brokers", broker, "--queue", "poison", "--parallel", "1",
				"--session-timeout", "6s", "-q"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The sweep is published, and said incomplete: 50,000 of 250,000
	// pairs are errors, above the default max error rate of 1%.
	if code := coord.cmd.ProcessState.ExitCode(); code != 5 || !strings.Contains(coord.errb.String(), "INCOMPLETE: 50000 of 250000 pairs (20.00%) are errors") {
		t.Fatalf("coordinator: exit %d: %s", code, coord.errb)
	}
	crashed := 0
	for _, w := range workers {
		if w.exited() {
			t.Errorf("worker exited (%v): the supervisor should have started its member again: %s", w.err, w.errb)
		}
		w.cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
		crashed += strings.Count(w.errb.String(), "crashed in the middle of a unit (exit status 3): its attempt is marked failed; starting it again")
	}
	if len(workers) != 2 || crashed != 2 {
		t.Errorf("%d workers started, %d member processes crashed; want 2 workers and 2 crashes (the attempt limit)", len(workers), crashed)
	}
	got := mustRun(t, "sql", out, `SELECT status, min(seed) AS lo, max(seed) AS hi, count(*) AS pairs, count(label) AS labelled FROM pairs GROUP BY status ORDER BY status`, "--format", "csv")
	// Unit 2 holds seeds 100000:150000.
	want := "status,lo,hi,pairs,labelled\nerror,100000,149999,50000,0\nok,0,249999,200000,200000\n"
	if got != want {
		t.Fatalf("pairs by status:\n%s\nwant:\n%s", got, want)
	}
	reason := mustRun(t, "sql", out, `SELECT DISTINCT error FROM pairs WHERE status = 'error'`, "--format", "csv")
	if !strings.Contains(reason, "unit c0-s000002 failed 2 attempts, the retry limit, and was not run again: attempt 1 (worker ") ||
		strings.Count(reason, "the worker process running it crashed (exit status 3): faulty: seed 120000: exiting") != 2 {
		t.Fatalf("error text: %s", reason)
	}
	counter := filepath.Join(t.TempDir(), "counter")
	mustRun(t, "sweep", "--seeds", "0:250000", "--unit-seeds", "50000", "--out", counter, "-q")
	q := `SELECT seed, fork_step, arm, label FROM pairs WHERE status = 'ok' AND NOT seed BETWEEN 100000 AND 149999 ORDER BY ALL`
	if a, b := mustRun(t, "sql", counter, q, "--format", "csv"), mustRun(t, "sql", out, q, "--format", "csv"); a != b {
		t.Fatal("the units around the poison unit differ from the counter's")
	}
}
