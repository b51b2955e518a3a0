package kafkalog

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentAppends races 100 appends to one stream and 8 producers
// writing in parallel to another: every append gets a distinct offset, the
// offsets order the data, and each record is read exactly once (the
// implementation testing guide's "offsets persisted atomically").
func TestConcurrentAppends(t *testing.T) {
	l, closeLog := openTest(t, t.TempDir())
	defer closeLog()
	ctx := context.Background()
	l.Create(ctx, CreateRequest{Name: "race", ContentType: "text/plain", TTL: -1})
	var mu sync.Mutex
	tails := map[string]string{}
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("<%03d>", i)
			r, err := l.Append(ctx, AppendRequest{Name: "race", ContentType: "text/plain", Body: []byte(body)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			tails[r.Tail.String()] = body
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(tails) != 100 {
		t.Fatalf("%d distinct tail offsets for 100 appends", len(tails))
	}
	// Sorting the appends by the tail each got reproduces the stream.
	offs := make([]string, 0, 100)
	for o := range tails {
		offs = append(offs, o)
	}
	sort.Strings(offs)
	var want strings.Builder
	for _, o := range offs {
		want.WriteString(tails[o])
	}
	res, err := l.Read(ctx, ReadRequest{Name: "race", From: Start})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != want.String() {
		t.Fatalf("stream differs from the appends ordered by their offsets")
	}

	// Producers: each appends seq 0..49 in order, all in parallel.
	l.Create(ctx, CreateRequest{Name: "prod", ContentType: "text/plain", TTL: -1})
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < 50; s++ {
				r, err := l.Append(ctx, AppendRequest{Name: "prod", ContentType: "text/plain", Body: []byte(fmt.Sprintf("p%d.%d;", p, s)),
					HasProducer: true, ProducerID: fmt.Sprint("p", p), Epoch: 0, Seq: int64(s)})
				if err != nil || r.Outcome != Appended {
					t.Errorf("p%d seq %d: %+v %v", p, s, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	res, _ = l.Read(ctx, ReadRequest{Name: "prod", From: Start})
	for p := 0; p < 8; p++ {
		// Each producer's records appear once each, in seq order.
		last := -1
		for _, rec := range bytes.Split(res.Data, []byte(";")) {
			var pp, s int
			if n, _ := fmt.Sscanf(string(rec), "p%d.%d", &pp, &s); n != 2 || pp != p {
				continue
			}
			if s != last+1 {
				t.Fatalf("producer %d: seq %d after %d", p, s, last)
			}
			last = s
		}
		if last != 49 {
			t.Fatalf("producer %d: last seq read %d, want 49", p, last)
		}
	}
}
