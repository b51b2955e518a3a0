package kafkalog

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/forklab/forklab/stream/broker"
)

func openTest(t *testing.T, dir string) (*Log, func()) {
	t.Helper()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(context.Background(), Config{Brokers: b.Addrs()})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	return l, func() { l.Close(); b.Close() }
}

// TestReadChunking reads a stream in chunks smaller than its data, where a
// chunk fills up between two batches of records (regression: the reader
// spun forever when the first record of a new batch did not fit).
func TestReadChunking(t *testing.T) {
	l, closeLog := openTest(t, t.TempDir())
	defer closeLog()
	ctx := context.Background()
	l.Create(ctx, CreateRequest{Name: "c", ContentType: "text/plain", TTL: -1})
	var want bytes.Buffer
	for i := 0; i < 5000; i++ {
		rec := []byte(fmt.Sprintf("record-%05d;", i)) // 13 bytes
		want.Write(rec)
		if _, err := l.Append(ctx, AppendRequest{Name: "c", ContentType: "text/plain", Body: rec}); err != nil {
			t.Fatal(err)
		}
	}
	for _, maxBytes := range []int{13, 100, 4096*13 + 5, 1 << 20} {
		var got bytes.Buffer
		from, reads := Start, 0
		for {
			res, err := l.Read(ctx, ReadRequest{Name: "c", From: from, MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			reads++
			if len(res.Data) > max(maxBytes, 13) {
				t.Fatalf("max %d: chunk of %d bytes", maxBytes, len(res.Data))
			}
			got.Write(res.Data)
			from = res.Next
			if res.UpToDate {
				break
			}
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("max %d: read %d bytes in %d reads, want %d", maxBytes, got.Len(), reads, want.Len())
		}
		if wantReads := (want.Len() + maxBytes - 1) / maxBytes; maxBytes >= 13 && maxBytes%13 == 0 && reads != wantReads {
			t.Fatalf("max %d: %d reads, want %d", maxBytes, reads, wantReads)
		}
	}
}
