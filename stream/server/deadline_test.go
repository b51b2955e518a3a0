package server_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/forklab/forklab/stream/broker/brokertest"
	"github.com/forklab/forklab/stream/service"
)

// appendTimeout is the write timeout of the deadline tests: short, so the
// tests are quick; the bound they check is generous (a busy machine).
const appendTimeout = 300 * time.Millisecond

func producerHeaders(seq string) map[string]string {
	return map[string]string{"Content-Type": "text/plain", "Producer-Id": "w", "Producer-Epoch": "0", "Producer-Seq": seq}
}

// checkUnavailable checks a 503 answered within the bound, with its
// headers: Retry-After, a plain-text reason, no offset.
func checkUnavailable(t *testing.T, what string, r resp, took time.Duration) {
	t.Helper()
	if r.status != 503 {
		t.Fatalf("%s: %d %q, want 503", what, r.status, r.body)
	}
	if took > appendTimeout+4*time.Second {
		t.Fatalf("%s: answered after %s; the write timeout is %s", what, took, appendTimeout)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("%s: Retry-After %q, want 1", what, got)
	}
	if got := r.header.Get("Content-Type"); got != "text/plain; charset=utf-8" {
		t.Fatalf("%s: Content-Type %q", what, got)
	}
	if got := r.header.Get("Stream-Next-Offset"); got != "" {
		t.Fatalf("%s: Stream-Next-Offset %q on a 503", what, got)
	}
}

// timedDo is do, timed.
func timedDo(t *testing.T, method, url string, h map[string]string, body string) (resp, time.Duration) {
	t0 := time.Now()
	r := do(t, method, url, h, body)
	return r, time.Since(t0)
}

// TestAppendDeadlineHeldProduce holds Kafka's answer to a produce (as a
// proxy holding the responses would): the append is answered 503 with
// Retry-After within the write timeout instead of after the Kafka client's
// retries (50.6 s before); an append queued behind it is withdrawn. Once
// Kafka applies the held produce, the idempotent retry of the first append
// is a 204 duplicate and the retry of the second is appended: each value is
// in Kafka and in the stream exactly once.
func TestAppendDeadlineHeldProduce(t *testing.T) {
	svc := start(t, t.TempDir(), func(c *service.Config) { c.Log.WriteTimeout = appendTimeout })
	defer stop(svc)
	u := svc.URL + "/v1/stream/held"
	do(t, "PUT", u, map[string]string{"Content-Type": "text/plain"}, "")
	if r := do(t, "POST", u, producerHeaders("0"), "a;"); r.status != 200 {
		t.Fatalf("first append: %d %s", r.status, r.body)
	}

	release, held := brokertest.HoldFirstProduce(svc.Broker.Cluster())

	var wg sync.WaitGroup
	var r1, r2 resp
	var d1, d2 time.Duration
	wg.Add(1)
	go func() { defer wg.Done(); r1, d1 = timedDo(t, "POST", u, producerHeaders("1"), "b;") }()
	<-held
	r2, d2 = timedDo(t, "POST", u, producerHeaders("2"), "c;")
	wg.Wait()
	checkUnavailable(t, "append whose produce Kafka holds", r1, d1)
	checkUnavailable(t, "append queued behind it", r2, d2)
	if !bytes.Contains([]byte(r1.body), []byte("may still land")) || !bytes.Contains([]byte(r2.body), []byte("was not written")) {
		t.Fatalf("reasons %q and %q: want 'may still land' and 'was not written'", r1.body, r2.body)
	}

	close(release)
	// Until the held produce is answered the partition is busy: retries
	// are 503 too. Retry as a client would.
	retry := func(seq, body string, want int) resp {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := do(t, "POST", u, producerHeaders(seq), body)
			if r.status != 503 || time.Now().After(deadline) {
				if r.status != want {
					t.Fatalf("retry of seq %s: %d %q, want %d", seq, r.status, r.body, want)
				}
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if r := retry("1", "b;", 204); r.header.Get("Producer-Seq") != "1" || r.header.Get("Producer-Epoch") != "0" {
		t.Fatalf("duplicate answer: Producer-Epoch %q Producer-Seq %q, want 0 and 1", r.header.Get("Producer-Epoch"), r.header.Get("Producer-Seq"))
	}
	r := retry("2", "c;", 200)
	if got := r.header.Get("Producer-Seq"); got != "2" {
		t.Fatalf("append answer: Producer-Seq %q, want 2", got)
	}
	if got := do(t, "GET", u+"?offset=-1", nil, "").body; got != "a;b;c;" {
		t.Fatalf("stream %q, want \"a;b;c;\"", got)
	}
	for _, v := range []string{"a;", "b;", "c;"} {
		if n := countValues(t, svc, v); n != 1 {
			t.Fatalf("Kafka holds %d copies of %q, want 1", n, v)
		}
	}
}

// TestAppendDeadlineDroppedProduce has Kafka drop every produce (the
// connection closes without an answer) for a while: appends are answered
// 503 within the bound, and once Kafka answers again the idempotent retry
// gets its normal answer: 200 if the write never landed, 204 (a duplicate)
// if a late attempt of the Kafka client landed it; either way the value is
// in Kafka and in the stream exactly once.
func TestAppendDeadlineDroppedProduce(t *testing.T) {
	svc := start(t, t.TempDir(), func(c *service.Config) { c.Log.WriteTimeout = appendTimeout })
	defer stop(svc)
	u := svc.URL + "/v1/stream/dropped"
	do(t, "PUT", u, map[string]string{"Content-Type": "text/plain"}, "")
	if r := do(t, "POST", u, producerHeaders("0"), "a;"); r.status != 200 {
		t.Fatalf("first append: %d %s", r.status, r.body)
	}
	c := svc.Broker.Cluster()
	var mu sync.Mutex
	dropping := true
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if !dropping {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		return nil, errors.New("dropped by the test"), true
	})
	r, d := timedDo(t, "POST", u, producerHeaders("1"), "b;")
	checkUnavailable(t, "append while Kafka drops produces", r, d)
	mu.Lock()
	dropping = false
	mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = do(t, "POST", u, producerHeaders("1"), "b;")
		if r.status != 503 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if (r.status != 200 && r.status != 204) || r.header.Get("Producer-Seq") != "1" {
		t.Fatalf("retry after Kafka answers again: %d %q Producer-Seq %q, want 200 or 204 with seq 1", r.status, r.body, r.header.Get("Producer-Seq"))
	}
	if got := do(t, "GET", u+"?offset=-1", nil, "").body; got != "a;b;" {
		t.Fatalf("stream %q, want \"a;b;\"", got)
	}
	if n := countValues(t, svc, "b;"); n != 1 {
		t.Fatalf("Kafka holds %d copies of \"b;\", want 1", n)
	}
}

// countValues counts the records of the data topic's partition 0 whose
// value is v.
func countValues(t *testing.T, svc *service.Service, v string) int {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(svc.Brokers...)}
	res, err := cl.Fetch(context.Background(), &kafka.FetchRequest{Topic: svc.Log.Topic(), Partition: 0, Offset: 0, MaxBytes: 1 << 20})
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
		if b.String() == v {
			n++
		}
	}
	return n
}
