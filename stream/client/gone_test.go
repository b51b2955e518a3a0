package client_test

import (
	"context"
	"testing"

	"github.com/forklab/forklab/stream/client"
)

// GoneReason tells the 410s apart (QA item 10: an offset of a stream
// deleted and created again was reported as older than the log retains):
// a deleted stream kept for its fork, an offset of an earlier generation,
// and any other error, which is no 410. EarliestOffset names where the
// new generation starts.
func TestGoneReason(t *testing.T) {
	svc := startService(t, t.TempDir())
	defer stopService(t, svc)
	ctx := context.Background()
	c := client.New(svc.URL)
	const js = "application/json"
	info, _, err := c.Create(ctx, "g", client.CreateOptions{ContentType: js, Data: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	old := info.Tail
	if _, err := c.Fork(ctx, "g-fork", "g", client.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(ctx, "g", client.Start)
	if !client.IsGone(err) || client.GoneReason(err) != client.GoneDeleted {
		t.Fatalf("read of a deleted stream kept for its fork: %v (reason %q), want 410 %s", err, client.GoneReason(err), client.GoneDeleted)
	}
	if err := c.Delete(ctx, "g-fork"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Create(ctx, "g", client.CreateOptions{ContentType: js}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(ctx, "g", old)
	if !client.IsGone(err) || client.GoneReason(err) != client.GoneGeneration || client.EarliestOffset(err) != "0000000000000000_0000000000000000" {
		t.Fatalf("read from the old generation's offset: %v (reason %q, earliest %q), want 410 %s from the beginning",
			err, client.GoneReason(err), client.EarliestOffset(err), client.GoneGeneration)
	}
	_, err = c.Read(ctx, "missing", client.Start)
	if client.IsGone(err) || client.GoneReason(err) != "" || !client.IsNotFound(err) {
		t.Fatalf("read of a missing stream: %v (reason %q)", err, client.GoneReason(err))
	}
}
