package kafkalog

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/forklab/forklab/stream/broker"
)

// TestColdReadersBoundFetches: many readers catching up on a stream that
// is not in the cache (after a restart) once queued a fetch of the whole
// stream each, all ahead of every produce in the embedded broker's one
// request loop: 200 SSE readers of a 3 MB stream held every append to
// any stream for the whole write timeout (503). Now the read path has at
// most maxReadFetches fetch requests in flight, of at most
// readFetchBytes each, and a reader whose turn comes takes from the cache
// what the readers before it fetched: the fetches are bounded in number
// at any moment and, in all, about one pass over the stream per slot,
// not one per reader. Every reader still gets every byte exactly.
func TestColdReadersBoundFetches(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	l, err := Open(ctx, Config{Brokers: b.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, CreateRequest{Name: "big", ContentType: "text/plain", TTL: -1}); err != nil {
		t.Fatal(err)
	}
	const records, recBytes = 3000, 1000 // a 3 MB stream
	rec := func(i int) []byte {
		return append(bytes.Repeat([]byte{'a' + byte(i%26)}, recBytes-7), fmt.Sprintf("%06d\n", i)...)
	}
	// Appended by 16 writers at once: many records per produce batch.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < records; i += 16 {
				if _, err := l.Append(ctx, AppendRequest{Name: "big", ContentType: "text/plain", Body: rec(i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	// The order the records landed in is the stream's content.
	var want []byte
	from := Start
	for {
		res, err := l.Read(ctx, ReadRequest{Name: "big", From: from})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Data...)
		if from = res.Next; res.UpToDate {
			break
		}
	}
	if len(want) != records*recBytes {
		t.Fatalf("stream holds %d bytes, want %d", len(want), records*recBytes)
	}
	l.Close()

	// A restart: the cache is cold.
	l, err = Open(ctx, Config{Brokers: b.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var fetches, peak atomic.Int64
	l.readFetchHook = func(inFlight int) {
		fetches.Add(1)
		for p := peak.Load(); int64(inFlight) > p && !peak.CompareAndSwap(p, int64(inFlight)); p = peak.Load() {
		}
	}
	const readers = 50
	got := make([][]byte, readers)
	rerrs := make([]error, readers)
	start := make(chan struct{})
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			from := Start
			for {
				res, err := l.Read(ctx, ReadRequest{Name: "big", From: from, MaxBytes: 1 << 20})
				if err != nil {
					rerrs[r] = err
					return
				}
				got[r] = append(got[r], res.Data...)
				if from = res.Next; res.UpToDate {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for r := range readers {
		if rerrs[r] != nil {
			t.Fatalf("reader %d: %v", r, rerrs[r])
		}
		if !bytes.Equal(got[r], want) {
			t.Fatalf("reader %d read %d bytes, not the stream's %d exactly", r, len(got[r]), len(want))
		}
	}
	// One pass over the stream is len(want)/readFetchBytes+1 requests;
	// each slot may repeat a pass another slot's holder is making.
	maxFetches := int64(2 * maxReadFetches * (len(want)/readFetchBytes + 2))
	if p := peak.Load(); p > maxReadFetches {
		t.Errorf("%d read fetches in flight at once, want at most %d", p, maxReadFetches)
	}
	if n := fetches.Load(); n > maxFetches || n == 0 {
		t.Errorf("%d readers of a cold %d-byte stream sent %d fetch requests, want 1 to %d", readers, len(want), n, maxFetches)
	}
	t.Logf("%d readers: %d fetch requests, at most %d in flight", readers, fetches.Load(), peak.Load())
}
