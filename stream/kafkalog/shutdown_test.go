package kafkalog

import (
	"context"
	"testing"
	"time"
)

// TestWritesAfterCloseDoNotHang: a write racing the shutdown must be
// answered (Unavailable), never left waiting on a queue nobody drains
// (regression: the expiry sweep could hang Close this way).
func TestWritesAfterCloseDoNotHang(t *testing.T) {
	l, closeLog := openTest(t, t.TempDir())
	defer closeLog()
	ctx := context.Background()
	l.Create(ctx, CreateRequest{Name: "s", ContentType: "text/plain", TTL: -1})
	l.Close()
	done := make(chan error, 40)
	for i := 0; i < 20; i++ {
		go func() {
			_, err := l.Append(ctx, AppendRequest{Name: "s", ContentType: "text/plain", Body: []byte("x")})
			done <- err
		}()
		go func() {
			done <- l.Delete(ctx, "s")
		}()
	}
	for i := 0; i < 40; i++ {
		select {
		case err := <-done:
			if k := KindOf(err); err != nil && k != Unavailable && k != NotFound {
				t.Fatalf("write after close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 40 writes after Close never returned", 40-i)
		}
	}
}
