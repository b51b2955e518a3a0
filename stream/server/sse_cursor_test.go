package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSSECursorNoDrift reads eight records as eight SSE events (max_bytes=1)
// and checks every control event's streamCursor (§10.1): without a client
// cursor each is the current 20-second interval since 2024-10-09, and with
// a client cursor ahead of the clock each is above it by at most the
// jitter (3600 s = 180 intervals), never falling. The server used to feed
// each event its own previous cursor, adding jitter at every event: the
// cursor ran further ahead of the clock with each one.
func TestSSECursorNoDrift(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	url := svc.URL + "/v1/stream/cur"
	tp := map[string]string{"Content-Type": "text/plain"}
	do(t, "PUT", url, tp, "0")
	for i := 1; i < 8; i++ {
		do(t, "POST", url, tp, strconv.Itoa(i))
	}
	interval := func() int64 {
		return int64(time.Since(time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)) / (20 * time.Second))
	}
	for _, c := range []struct {
		name   string
		client int64 // the client's cursor, 0 for none
	}{{"no client cursor", 0}, {"client cursor ahead", interval() + 1000}} {
		t.Run(c.name, func(t *testing.T) {
			q := "?offset=-1&live=sse&max_bytes=1"
			if c.client > 0 {
				q += "&cursor=" + strconv.FormatInt(c.client, 10)
			}
			before := interval()
			cursors := sseCursors(t, url+q, 8)
			after := interval()
			prev := int64(0)
			for i, cur := range cursors {
				lo, hi := before, after
				if c.client > 0 {
					lo, hi = c.client+1, c.client+180
				}
				if cur < lo || cur > hi || cur < prev {
					t.Fatalf("event %d: streamCursor %d, want in [%d, %d] and not below %d (all: %v)", i, cur, lo, hi, prev, cursors)
				}
				prev = cur
			}
		})
	}
}

// sseCursors reads n control events of an SSE response and returns their
// streamCursor values.
func sseCursors(t *testing.T, url string, n int) []int64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	var out []int64
	sc := bufio.NewScanner(res.Body)
	control := false
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "event: control":
			control = true
		case control && strings.HasPrefix(line, "data:"):
			var c struct {
				StreamCursor string `json:"streamCursor"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data:")), &c); err != nil {
				t.Fatalf("control event %q: %v", line, err)
			}
			v, err := strconv.ParseInt(c.StreamCursor, 10, 64)
			if err != nil {
				t.Fatalf("control event %q: streamCursor not a decimal", line)
			}
			out = append(out, v)
			control = false
		}
	}
	if len(out) < n {
		t.Fatalf("%d control events, want %d", len(out), n)
	}
	return out
}
