package kafkalog

import (
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
