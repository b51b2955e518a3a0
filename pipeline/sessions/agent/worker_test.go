package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

func startLog(t testing.TB, addr, dir string) *service.Service {
	t.Helper()
	svc, err := service.Start(context.Background(), service.Config{
		Addr: addr, DataDir: dir, NoSync: true,
		Log:    kafkalog.Config{Logf: func(string, ...any) {}},
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("start log: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Close(ctx)
	})
	return svc
}

var noisy = func() (counter.Params, fork.Model) {
	p := counter.Default()
	p.PStall, p.PObsNoise = 0.1, 0.05
	return p, fork.Model{Temperature: 0.2, NoTool: 0.5}
}

// expected returns the domain events of an uninterrupted session, computed
// without the log.
func expected(t *testing.T, start session.Event) []string {
	t.Helper()
	events, err := session.Uninterrupted(start)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.Encode())
	}
	return out
}

// logged reads a stream's events, split into domain events and the epochs
// of the incarnation events.
func logged(t *testing.T, c *client.Client, stream string) (domain []string, epochs []int64) {
	t.Helper()
	data, _, err := c.ReadAll(context.Background(), stream, client.Start)
	if err != nil {
		t.Fatal(err)
	}
	events, err := session.DecodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Type == session.TypeIncarnation {
			epochs = append(epochs, *e.Epoch)
			continue
		}
		domain = append(domain, string(e.Encode()))
	}
	return domain, epochs
}

func equalEvents(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events differ from the uninterrupted run:\ngot\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUninterruptedAndResumedSessionsWriteTheSameEvents(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	p, m := noisy()
	ctx := context.Background()
	for seed := uint64(0); seed < 6; seed++ {
		start := session.Start(p, m, seed)
		want := expected(t, start)

		name := fmt.Sprintf("whole-%d", seed)
		res, err := (&Worker{Log: c, Stream: name, Start: &start}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, epochs := logged(t, c, name)
		equalEvents(t, got, want)
		if fmt.Sprint(epochs) != "[0]" || res.Appended != len(want) {
			t.Fatalf("epochs %v, appended %d", epochs, res.Appended)
		}

		// Kill the worker after k events, k = 1, 2, 3, …: every incarnation
		// resumes from the fold and the session ends the same.
		name = fmt.Sprintf("killed-%d", seed)
		for k := 1; ; k++ {
			kctx, kill := context.WithCancel(ctx)
			n := 0
			w := &Worker{Log: c, Stream: name, Start: &start, OnAppend: func(session.Event, string) {
				if n++; n == k {
					kill()
				}
			}}
			_, err := w.Run(kctx)
			kill()
			if errors.Is(err, ErrFinished) {
				break
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("incarnation %d: %v", k, err)
			}
		}
		got, epochs = logged(t, c, name)
		equalEvents(t, got, want)
		if len(epochs) < 3 || epochs[len(epochs)-1] != int64(len(epochs)-1) {
			t.Fatalf("incarnation epochs %v", epochs)
		}
	}
}

// A hung worker that wakes after a successor took over is refused on its
// next append (403 while the session is open, 409 once the successor has
// closed it), and the session's events are those of one uninterrupted run.
func TestZombieIsFenced(t *testing.T) {
	for _, finish := range []bool{false, true} {
		t.Run(fmt.Sprintf("successor finished %t", finish), func(t *testing.T) { zombie(t, finish) })
	}
}

func zombie(t *testing.T, successorFinishes bool) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	p, m := noisy()
	start := session.Start(p, m, 3)
	hang, wake := make(chan struct{}), make(chan struct{})
	var once sync.Once
	zombie := &Worker{Log: c, Stream: "zombie", Start: &start, OnAppend: func(e session.Event, _ string) {
		if e.Type == session.TypeModelTurn {
			once.Do(func() { close(hang); <-wake })
		}
	}}
	errc := make(chan error, 1)
	go func() { _, err := zombie.Run(context.Background()); errc <- err }()
	<-hang
	successor := &Worker{Log: c, Stream: "zombie", Start: &start}
	if !successorFinishes {
		successor.Until = 4 // stop mid-session, the stream still open
	}
	if _, err := successor.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(wake)
	err := <-errc
	if successorFinishes && !errors.Is(err, ErrClosed) || !successorFinishes && !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie: got %v", err)
	}
	if !successorFinishes {
		if !strings.Contains(err.Error(), "epoch 0; the session is at epoch 1") {
			t.Fatalf("zombie error %q lacks the epochs", err)
		}
		if _, err := (&Worker{Log: c, Stream: "zombie", Start: &start}).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got, epochs := logged(t, c, "zombie")
	equalEvents(t, got, expected(t, start))
	if want := map[bool]string{true: "[0 1]", false: "[0 1 2]"}[successorFinishes]; fmt.Sprint(epochs) != want {
		t.Fatalf("epochs %v, want %s", epochs, want)
	}
}

// Two incarnations that chose the same epoch: the one whose incarnation
// event lands second sees another's claim and stops without writing.
func TestSameEpochClaimLosesWithoutWriting(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	p, m := noisy()
	start := session.Start(p, m, 4)
	if _, _, err := c.Create(context.Background(), "race", client.CreateOptions{ContentType: ContentType}); err != nil {
		t.Fatal(err)
	}
	claimed, proceed := make(chan struct{}), make(chan struct{})
	slow := &Worker{Log: c, Stream: "race", Start: &start, afterClaim: func() { close(claimed); <-proceed }}
	errc := make(chan error, 1)
	go func() { _, err := slow.Run(context.Background()); errc <- err }()
	<-claimed
	// The other claimant takes the same epoch and leaves the session open.
	if _, err := (&Worker{Log: c, Stream: "race", Start: &start, Until: 3}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Head(context.Background(), "race")
	close(proceed)
	err := <-errc
	if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "epoch 0 was claimed by another incarnation") {
		t.Fatalf("slow claimant: got %v, want it to find the other claim", err)
	}
	if after, _ := c.Head(context.Background(), "race"); after.Tail != before.Tail {
		t.Fatalf("the losing claimant wrote (tail %s -> %s)", before.Tail, after.Tail)
	}
	if _, err := (&Worker{Log: c, Stream: "race", Start: &start}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := logged(t, c, "race")
	equalEvents(t, got, expected(t, start))
}

func TestFinishedForeignAndCorruptSessions(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	p, m := counter.Default(), fork.Model{NoTool: 0.5}
	start := session.Start(p, m, 7)
	if _, err := (&Worker{Log: c, Stream: "done", Start: &start}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Head(ctx, "done")
	if _, err := (&Worker{Log: c, Stream: "done", Start: &start}).Run(ctx); !errors.Is(err, ErrFinished) {
		t.Fatalf("finished session: got %v", err)
	}
	other := session.Start(p, m, 8)
	c.Create(ctx, "half", client.CreateOptions{ContentType: ContentType})
	c.NewAppender("half", "x", 0, ContentType).Append(ctx, start.Encode())
	if _, err := (&Worker{Log: c, Stream: "half", Start: &other}).Run(ctx); !errors.Is(err, ErrForeign) {
		t.Fatalf("foreign session: got %v", err)
	}
	c.Create(ctx, "junk", client.CreateOptions{ContentType: ContentType})
	c.NewAppender("junk", "x", 0, ContentType).Append(ctx, []byte(`{"type":"chat","text":"hello"}`))
	junkBefore, _ := c.Head(ctx, "junk")
	if _, err := (&Worker{Log: c, Stream: "junk", Start: &start}).Run(ctx); !errors.Is(err, session.ErrFold) {
		t.Fatalf("corrupt session: got %v", err)
	}
	for name, b := range map[string]client.Info{"done": before, "junk": junkBefore} {
		after, _ := c.Head(ctx, name)
		if after.Tail != b.Tail {
			t.Errorf("%s: a refusing worker appended (tail %s -> %s)", name, b.Tail, after.Tail)
		}
	}
}

// A worker started while the log is down retries with backoff and finishes
// once the log comes up.
func TestWorkerWaitsForTheLog(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := client.New("http://" + addr)
	p, m := noisy()
	start := session.Start(p, m, 9)
	var mu sync.Mutex
	var reports []string
	done := make(chan error, 1)
	go func() {
		_, err := (&Worker{Log: c, Stream: "late", Start: &start, RetryFor: 30 * time.Second,
			Logf: func(f string, a ...any) { mu.Lock(); reports = append(reports, fmt.Sprintf(f, a...)); mu.Unlock() }}).Run(context.Background())
		done <- err
	}()
	time.Sleep(700 * time.Millisecond)
	startLog(t, addr, t.TempDir())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || !strings.Contains(reports[0], "session log unavailable") {
		t.Fatalf("no retry reported: %v", reports)
	}
	got, _ := logged(t, c, "late")
	equalEvents(t, got, expected(t, start))
}
