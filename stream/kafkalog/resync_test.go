package kafkalog

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/forklab/forklab/stream/broker"
)

// TestResyncShowsOneCopy makes every attempt of one produce land in Kafka
// but time out, so the Writer writes the append several times and gives up;
// the partition goroutine then re-reads Kafka. Readers must never see a
// copy that a later one replaces: a reader that read "ab" after the first
// copy was applied, and went on from its next offset once the later copies
// were, read "b" a second time.
func TestResyncShowsOneCopy(t *testing.T) {
	b, err := broker.Start(broker.Config{DataDir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	l, err := Open(ctx, Config{Brokers: b.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tp := "text/plain"
	if _, err := l.Create(ctx, CreateRequest{Name: "s", ContentType: tp, TTL: -1, Body: []byte("a")}); err != nil {
		t.Fatal(err)
	}

	// What a reader sees from the start after every record the resync
	// applies.
	type seen struct {
		data string
		next Offset
	}
	var mu sync.Mutex
	var views []seen
	testHookResyncApplied = func() {
		if r, err := l.Read(ctx, ReadRequest{Name: "s", From: Start}); err == nil {
			mu.Lock()
			views = append(views, seen{string(r.Data), r.Next})
			mu.Unlock()
		}
	}
	defer func() { testHookResyncApplied = nil }()

	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1})
	_, err = l.Append(ctx, AppendRequest{Name: "s", ContentType: tp, Body: []byte("b")})
	fault.Remove()
	if KindOf(err) != Unavailable {
		t.Fatalf("append while every produce times out: %v, want Unavailable", err)
	}
	// The resync runs once the failed append is answered; wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := l.Read(ctx, ReadRequest{Name: "s", From: Start})
		mu.Lock()
		n := len(views)
		mu.Unlock()
		if err == nil && string(r.Data) == "ab" && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %q after the resync, want \"ab\"", r.Data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Give the resync time to apply every copy.
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	// Every intermediate view, continued from its next offset, must give
	// the stream exactly once.
	for i, v := range views {
		rest, err := l.Read(ctx, ReadRequest{Name: "s", From: v.next})
		if err != nil {
			t.Fatalf("view %d: read from %s: %v", i, v.next, err)
		}
		if got := v.data + string(rest.Data); got != "ab" {
			t.Fatalf("view %d: read %q up to %s, then %q: %q in all, want \"ab\"", i, v.data, v.next, rest.Data, got)
		}
	}
}
