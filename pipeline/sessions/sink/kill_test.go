package sink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/client"
)

// TestMain runs a sink instead of the tests when the random-kill test
// starts this binary as its child (FORKLAB_SINK_CHILD holds its config).
func TestMain(m *testing.M) {
	if spec := os.Getenv("FORKLAB_SINK_CHILD"); spec != "" {
		os.Exit(childSink(spec))
	}
	os.Exit(m.Run())
}

// childSpec configures a child sink.
type childSpec struct {
	Brokers        []string
	Out, Prefix    string
	Follow         bool
	RotateRecords  int
	RotateInterval time.Duration
	// KillAt and KillN: the child sends itself SIGKILL the KillN-th time a
	// commit reaches the point KillAt.
	KillAt string
	KillN  int
}

func childSink(spec string) int {
	var cs childSpec
	if err := json.Unmarshal([]byte(spec), &cs); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	cfg := Config{Brokers: cs.Brokers, Out: cs.Out, Prefix: cs.Prefix, Follow: cs.Follow,
		RotateRecords: cs.RotateRecords, RotateInterval: cs.RotateInterval,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	if cs.KillAt != "" {
		var mu sync.Mutex
		n := 0
		cfg.testHook = func(p string) error {
			mu.Lock()
			defer mu.Unlock()
			if p == cs.KillAt {
				if n++; n == cs.KillN {
					fmt.Fprintln(os.Stderr, "KILLED AT", p)
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {}
				}
			}
			return nil
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sink:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "DONE files=%d rewritten=%d differing=%d\n", rep.Files, rep.Rewritten, len(rep.Differing))
	return 0
}

// TestSinkExactlyOnceUnderKills kills a sink with SIGKILL again and again —
// at random moments, and at each step of a commit: after a file's rename,
// after all renames before the state, after the state — while writers
// append to the log (JSON batches, forks, a stream deleted and created
// again) on two partitions, and starts it again each time with other
// rotation settings, following or one-shot. Every file, once it appears,
// must never change or vanish; a batch cut short must be written again with
// the same bytes. At the end one more run catches up and the union of the
// files must hold every event of every stream exactly once, in offset order,
// as the log serves it. FORKLAB_SINK_KILLS sets the number of kills (make
// sink-soak runs 400).
func TestSinkExactlyOnceUnderKills(t *testing.T) {
	kills := 20
	if s := os.Getenv("FORKLAB_SINK_KILLS"); s != "" {
		var err error
		if kills, err = strconv.Atoi(s); err != nil {
			t.Fatalf("FORKLAB_SINK_KILLS=%q", s)
		}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d kills", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 1))
	began := time.Now()
	svc := startLog(t, t.TempDir(), 2)
	c := client.New(svc.URL)
	ctx, stopWriters := context.WithCancel(context.Background())
	defer stopWriters()
	var appended atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := writeLoad(ctx, c, g, seed, &appended); err != nil && ctx.Err() == nil {
				errc <- err
			}
		}()
	}

	out := t.TempDir()
	seen := map[string][32]byte{}
	checkFiles := func(stage string) {
		t.Helper()
		now := map[string][32]byte{}
		filepath.WalkDir(filepath.Join(out, Dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				now[p] = sha256.Sum256(b)
			}
			return err
		})
		for p, h := range seen {
			if h2, ok := now[p]; !ok {
				t.Fatalf("%s: %s vanished", stage, p)
			} else if h2 != h {
				t.Fatalf("%s: %s changed", stage, p)
			}
		}
		seen = now
	}
	points := []string{"file-renamed", "files-durable", "committed"}
	var atPoint, atRandom, redone int
	for i := 0; i < kills; i++ {
		cs := childSpec{Brokers: svc.Brokers, Out: out, Prefix: "k/", Follow: rng.IntN(4) != 0,
			RotateRecords: 3 + rng.IntN(40), RotateInterval: time.Duration(20+rng.IntN(150)) * time.Millisecond}
		// Every third child kills itself at a step of its n-th commit;
		// the others are killed from outside at a random moment.
		wait := time.Duration(20+rng.IntN(250)) * time.Millisecond
		if i%3 == 0 {
			cs.KillAt, cs.KillN = points[rng.IntN(len(points))], 1+rng.IntN(2)
			cs.Follow, wait = true, 3*time.Second
		}
		spec, _ := json.Marshal(cs)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FORKLAB_SINK_CHILD="+string(spec))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-time.After(wait):
			cmd.Process.Signal(syscall.SIGKILL)
			err = <-exited
		}
		log := stderr.String()
		killed := cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled()
		switch {
		case killed && strings.Contains(log, "KILLED AT"):
			atPoint++
		case killed:
			atRandom++
		case err != nil:
			t.Fatalf("kill %d: sink exited with %v:\n%s", i, err, log)
		}
		if strings.Contains(log, "exists with other bytes") {
			t.Fatalf("kill %d: a batch made again differs from its file:\n%s", i, log)
		}
		redone += strings.Count(log, "cut short before its commit")
		checkFiles(fmt.Sprintf("after kill %d", i))
		select {
		case err := <-errc:
			t.Fatalf("writer: %v", err)
		default:
		}
	}
	stopWriters()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("writer: %v", err)
	}
	// Catch up, then compare.
	rep := run(t, Config{Brokers: svc.Brokers, Out: out, Prefix: "k/", RotateRecords: 1000})
	if len(rep.Differing) != 0 {
		t.Fatalf("final run: %+v", rep)
	}
	checkFiles("after the final run")
	streams, events := compareWithLog(t, c, out, "k/")
	var temps []string
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			temps = append(temps, p)
		}
		return err
	})
	if len(temps) > 0 {
		t.Fatalf("temporary files left: %v", temps)
	}
	t.Logf("%d kills (%d at a commit step, %d at random moments, the rest finished first); %d batches written again after a kill; "+
		"%d files; %d streams, %d events compared with the log (%d appends); %s",
		kills, atPoint, atRandom, redone, len(seen), streams, events, appended.Load(), time.Since(began).Round(time.Millisecond))
	if kills >= 12 && (atPoint == 0 || atRandom == 0 || redone == 0) {
		t.Fatalf("the kills did not land: %d at commit steps, %d at random, %d batches redone", atPoint, atRandom, redone)
	}
}

// writeLoad appends to streams k/wG/sJ.N until ctx ends: single events and
// batches, a fork of a stream every 50 appends (which gets an event of its
// own), a stream closed and replaced by the next N every 150 appends (so
// that forks, which copy their source's events, stay cheap over a long
// soak), and for writer 0 a stream deleted and created again
// (k/w0/again). It closes its streams when ctx ends.
func writeLoad(ctx context.Context, c *client.Client, g int, seed uint64, n *atomic.Int64) error {
	bg := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(g)+2))
	apps := make([]*client.Appender, 2)
	names := make([]string, 2)
	count := make([]int, 2)
	next := 0
	open := func(j int) error {
		names[j] = fmt.Sprintf("k/w%d/s%d.%d", g, j, next)
		next++
		if _, _, err := c.Create(bg, names[j], client.CreateOptions{ContentType: js}); err != nil {
			return err
		}
		apps[j], count[j] = c.NewAppender(names[j], "w", 0, js), 0
		return nil
	}
	for j := range 2 {
		if err := open(j); err != nil {
			return err
		}
	}
	forks := 0
	for i := 0; ctx.Err() == nil; i++ {
		j := rng.IntN(2)
		body := fmt.Sprintf(`{"w":%d,"s":%d,"i":%d}`, g, j, i)
		if rng.IntN(4) == 0 {
			body = fmt.Sprintf(`[{"w":%d,"s":%d,"i":%d,"a":0},{"w":%d,"s":%d,"i":%d,"a":1}]`, g, j, i, g, j, i)
		}
		r, err := apps[j].Append(bg, []byte(body))
		if err != nil {
			return err
		}
		n.Add(1)
		count[j]++
		if i%50 == 49 {
			child := fmt.Sprintf("%s/f%d", names[j], forks)
			forks++
			if _, err := c.Fork(bg, child, names[j], client.ForkOptions{At: r.Next}); err != nil {
				return err
			}
			fa := c.NewAppender(child, "w", 0, js)
			if _, err := fa.Append(bg, []byte(fmt.Sprintf(`{"fork":%d}`, forks))); err != nil {
				return err
			}
		}
		if count[j] == 150 {
			if _, err := apps[j].Close(bg, []byte(`{"closed":true}`)); err != nil {
				return err
			}
			if err := open(j); err != nil {
				return err
			}
		}
		if g == 0 && (i == 30 || i == 60) {
			// A stream deleted and created again under its name.
			again := "k/w0/again"
			if i == 60 {
				if err := c.Delete(bg, again); err != nil {
					return err
				}
			}
			if _, _, err := c.Create(bg, again, client.CreateOptions{ContentType: js, Data: []byte(fmt.Sprintf(`{"generation_at":%d}`, i))}); err != nil {
				return err
			}
			if _, err := c.NewAppender(again, "w", 0, js).Append(bg, []byte(`{"after_create":true}`)); err != nil {
				return err
			}
		}
		time.Sleep(time.Duration(2+rng.IntN(4)) * time.Millisecond)
	}
	for _, a := range apps {
		if _, err := a.Close(bg, []byte(`{"closed":true}`)); err != nil {
			return err
		}
	}
	return nil
}
