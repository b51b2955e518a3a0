package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// TestAppenderThroughHeldProduce holds Kafka's answer to a produce for a
// second while the service's write timeout is 300 ms: the Appender gets
// a 503, waits its Retry-After and resends the same seq until the service
// answers; the append is in the stream, and in Kafka, once.
func TestAppenderThroughHeldProduce(t *testing.T) {
	svc, err := service.Start(context.Background(), service.Config{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), NoSync: true,
		Log:    kafkalog.Config{Logf: func(string, ...any) {}, WriteTimeout: 300 * time.Millisecond},
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	if _, _, err := c.Create(ctx, "held", client.CreateOptions{ContentType: textPlain}); err != nil {
		t.Fatal(err)
	}
	w := c.NewAppender("held", "p", 0, textPlain)
	if _, err := w.Append(ctx, []byte("a;")); err != nil {
		t.Fatal(err)
	}
	cl := svc.Broker.Cluster()
	var once sync.Once
	cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		first := false
		once.Do(func() { first = true })
		if first {
			cl.SleepControl(func() { time.Sleep(time.Second) })
		} else {
			cl.DropControl()
		}
		return nil, nil, false
	})
	r, err := w.Append(ctx, []byte("b;"))
	if err != nil {
		t.Fatalf("append through a held produce: %v", err)
	}
	if !r.Duplicate || r.Seq != 1 {
		t.Fatalf("append through a held produce: %+v, want the held write found as a duplicate of seq 1", r)
	}
	if _, err := w.Append(ctx, []byte("c;")); err != nil {
		t.Fatal(err)
	}
	data, _, err := c.ReadAll(ctx, "held", client.Start)
	if err != nil || string(data) != "a;b;c;" {
		t.Fatalf("stream %q %v, want \"a;b;c;\"", data, err)
	}
	if n := countValues(t, svc.Brokers, "b;"); n != 1 {
		t.Fatalf("Kafka holds %d copies of \"b;\", want 1", n)
	}
}

// TestAppenderAttemptTimeout talks to a server that does not answer its
// first request: the Appender gives the attempt up after AttemptTimeout
// and resends the same seq; a server that never answers makes Append fail
// after MaxAttempts × AttemptTimeout, not hang.
func TestAppenderAttemptTimeout(t *testing.T) {
	var calls, neverCalls atomic.Int32
	var seqs sync.Map
	never := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		seqs.Store(n, r.Header.Get("Producer-Seq"))
		if r.URL.Path == "/v1/stream/never" {
			neverCalls.Add(1)
		}
		if n == 1 || r.URL.Path == "/v1/stream/never" {
			select {
			case <-never:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Stream-Next-Offset", "x")
		w.Header().Set("Producer-Epoch", "0")
		w.Header().Set("Producer-Seq", r.Header.Get("Producer-Seq"))
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	defer close(never) // before Close, which waits for the handlers
	c := client.New(srv.URL)
	w := c.NewAppender("s", "p", 0, textPlain)
	w.AttemptTimeout = 200 * time.Millisecond
	t0 := time.Now()
	if _, err := w.Append(context.Background(), []byte("x")); err != nil {
		t.Fatalf("append after a hung attempt: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("append took %s with a 200 ms attempt timeout", d)
	}
	for i := int32(1); i <= calls.Load(); i++ {
		if v, _ := seqs.Load(i); v != "0" {
			t.Fatalf("attempt %d sent Producer-Seq %v, want 0 (the same seq)", i, v)
		}
	}
	z := c.NewAppender("never", "p", 0, textPlain)
	z.AttemptTimeout, z.MaxAttempts, z.Backoff = 100*time.Millisecond, 3, 10*time.Millisecond
	t0 = time.Now()
	if _, err := z.Append(context.Background(), []byte("x")); err == nil {
		t.Fatal("append to a server that never answers succeeded")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("append to a server that never answers took %s, want about 3 × 100 ms", d)
	}
	if n := neverCalls.Load(); n != 3 {
		t.Fatalf("%d attempts at the server that never answers, want MaxAttempts 3", n)
	}
}

// TestAppenderRetryAfter: a 503 with Retry-After: 1 is retried after a
// second, not after the 50 ms backoff.
func TestAppenderRetryAfter(t *testing.T) {
	var times []time.Time
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Stream-Next-Offset", "x")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	w := client.New(srv.URL).NewAppender("s", "p", 0, textPlain)
	if _, err := w.Append(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if len(times) != 2 || times[1].Sub(times[0]) < 900*time.Millisecond {
		t.Fatalf("%d attempts, %s apart; want 2, a second apart", len(times), times[len(times)-1].Sub(times[0]))
	}
}

// TestGoneOffset: a read from an offset of a deleted generation is a 410
// the client reports with IsGone and the offset to resume from.
func TestGoneOffset(t *testing.T) {
	svc := startService(t, t.TempDir())
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	c.Create(ctx, "g", client.CreateOptions{ContentType: textPlain})
	r, err := c.NewAppender("g", "p", 0, textPlain).Append(ctx, []byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	c.Delete(ctx, "g")
	info, _, err := c.Create(ctx, "g", client.CreateOptions{ContentType: textPlain, Data: []byte("new")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(ctx, "g", r.Next)
	if !client.IsGone(err) || client.StatusCode(err) != http.StatusGone {
		t.Fatalf("read from the old generation's offset: %v, want 410", err)
	}
	first := client.EarliestOffset(err)
	if first != "0000000000000000_0000000000000000" {
		t.Fatalf("410 with Forklab-Earliest-Offset %q, want the beginning: %v", first, err)
	}
	ch, err := c.Read(ctx, "g", first)
	if err != nil || string(ch.Data) != "new" || ch.Next != info.Tail {
		t.Fatalf("read from %s: %q next %s %v; want \"new\" and the tail %s", first, ch.Data, ch.Next, err, info.Tail)
	}
}
