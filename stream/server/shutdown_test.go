package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/service"
)

// TestShutdownAnswersLongPoll checks a graceful shutdown: a long-poll
// waiting at the tail is answered 204 with the tail offset instead of having
// its connection cut.
func TestShutdownAnswersLongPoll(t *testing.T) {
	svc := start(t, t.TempDir(), func(c *service.Config) { c.Server.LongPollTimeout = time.Minute })
	u := svc.URL + "/v1/stream/lp"
	put := do(t, "PUT", u, map[string]string{"Content-Type": "text/plain"}, "x")
	tail := put.header.Get("Stream-Next-Offset")
	got := make(chan *http.Response, 1)
	go func() {
		res, err := http.Get(u + "?offset=" + tail + "&live=long-poll")
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc.Close(ctx)
	res := <-got
	if res == nil {
		t.Fatal("no response")
	}
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Stream-Next-Offset") != tail || res.Header.Get("Stream-Up-To-Date") != "true" {
		t.Fatalf("long-poll at shutdown: %d next=%q up=%q, want 204 %s true", res.StatusCode, res.Header.Get("Stream-Next-Offset"), res.Header.Get("Stream-Up-To-Date"), tail)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
}
