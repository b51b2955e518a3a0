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
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	"github.com/forklab/forklab/pipeline/world"
	_ "github.com/forklab/forklab/pipeline/worlds/counter" // registers the counter world
	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

func startLog(t testing.TB, addr, dir string) *service.Service {
	t.Helper()
	return sessiontest.StartLogWith(t, service.Config{
		Addr: addr, DataDir: dir, NoSync: true,
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	})
}

// start returns the session_start of a session of the registered world.
func start(t testing.TB, worldName string, p world.Params, m fork.Model, seed uint64) session.Event {
	t.Helper()
	e, err := session.NewStart(worldName, p, m, seed)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// noisy is the start of a noisy counter session.
func noisy(t testing.TB, seed uint64) session.Event {
	return start(t, "counter", world.Params{"p_stall": 0.1, "p_obs_noise": 0.05}, fork.Model{Temperature: 0.2, NoTool: 0.5}, seed)
}

// tiny is the start of a session of the test-only world.
func tiny(t testing.TB, seed uint64) session.Event {
	return start(t, sessiontest.Name, world.Params{"goal": 5}, fork.Model{Temperature: 0.15, NoTool: 0.4}, seed)
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

// For the counter and for a world registered only in this test.
func TestUninterruptedAndResumedSessionsWriteTheSameEvents(t *testing.T) {
	sessiontest.Register(t)
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	for i := range 8 {
		seed := uint64(i)
		start := noisy(t, seed)
		if i%2 == 1 {
			start = tiny(t, seed)
		}
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
	start := noisy(t, 3)
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
	start := noisy(t, 4)
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
	begin := start(t, "counter", nil, fork.Model{NoTool: 0.5}, 7)
	if _, err := (&Worker{Log: c, Stream: "done", Start: &begin}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Head(ctx, "done")
	if _, err := (&Worker{Log: c, Stream: "done", Start: &begin}).Run(ctx); !errors.Is(err, ErrFinished) {
		t.Fatalf("finished session: got %v", err)
	}
	other := begin
	other.Seed = new(uint64)
	*other.Seed = 8
	c.Create(ctx, "half", client.CreateOptions{ContentType: ContentType})
	c.NewAppender("half", "x", 0, ContentType).Append(ctx, begin.Encode())
	if _, err := (&Worker{Log: c, Stream: "half", Start: &other}).Run(ctx); !errors.Is(err, ErrForeign) {
		t.Fatalf("foreign session: got %v", err)
	}
	// Streams the fold refuses: the worker stops before writing anything.
	oldVersion := begin
	oldVersion.WorldVersion = "1"
	events, _ := session.Uninterrupted(begin)
	liar := events[2] // the tool_result of turn 1, with an observation the world never made
	liar.Obs = []byte(`{"obs":4,"steps":1}`)
	refused := map[string]client.Info{"done": before}
	for name, tc := range map[string]struct {
		events [][]byte
		want   string
	}{
		"junk":        {[][]byte{[]byte(`{"type":"chat","text":"hello"}`)}, `not a session event`},
		"old-version": {[][]byte{oldVersion.Encode()}, `world counter version "1"`},
		"liar":        {[][]byte{begin.Encode(), events[1].Encode(), liar.Encode()}, `observation {"obs":4,"steps":1}, the replay {"obs":`},
	} {
		c.Create(ctx, name, client.CreateOptions{ContentType: ContentType})
		app := c.NewAppender(name, "x", 0, ContentType)
		for _, e := range tc.events {
			if _, err := app.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		refused[name], _ = c.Head(ctx, name)
		_, err := (&Worker{Log: c, Stream: name, Start: &begin}).Run(ctx)
		if !errors.Is(err, session.ErrFold) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: got %v, want a fold error containing %q", name, err, tc.want)
		}
		// Resuming without a session_start of its own refuses it too.
		if _, err := (&Worker{Log: c, Stream: name}).Run(ctx); !errors.Is(err, session.ErrFold) {
			t.Fatalf("%s resumed as it is: got %v", name, err)
		}
	}
	if _, err := (&Worker{Log: c, Stream: "nothing-here"}).Run(ctx); !errors.Is(err, ErrNoSession) {
		t.Fatalf("resuming a missing session: got %v", err)
	}
	for name, b := range refused {
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
	start := noisy(t, 9)
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

// Worker.retry, the loop every request of agent run and sweep --from-log
// goes through: a transient error (no answer, a 503) is retried with
// backoff until it succeeds, counting the attempts; one that lasts is
// given up after RetryFor with a message saying so, soon after, not
// before; a 4xx is not retried; a cancelled context ends it at the next
// attempt.
func TestWorkerRetryLoop(t *testing.T) {
	unavailable := &client.StatusError{Code: 503}
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		fail      int   // attempts that fail before one succeeds; -1: all
		err       error // what they fail with
		retryFor  time.Duration
		wantCalls int // exactly; 0: at least 2
		wantErr   string
	}{
		{"succeeds on the fourth attempt", 3, unavailable, time.Minute, 4, ""},
		{"no answer for longer than RetryFor", -1, refused, 400 * time.Millisecond, 0, "read s: the session log did not answer for 400ms: dial tcp 127.0.0.1:1: connect: connection refused"},
		{"a 404 is not retried", -1, &client.StatusError{Code: 404}, time.Minute, 1, "404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &Worker{RetryFor: c.retryFor}
			calls := 0
			start := time.Now()
			err := w.retry(ctx, "read s", func() error {
				calls++
				if c.fail < 0 || calls <= c.fail {
					return c.err
				}
				return nil
			})
			took := time.Since(start)
			switch {
			case c.wantErr == "" && err != nil, c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("err %v, want %q", err, c.wantErr)
			case c.wantCalls > 0 && calls != c.wantCalls, c.wantCalls == 0 && calls < 2:
				t.Fatalf("%d attempts, want %d", calls, c.wantCalls)
			case took > 10*time.Second:
				t.Fatalf("took %s", took)
			case c.fail < 0 && c.wantCalls == 0 && took < c.retryFor:
				t.Fatalf("gave up after %s, before RetryFor %s", took, c.retryFor)
			}
		})
	}
	cctx, cancel := context.WithCancel(ctx)
	calls := 0
	err := (&Worker{RetryFor: time.Minute}).retry(cctx, "read s", func() error {
		if calls++; calls == 2 {
			cancel()
		}
		return refused
	})
	if err == nil || calls != 2 {
		t.Fatalf("cancelled: err %v after %d attempts, want an error after 2", err, calls)
	}
}
