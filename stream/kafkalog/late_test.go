package kafkalog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/broker/brokertest"
)

// TestLateLandingWrite gives a produce up (Kafka holds it past the produce
// timeout) and lets Kafka apply it later: before the client's retry lands,
// or after it. Either way the log must end up where a rebuild from Kafka
// ends up, the producer's seq once in the stream, every acknowledged
// append there once, and the retry answered as a duplicate or an append
// that the stream then holds: the late record is found by the next write
// (it lands behind a record the log did not write) and folded in, or
// ignored as a copy of a record number the log gave to the retry.
func TestLateLandingWrite(t *testing.T) {
	for _, releaseFirst := range []bool{true, false} {
		name := "late record lands after the retry"
		if releaseFirst {
			name = "late record lands before the retry"
		}
		t.Run(name, func(t *testing.T) { lateLanding(t, releaseFirst) })
	}
}

func lateLanding(t *testing.T, releaseFirst bool) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	ctx := context.Background()
	gaveUp := make(chan struct{}, 1)
	cfg := Config{Brokers: b.Addrs(), WriteTimeout: 200 * time.Millisecond, produceTimeout: 300 * time.Millisecond,
		Logf: func(format string, args ...any) {
			if strings.Contains(format, "failed, resyncing") {
				select {
				case gaveUp <- struct{}{}:
				default:
				}
			}
		}}
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	tp := "text/plain"
	if _, err := l.Create(ctx, CreateRequest{Name: "s", ContentType: tp, TTL: -1}); err != nil {
		t.Fatal(err)
	}
	app := func(seq int64, body string) (AppendResult, error) {
		return l.Append(ctx, AppendRequest{Name: "s", ContentType: tp, Body: []byte(body), HasProducer: true, ProducerID: "p", Seq: seq})
	}
	if _, err := app(0, "a;"); err != nil {
		t.Fatal(err)
	}

	c := b.Cluster()
	release, held := brokertest.HoldFirstProduce(c)
	if _, err := app(1, "b;"); KindOf(err) != Unavailable {
		t.Fatalf("append whose produce Kafka holds: %v, want Unavailable", err)
	}
	<-held
	// The log gives the produce up and re-reads Kafka: "b;" is not there.
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the log did not give the held produce up")
	}
	time.Sleep(100 * time.Millisecond) // the resync
	retry := func() AppendResult {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := app(1, "b;")
			if err == nil {
				return r
			}
			if KindOf(err) != Unavailable || time.Now().After(deadline) {
				t.Fatalf("retry of seq 1: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var r AppendResult
	want := "a;b;c;"
	if releaseFirst {
		close(release)
		waitValues(t, l, "b;", 1)
		r = retry()
		if r.Outcome != Duplicate {
			t.Fatalf("retry after the late record landed: %v, want a duplicate", r.Outcome)
		}
	} else {
		// Another producer's append takes the next record number
		// (not the one the given-up write had: that one is burnt).
		if _, err := l.Append(ctx, AppendRequest{Name: "s", ContentType: tp, Body: []byte("x;"), HasProducer: true, ProducerID: "q"}); err != nil {
			t.Fatal(err)
		}
		r = retry()
		if r.Outcome != Appended {
			t.Fatalf("retry before the late record landed: %v, want appended", r.Outcome)
		}
		close(release)
		waitValues(t, l, "b;", 2)
		want = "a;x;b;c;"
	}
	// The next write lands behind the late record (or the retry's, already
	// known): whatever it is answered, its retry settles it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := app(2, "c;")
		if err == nil {
			break
		}
		if KindOf(err) != Unavailable || time.Now().After(deadline) {
			t.Fatalf("append of seq 2: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	check := func(stage string, l *Log) {
		t.Helper()
		res, err := l.Read(ctx, ReadRequest{Name: "s", From: Start})
		if err != nil || string(res.Data) != want {
			t.Fatalf("%s: stream %q %v, want %q", stage, res.Data, err, want)
		}
		if e, q, _, _ := l.ProducerState("s", "p"); e != 0 || q != 2 {
			t.Fatalf("%s: producer at epoch %d seq %d, want 0 and 2", stage, e, q)
		}
	}
	check("live", l)
	live, _ := l.Head("s")
	l.Close()
	b.Close()
	b, err = broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Brokers = b.Addrs()
	l, err = Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	check("rebuilt", l)
	if rebuilt, _ := l.Head("s"); rebuilt.Tail != live.Tail {
		t.Fatalf("tail %s live, %s rebuilt", live.Tail, rebuilt.Tail)
	}
}

// waitValues waits until the data topic holds n records with value v.
func waitValues(t *testing.T, l *Log, v string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, _, _, err := l.fetchBatch(context.Background(), 0, 0, 1<<20)
		got := 0
		for _, r := range recs {
			if string(r.value) == v {
				got++
			}
		}
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kafka holds %d records %q, want %d (%v)", got, v, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
