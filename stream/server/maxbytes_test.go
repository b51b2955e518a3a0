package server_test

import (
	"net/url"
	"testing"
)

// max_bytes (a forklab extension) bounds a read's data but returns at
// least one record: with max_bytes=1 each read returns exactly one
// append, and its Stream-Next-Offset is the offset right after it, which
// is how forklab log read --offsets prints each event's offset. Bad
// values are 400.
func TestReadMaxBytes(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	u := svc.URL + "/v1/stream/mb"
	if r := do(t, "PUT", u, map[string]string{"Content-Type": "application/json"}, ""); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var tails []string
	for _, m := range []string{`{"n":1}`, `{"n":2}`, `[{"n":3},{"n":4}]`} {
		r := do(t, "POST", u, map[string]string{"Content-Type": "application/json"}, m)
		if r.status != 204 && r.status != 200 {
			t.Fatalf("append %s: %d %s", m, r.status, r.body)
		}
		tails = append(tails, r.header.Get("Stream-Next-Offset"))
	}
	offset := "-1"
	for i, want := range []string{`[{"n":1}]`, `[{"n":2}]`, `[{"n":3},{"n":4}]`} {
		r := do(t, "GET", u+"?max_bytes=1&offset="+url.QueryEscape(offset), nil, "")
		next := r.header.Get("Stream-Next-Offset")
		if r.status != 200 || r.body != want || next != tails[i] || (r.header.Get("Stream-Up-To-Date") == "true") != (i == 2) {
			t.Fatalf("read %d from %s: %d %s next %s (up to date %q), want %s next %s", i, offset, r.status, r.body, next, r.header.Get("Stream-Up-To-Date"), want, tails[i])
		}
		offset = next
	}
	if r := do(t, "GET", u+"?max_bytes=14&offset=-1", nil, ""); r.body != `[{"n":1},{"n":2}]` {
		t.Fatalf("max_bytes=14: %s", r.body)
	}
	if r := do(t, "GET", u+"?offset=-1", nil, ""); r.body != `[{"n":1},{"n":2},{"n":3},{"n":4}]` {
		t.Fatalf("no max_bytes: %s", r.body)
	}
	for _, q := range []string{"max_bytes=0", "max_bytes=-1", "max_bytes=x", "max_bytes=1&max_bytes=2", "max_bytes=01", "max_bytes=2000000000"} {
		if r := do(t, "GET", u+"?offset=-1&"+q, nil, ""); r.status != 400 {
			t.Errorf("%s: %d %s, want 400", q, r.status, r.body)
		}
	}
}
