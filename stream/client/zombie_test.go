package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/client"
)

const textPlain = "text/plain"

// TestZombieSequence is the seed's sequence against a running server:
// worker epoch 1 appends seq 0..4 and hangs; worker epoch 2 appends seq 0
// (accepted); worker 1 wakes and appends seq 5 (rejected, stale epoch); a
// reader from offset N gets only what came after N, and the next offset.
func TestZombieSequence(t *testing.T) {
	svc := startService(t, t.TempDir())
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	if _, _, err := c.Create(ctx, "session-1", client.CreateOptions{ContentType: textPlain}); err != nil {
		t.Fatal(err)
	}
	w1 := c.NewAppender("session-1", "session-1", 1, textPlain)
	var offsetN string
	for i := 0; i < 5; i++ {
		r, err := w1.Append(ctx, []byte(fmt.Sprintf("w1-%d;", i)))
		if err != nil {
			t.Fatalf("epoch 1 seq %d: %v", i, err)
		}
		if r.Duplicate || r.Seq != int64(i) || r.Epoch != 1 {
			t.Fatalf("epoch 1 seq %d: %+v", i, r)
		}
		if i == 2 {
			offsetN = r.Next // a reader has seen w1-0..w1-2
		}
	}
	// Worker 1 hangs; its replacement, epoch 2, starts at seq 0.
	w2 := c.NewAppender("session-1", "session-1", 2, textPlain)
	r, err := w2.Append(ctx, []byte("w2-0;"))
	if err != nil || r.Duplicate {
		t.Fatalf("epoch 2 seq 0: %+v %v", r, err)
	}
	tail := r.Next
	// Worker 1 wakes up and carries on with seq 5.
	_, err = w1.Append(ctx, []byte("w1-5;"))
	var fe *client.FencedError
	if !errors.As(err, &fe) || fe.CurrentEpoch != 2 || fe.Epoch != 1 {
		t.Fatalf("zombie append: %v, want FencedError with current epoch 2", err)
	}
	// Exact HTTP answer of the fence: 403 with Producer-Epoch: 2.
	res := post(t, c.URL("session-1"), map[string]string{"Content-Type": textPlain, "Producer-Id": "session-1", "Producer-Epoch": "1", "Producer-Seq": "5"}, "w1-5;")
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Producer-Epoch") != "2" {
		t.Fatalf("zombie append: %d Producer-Epoch=%q, want 403 and 2", res.StatusCode, res.Header.Get("Producer-Epoch"))
	}
	// The reader resumes from N: only what came after N.
	data, next, err := c.ReadAll(ctx, "session-1", offsetN)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "w1-3;w1-4;w2-0;"; got != want {
		t.Fatalf("read from N = %q, want %q", got, want)
	}
	if next != tail {
		t.Fatalf("next offset %q, want the tail %q", next, tail)
	}
	all, _, _ := c.ReadAll(ctx, "session-1", client.Start)
	if string(all) != "w1-0;w1-1;w1-2;w1-3;w1-4;w2-0;" {
		t.Fatalf("whole stream %q", all)
	}
}

// TestZombieUnderEpochDefinition runs the zombie test with the epoch
// defined as in docs/epochs.md: the producer id is the session, and each
// worker incarnation claims the next epoch when it starts.
func TestZombieUnderEpochDefinition(t *testing.T) {
	svc := startService(t, t.TempDir())
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	const session = "sessions/abc"
	c.Create(ctx, session, client.CreateOptions{ContentType: "application/json"})

	first, err := c.ClaimNextEpoch(ctx, session, session, "application/json")
	if err != nil || first.Epoch() != 0 {
		t.Fatalf("first incarnation: epoch %d, %v", first.Epoch(), err)
	}
	for i := 0; i < 3; i++ {
		if _, err := first.Append(ctx, []byte(fmt.Sprintf(`{"step":%d,"by":0}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	// The scheduler thinks incarnation 0 died and starts incarnation 1.
	second, err := c.ClaimNextEpoch(ctx, session, session, "application/json")
	if err != nil || second.Epoch() != 1 {
		t.Fatalf("second incarnation: epoch %d, %v", second.Epoch(), err)
	}
	// It reads its own stream from the beginning to fold the state…
	data, _, err := c.ReadAll(ctx, session, client.Start)
	if err != nil || string(data) != `[{"step":0,"by":0},{"step":1,"by":0},{"step":2,"by":0}]` {
		t.Fatalf("fold input %s %v", data, err)
	}
	// …and continues.
	if _, err := second.Append(ctx, []byte(`{"step":3,"by":1}`)); err != nil {
		t.Fatal(err)
	}
	// Incarnation 0 was only hung; its next write is fenced.
	_, err = first.Append(ctx, []byte(`{"step":3,"by":0}`))
	var fe *client.FencedError
	if !errors.As(err, &fe) || fe.CurrentEpoch != 1 {
		t.Fatalf("hung incarnation: %v", err)
	}
	data, _, _ = c.ReadAll(ctx, session, client.Start)
	if string(data) != `[{"step":0,"by":0},{"step":1,"by":0},{"step":2,"by":0},{"step":3,"by":1}]` {
		t.Fatalf("session %s", data)
	}
	// An appender that opts into auto-claim takes over instead.
	auto := c.NewAppender(session, session, 0, "application/json")
	auto.ClaimOnFence = true
	r, err := auto.Append(ctx, []byte(`{"step":4,"by":2}`))
	if err != nil || r.Epoch != 2 || r.Seq != 0 {
		t.Fatalf("auto-claim: %+v %v", r, err)
	}
}

// TestResumeAfterReaderKilled kills a long-poll reader at random points while
// a writer appends, reconnects from its last offset each time, and checks
// the reassembled bytes against what was written: no loss, no duplicates.
func TestResumeAfterReaderKilled(t *testing.T) {
	svc := startService(t, t.TempDir())
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	const name = "resume"
	c.Create(ctx, name, client.CreateOptions{ContentType: "application/octet-stream"})

	var written bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := c.NewAppender(name, "writer", 0, "application/octet-stream")
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 300; i++ {
			b := make([]byte, 1+rng.IntN(300))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			if _, err := w.Append(ctx, b); err != nil {
				t.Error(err)
				return
			}
			written.Write(b)
			if i%50 == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if _, err := w.Close(ctx, nil); err != nil {
			t.Error(err)
		}
	}()

	var got bytes.Buffer
	offset := client.Start
	kills := 0
	rng := rand.New(rand.NewPCG(3, 4))
	for {
		// A reader lives for a random while, then is killed, possibly in
		// the middle of a request; only chunks Next returned count.
		rctx, cancel := context.WithTimeout(ctx, time.Duration(5+rng.IntN(40))*time.Millisecond)
		r := c.NewReader(name, offset, client.LongPoll)
		var err error
		for {
			var ch client.Chunk
			ch, err = r.Next(rctx)
			if err != nil {
				break
			}
			got.Write(ch.Data)
		}
		cancel()
		offset = r.Offset()
		if errors.Is(err, io.EOF) {
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(fmt.Sprint(err), "context deadline exceeded") {
			t.Fatalf("reader: %v", err)
		}
		kills++
	}
	wg.Wait()
	if kills < 3 {
		t.Fatalf("reader was killed only %d times", kills)
	}
	if !bytes.Equal(got.Bytes(), written.Bytes()) {
		t.Fatalf("reassembled %d bytes, wrote %d; differ at %d", got.Len(), written.Len(), firstDiff(got.Bytes(), written.Bytes()))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func post(t *testing.T, url string, h map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}
