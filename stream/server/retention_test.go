package server_test

import (
	"strings"
	"testing"
	"time"
)

// TestRetentionGone drops the start of the partition the way Kafka's
// retention does (DeleteRecords moves the log start offset) and checks that
// a read from before the retained range answers 410 Gone, naming the first
// retained offset, both live and after a restart rebuilt the log from what
// Kafka still holds.
func TestRetentionGone(t *testing.T) {
	dir := t.TempDir()
	svc := start(t, dir, nil)
	u := svc.URL + "/v1/stream/r"
	tp := map[string]string{"Content-Type": "text/plain"}
	dropped := do(t, "PUT", u, tp, "a").header.Get("Stream-Next-Offset")   // Kafka offset 0
	retained := do(t, "POST", u, tp, "b").header.Get("Stream-Next-Offset") // 1
	do(t, "POST", u, tp, "c")                                              // 2
	if !strings.HasPrefix(retained, "0000000000000000_0000000000000002_") {
		t.Fatalf("offset after Kafka offset 1: %q", retained)
	}
	if err := svc.Broker.Cluster().DeleteRecords(svc.Log.Topic(), 0, 2); err != nil {
		t.Fatal(err)
	}
	// The log start offset is refreshed every 2 s and on every fetch.
	deadline := time.Now().Add(6 * time.Second)
	var r resp
	for {
		r = do(t, "GET", u+"?offset=-1", nil, "")
		if r.status == 410 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	check := func(stage string) {
		t.Helper()
		r := do(t, "GET", u+"?offset=-1", nil, "")
		if r.status != 410 {
			t.Fatalf("%s: read from -1: %d, want 410", stage, r.status)
		}
		if got := r.header.Get("Forklab-Earliest-Offset"); got != retained {
			t.Fatalf("%s: Forklab-Earliest-Offset %q, want %q", stage, got, retained)
		}
		// Retention, not a deleted stream or generation (QA item 10).
		if got := r.header.Get("Forklab-Gone-Reason"); got != "retention" {
			t.Fatalf("%s: Forklab-Gone-Reason %q, want retention", stage, got)
		}
		if r := do(t, "GET", u+"?offset="+dropped, nil, ""); r.status != 410 || r.header.Get("Forklab-Gone-Reason") != "retention" {
			t.Fatalf("%s: read from a dropped offset: %d, Forklab-Gone-Reason %q; want 410, retention", stage, r.status, r.header.Get("Forklab-Gone-Reason"))
		}
		for _, live := range []string{"long-poll", "sse"} {
			r := do(t, "GET", u+"?offset=-1&live="+live, nil, "")
			if r.status != 410 || r.header.Get("Forklab-Earliest-Offset") != retained {
				t.Fatalf("%s: %s from -1: %d Forklab-Earliest-Offset %q, want 410 and %s",
					stage, live, r.status, r.header.Get("Forklab-Earliest-Offset"), retained)
			}
		}
		r = do(t, "GET", u+"?offset="+retained, nil, "")
		if r.status != 200 || r.body != "c" {
			t.Fatalf("%s: read from the first retained offset: %d %q, want 200 \"c\"", stage, r.status, r.body)
		}
	}
	check("live")
	stop(svc)
	svc = start(t, dir, nil)
	defer stop(svc)
	u = svc.URL + "/v1/stream/r"
	check("after restart")
	if r := do(t, "POST", u, tp, "d"); r.status != 204 {
		t.Fatalf("append after restart: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", u+"?offset="+retained, nil, ""); r.body != "cd" {
		t.Fatalf("after append: %q", r.body)
	}
}
