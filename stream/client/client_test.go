package client_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/forklab/forklab/stream/client"
)

// TestForkAndReaders covers the rest of the client: Fork at an offset (the
// next issue's "fork a session at an offset"), a fresh producer history on
// the fork, catch-up Reader, Head, Close and Delete.
func TestForkAndReaders(t *testing.T) {
	svc := startService(t, t.TempDir())
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL + "/v1/stream/") // a base URL with the path works too
	const js = "application/json"
	if _, created, err := c.Create(ctx, "parent", client.CreateOptions{ContentType: js}); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if _, created, err := c.Create(ctx, "parent", client.CreateOptions{ContentType: js}); err != nil || created {
		t.Fatalf("idempotent create: created=%v %v", created, err)
	}
	w := c.NewAppender("parent", "parent", 0, js)
	var at string
	for i, ev := range []string{`{"e":0}`, `{"e":1}`, `{"e":2}`} {
		r, err := w.Append(ctx, []byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			at = r.Next
		}
	}
	info, err := c.Fork(ctx, "child", "parent", client.ForkOptions{At: at})
	if err != nil {
		t.Fatal(err)
	}
	if info.ContentType != js {
		t.Fatalf("fork content type %q", info.ContentType)
	}
	// The fork has no producer history: its writer starts at epoch 0, seq 0.
	fw, err := c.ClaimNextEpoch(ctx, "child", "parent", js)
	if err != nil || fw.Epoch() != 0 {
		t.Fatalf("claim on fork: %d %v", fw.Epoch(), err)
	}
	if _, err := fw.Append(ctx, []byte(`{"e":"child"}`)); err != nil {
		t.Fatal(err)
	}
	data, next, err := c.ReadAll(ctx, "child", client.Start)
	if err != nil || string(data) != `[{"e":0},{"e":1},{"e":"child"}]` {
		t.Fatalf("fork reads %s %v", data, err)
	}
	h, err := c.Head(ctx, "child")
	if err != nil || h.Tail != next || h.Topic != svc.Log.Topic() || h.Closed {
		t.Fatalf("head %+v %v (next %s)", h, err, next)
	}
	// A catch-up Reader returns the chunks, then io.EOF.
	r := c.NewReader("parent", client.Start, client.CatchUp)
	ch, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ch.Messages()
	if err != nil || len(ms) != 3 || string(ms[2]) != `{"e":2}` {
		t.Fatalf("messages %s %v", ms, err)
	}
	if _, err := r.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the tail: %v, want io.EOF", err)
	}
	// Close, then a long-poll Reader at the tail ends with io.EOF at once.
	if err := c.Close(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	lp := c.NewReader("parent", r.Offset(), client.LongPoll)
	if _, err := lp.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("long-poll on a closed stream: %v, want io.EOF", err)
	}
	if _, err := w.Append(ctx, []byte(`{"e":3}`)); client.StatusCode(err) != 409 {
		t.Fatalf("append to closed stream: %v, want 409", err)
	}
	if err := c.Delete(ctx, "child"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Head(ctx, "child"); !client.IsNotFound(err) {
		t.Fatalf("head after delete: %v", err)
	}
}
