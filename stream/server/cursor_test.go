package server

import (
	"math/big"
	"testing"
	"time"
)

// TestNextCursor checks §10.1's cursor rules: the current 20-second interval
// since 2024-10-09, and for a client cursor at or past it a strictly greater
// one. A client cursor near the int64 limit once wrapped to a negative
// cursor, sending the client's cursors backwards.
func TestNextCursor(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const cur = 1939680 // 20 s intervals from 2024-10-09 to 2026-01-01
	cases := []struct {
		client    string
		wantExact string // when set, the exact cursor
	}{
		{"", "1939680"},
		{"abc", "1939680"},
		{"-5", "1939680"},
		{"1939679", "1939680"}, // behind: the current interval
		{"1939680", ""},        // at: strictly greater
		{"5000000", ""},        // ahead: strictly greater
		{"9223372036854775806", ""},
		{"9223372036854775807", ""},
		{"99999999999999999999999999", ""},
	}
	for _, c := range cases {
		t.Run(c.client, func(t *testing.T) {
			got := nextCursor(c.client, now)
			if c.wantExact != "" {
				if got != c.wantExact {
					t.Fatalf("nextCursor(%q) = %s, want %s", c.client, got, c.wantExact)
				}
				return
			}
			g, ok1 := new(big.Int).SetString(got, 10)
			cl, _ := new(big.Int).SetString(c.client, 10)
			if !ok1 || g.Cmp(cl) <= 0 || g.Cmp(big.NewInt(cur)) <= 0 {
				t.Fatalf("nextCursor(%q) = %s, want a decimal greater than %s and %d", c.client, got, c.client, cur)
			}
		})
	}
}

// TestLaterCursor compares cursors as numbers, not as strings.
func TestLaterCursor(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"", "5", "5"}, {"5", "", "5"}, {"9", "10", "10"}, {"10", "9", "10"},
		{"3383588", "3383589", "3383589"}, {"3383589", "3383588", "3383589"}, {"7", "7", "7"},
	} {
		if got := laterCursor(c.a, c.b); got != c.want {
			t.Errorf("laterCursor(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
