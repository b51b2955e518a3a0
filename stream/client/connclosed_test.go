package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/forklab/forklab/stream/client"
)

// TestConnClosedIsNotEOF: a log that closes the connection before it
// answers (a restart, a proxy) makes Reader.Next fail with ErrConnClosed,
// status 0 (worth retrying), and never io.EOF, the Reader's end of stream.
// net/http's error wraps io.EOF, so callers that read errors.Is(err,
// io.EOF) as "done" (forklab log read, the lab's fork fold) took a
// half-read stream for a whole one, and exited 0.
func TestConnClosedIsNotEOF(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Stream-Next-Offset", "0000000000000000_0000000000000001_1_0000abcd")
			w.Write([]byte("first"))
			return
		}
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	for _, mode := range []client.Mode{client.CatchUp, client.LongPoll} {
		n.Store(0)
		r := client.New(srv.URL).NewReader("s", client.Start, mode)
		ch, err := r.Next(context.Background())
		if err != nil || string(ch.Data) != "first" {
			t.Fatalf("mode %v: first chunk %q, %v", mode, ch.Data, err)
		}
		_, err = r.Next(context.Background())
		if err == nil || errors.Is(err, io.EOF) || !errors.Is(err, client.ErrConnClosed) || client.StatusCode(err) != 0 {
			t.Fatalf("mode %v: after the connection closed: %v (io.EOF: %v); want ErrConnClosed, not io.EOF, status 0",
				mode, err, errors.Is(err, io.EOF))
		}
	}
}
