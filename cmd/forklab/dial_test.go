package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every command that dials Kafka takes --dial-timeout and, when nothing
// answers there — here a port that accepts connections and never replies,
// as a firewall or a wedged broker does — gives up within it with exit 1
// and one message naming the brokers, the wait and what to check (issue
// 12: forklab log sink waited 30 s with no way to shorten it).
func TestDialTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	hung := ln.Addr().String()
	want := "forklab: Kafka at " + hung + " did not answer within 700ms (last: "
	for _, args := range [][]string{
		{"log", "sink", "--out", t.TempDir(), "--brokers", hung, "-q"},
		{"log", "serve", "--brokers", hung, "--addr", "127.0.0.1:0", "--quiet"},
		{"worker", "--brokers", hung, "-q"},
		{"sweep", "--distributed", "--brokers", hung, "--seeds", "0:10", "--out", filepath.Join(t.TempDir(), "o"), "-q"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			args := append(args, "--dial-timeout", "700ms")
			start := time.Now()
			_, stderr, code := run(t, args...)
			took := time.Since(start)
			if code != 1 || !strings.HasPrefix(stderr, want) || !strings.HasSuffix(stderr, "): is it running, and is --brokers right? (forklab log serve --kafka-port 9092 runs one on this machine; --dial-timeout sets the wait)\n") ||
				strings.Count(stderr, "\n") != 1 {
				t.Errorf("forklab %s: exit %d, %q; want 1 and one line starting %q", strings.Join(args, " "), code, stderr, want)
			}
			// Bounded by the flag (with room for a busy machine), not
			// the client library's 10 to 30 s.
			if took > 6*time.Second {
				t.Errorf("forklab %s: gave up after %s", strings.Join(args, " "), took)
			}
		})
	}
}
