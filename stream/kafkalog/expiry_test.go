package kafkalog

import (
	"context"
	"testing"
	"time"
)

// TestExpired checks stream.expired at the edges of Stream-TTL and
// Stream-Expires-At. A TTL too long for time.Duration (beyond ~292 years)
// once overflowed to a negative window, so a stream created with
// Stream-TTL: 10000000000 was answered 201 and then expired at once, its
// data deleted by the sweep.
func TestExpired(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		ttl       int64 // seconds, -1 none
		idle      time.Duration
		expiresAt time.Time
		want      bool
	}{
		{"no ttl, no expiry", -1, 1000 * time.Hour, time.Time{}, false},
		{"ttl 0 expires at once", 0, 0, time.Time{}, true},
		{"ttl 10 idle 9s", 10, 9 * time.Second, time.Time{}, false},
		{"ttl 10 idle 10s", 10, 10 * time.Second, time.Time{}, true},
		{"largest ttl time.Duration holds", 9223372036, time.Hour, time.Time{}, false},
		{"ttl beyond time.Duration", 10000000000, time.Hour, time.Time{}, false},
		{"ttl at the parser's limit 2^40", 1 << 40, time.Hour, time.Time{}, false},
		{"ttl max int64", 1<<63 - 1, time.Hour, time.Time{}, false},
		{"expires in the future", -1, 0, now.Add(time.Second), false},
		{"expires now", -1, 0, now, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStream(meta{name: "s", ttl: c.ttl, expiresAt: c.expiresAt})
			s.lastAccess.Store(now.Add(-c.idle).UnixNano())
			if got := s.expired(now); got != c.want {
				t.Fatalf("expired = %v, want %v", got, c.want)
			}
		})
	}
}

// TestLiveReaderKeepsTTL waits on a stream with a 1-second Stream-TTL for
// two seconds. The protocol resets the TTL when a live read begins, so that
// "a stream with active live readers will not expire" (§5.1, Stream-TTL);
// the stream used to expire under the waiting reader, which then got a 404
// and the stream's data was deleted.
func TestLiveReaderKeepsTTL(t *testing.T) {
	l, closeLog := openTest(t, t.TempDir())
	defer closeLog()
	ctx := context.Background()
	res, err := l.Create(ctx, CreateRequest{Name: "t", ContentType: "text/plain", TTL: 1, Body: []byte("kept")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Wait(ctx, ReadRequest{Name: "t", From: res.Info.Tail}, 2*time.Second)
	if err != nil {
		t.Fatalf("long-poll on a stream with a live reader: %v", err)
	}
	if r.Records != 0 || r.Next != res.Info.Tail {
		t.Fatalf("long-poll timed out with %d records, next %s; want 0 and %s", r.Records, r.Next, res.Info.Tail)
	}
	// The reader just left: the stream lives on for another TTL.
	got, err := l.Read(ctx, ReadRequest{Name: "t", From: Start})
	if err != nil || string(got.Data) != "kept" {
		t.Fatalf("read after the long-poll: %q, %v; want \"kept\"", got.Data, err)
	}
	// Expiry still works once nobody reads.
	time.Sleep(1500 * time.Millisecond)
	if _, err := l.Head("t"); KindOf(err) != NotFound {
		t.Fatalf("head after the TTL with no reader: %v, want not found", err)
	}
}
