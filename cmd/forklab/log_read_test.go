package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLogReadLostLog: forklab log read --follow prints a chunk, then the
// log stops answering (a restart, a network fault, a 503). It exits 1 and
// still says where to resume, next_offset on stderr and in --offset-file:
// the offset after the last chunk it printed. It used to exit with the
// transport error alone, so a script lost its place in the stream.
func TestLogReadLostLog(t *testing.T) {
	const off1 = "0000000000000000_0000000000000001_1_0000abcd"
	for _, c := range []struct {
		name string
		fail func(w http.ResponseWriter)
	}{
		{"connection dropped", func(w http.ResponseWriter) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}},
		{"503", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "kafka unavailable", http.StatusServiceUnavailable)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 && r.URL.Query().Get("offset") == "-1" {
					w.Header().Set("Content-Type", "text/plain")
					w.Header().Set("Stream-Next-Offset", off1)
					w.Header().Set("Stream-Up-To-Date", "true")
					w.Write([]byte("hello"))
					return
				}
				c.fail(w)
			}))
			defer srv.Close()
			file := filepath.Join(t.TempDir(), "next")
			stdout, stderr, code := run(t, "log", "read", "--log", srv.URL, "--stream", "s", "--follow", "--offset-file", file)
			if code != 1 || stdout != "hello" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and \"hello\"", code, stdout, stderr)
			}
			if !strings.Contains(stderr, "next_offset="+off1+"\n") || !strings.Contains(stderr, "resume with --offset "+off1) {
				t.Fatalf("stderr %q: want next_offset=%s and how to resume", stderr, off1)
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != off1+"\n" {
				t.Fatalf("--offset-file: %q, %v; want %s", b, err, off1)
			}
		})
	}
	// Before any output, a log that does not answer leaves the offset file
	// alone: the offset given is not one the log confirmed.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "kafka unavailable", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "next")
	os.WriteFile(file, []byte("kept\n"), 0o644)
	_, stderr, code := run(t, "log", "read", "--log", srv.URL, "--stream", "s", "--offset", off1, "--offset-file", file)
	if b, _ := os.ReadFile(file); code != 1 || strings.Contains(stderr, "next_offset=") || string(b) != "kept\n" {
		t.Fatalf("exit %d, stderr %q, offset file %q; want 1, no next_offset, the file untouched", code, stderr, b)
	}
}
