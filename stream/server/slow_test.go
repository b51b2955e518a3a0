package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/service"
)

// Slow clients: the limits of the connection, tested with raw TCP clients
// that send their request as slowly as they like.

const (
	slowHeaderTimeout = 400 * time.Millisecond
	slowBodyTimeout   = 600 * time.Millisecond
)

func startSlow(t *testing.T, perClient int) *service.Service {
	return startSlowBody(t, perClient, slowBodyTimeout)
}

func startSlowBody(t *testing.T, perClient int, body time.Duration) *service.Service {
	return start(t, t.TempDir(), func(c *service.Config) {
		c.HeaderTimeout = slowHeaderTimeout
		c.Server.BodyTimeout = body
		c.IdleTimeout = time.Second
		c.MaxConnsPerClient = perClient
	})
}

// dialFrom opens a TCP connection to the service from a local loopback
// address (127.0.0.1, 127.0.0.2, …: distinct clients to the service).
func dialFrom(t *testing.T, svc *service.Service, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	return c
}

// trickle sends s one byte every gap, stopping at the first write error.
func trickle(c net.Conn, s string, gap time.Duration) {
	for i := 0; i < len(s); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(gap)
	}
}

// readAnswer reads an HTTP response from c; the status is 0 when the
// server closed the connection without one.
func readAnswer(t *testing.T, c net.Conn, within time.Duration) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err.Error()
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

// TestTrickledBody sends a request body one byte every 100 ms: the server
// answers 408 once the body timeout has passed and closes the connection;
// nothing is written.
func TestTrickledBody(t *testing.T) {
	svc := startSlow(t, 0)
	defer stop(svc)
	do(t, "PUT", svc.URL+"/v1/stream/slow", map[string]string{"Content-Type": "text/plain"}, "")
	hw := highWatermark(t, svc)
	c := dialFrom(t, svc, "127.0.0.1")
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/stream/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n")
	t0 := time.Now()
	go trickle(c, strings.Repeat("x", 100), 100*time.Millisecond)
	res, errText := readAnswer(t, c, 5*time.Second)
	if res == nil {
		t.Fatalf("no answer to a trickled body: %s", errText)
	}
	took := time.Since(t0)
	if res.StatusCode != http.StatusRequestTimeout || !res.Close ||
		res.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("trickled body: %d Connection: close %v Content-Type=%q, want 408, close, text/plain",
			res.StatusCode, res.Close, res.Header.Get("Content-Type"))
	}
	if took < slowBodyTimeout/2 || took > slowBodyTimeout+3*time.Second {
		t.Fatalf("trickled body answered after %s; the body timeout is %s", took, slowBodyTimeout)
	}
	// The connection is closed: the next read ends.
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
		t.Fatalf("connection after the 408: %v, want it closed", err)
	}
	if got := highWatermark(t, svc); got != hw {
		t.Fatalf("Kafka high watermark moved from %d to %d", hw, got)
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe"))
}

// TestTrickledHeaders sends request headers one byte every 100 ms: the
// server closes the connection once the header timeout has passed (Go's
// HTTP server answers such a request 400 with Connection: close).
func TestTrickledHeaders(t *testing.T) {
	svc := startSlow(t, 0)
	defer stop(svc)
	c := dialFrom(t, svc, "127.0.0.1")
	defer c.Close()
	t0 := time.Now()
	go trickle(c, "GET /v1/stream/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "+strings.Repeat("y", 200)+"\r\n\r\n", 100*time.Millisecond)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	took := time.Since(t0)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %s; the header timeout is %s", took, slowHeaderTimeout)
	}
	if took > slowHeaderTimeout+3*time.Second {
		t.Fatalf("connection closed after %s; the header timeout is %s", took, slowHeaderTimeout)
	}
	if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 400 ") && !strings.HasPrefix(string(b), "HTTP/1.1 408 ") {
		t.Fatalf("answer to trickled headers: %q", b)
	}
}

// TestIdleConnectionClosed leaves a keep-alive connection idle: the server
// closes it after the idle timeout.
func TestIdleConnectionClosed(t *testing.T) {
	svc := startSlow(t, 0)
	defer stop(svc)
	c := dialFrom(t, svc, "127.0.0.1")
	defer c.Close()
	fmt.Fprintf(c, "HEAD /v1/stream/none HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if res, e := readAnswer(t, c, 3*time.Second); res == nil || res.StatusCode != 404 {
		t.Fatalf("HEAD: %v %s", res, e)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
		t.Fatalf("idle connection: %v, want it closed after the idle timeout", err)
	}
}

// TestConnectionsPerClient opens more connections from one client than
// it may hold: the extra ones are answered 429 with Retry-After at once,
// and closed; other clients are served; a slot is free again once a
// connection closes.
func TestConnectionsPerClient(t *testing.T) {
	svc := startSlow(t, 3)
	defer stop(svc)
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c := dialFrom(t, svc, "127.0.0.1")
		defer c.Close()
		held = append(held, c)
	}
	extra := dialFrom(t, svc, "127.0.0.1")
	defer extra.Close()
	res, body := readAnswer(t, extra, 3*time.Second)
	if res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" ||
		!res.Close || !strings.Contains(body, "--max-conns-per-client") {
		t.Fatalf("fourth connection: %+v %q, want 429 with Retry-After: 1 naming --max-conns-per-client", res, body)
	}
	// The headers of every response (§12.7, CORS), so that a browser sees
	// the 429 and may read its Retry-After; they were missing.
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "cross-origin",
		"Access-Control-Allow-Origin": "*", "Cache-Control": "no-store", "Content-Type": "text/plain; charset=utf-8"} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("429: %s %q, want %q", k, got, want)
		}
	}
	if exp := res.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(exp, "Retry-After") || !strings.Contains(exp, "Stream-Next-Offset") {
		t.Errorf("429: Access-Control-Expose-Headers %q, want the server's list with Retry-After", exp)
	}
	// Another client is served.
	other := dialFrom(t, svc, "127.0.0.2")
	defer other.Close()
	fmt.Fprintf(other, "HEAD /v1/stream/none HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if res, e := readAnswer(t, other, 3*time.Second); res == nil || res.StatusCode != 404 {
		t.Fatalf("another client: %v %s, want 404", res, e)
	}
	// A slot frees when a connection closes.
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialFrom(t, svc, "127.0.0.1")
		fmt.Fprintf(c, "HEAD /v1/stream/none HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		res, _ := readAnswer(t, c, 3*time.Second)
		c.Close()
		if res != nil && res.StatusCode == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a connection closed: %v", res)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestManySlowClients has 300 clients from one address trickle their
// request bodies: the service holds only its per-client share of them,
// refuses the rest at once, keeps serving other clients promptly, and
// cuts every slow one off after the body timeout.
func TestManySlowClients(t *testing.T) {
	const slow, perClient = 300, 256
	// A body timeout long enough for all 300 to connect before the first
	// is cut off (a freed slot would let one more in).
	svc := startSlowBody(t, perClient, 2*time.Second)
	defer stop(svc)
	// Every request but the slow ones comes from another address.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequest("PUT", svc.URL+"/v1/stream/many", nil)
	req.Header.Set("Content-Type", "text/plain")
	if res, err := other.Do(req); err != nil || res.StatusCode != 201 {
		t.Fatalf("create: %v %v", res, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := 0; i < slow; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialFrom(t, svc, "127.0.0.1")
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/stream/many HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n")
			go trickle(c, strings.Repeat("x", 1000), 200*time.Millisecond)
			res, e := readAnswer(t, c, 10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if res == nil {
				// A refused connection the client did not read before
				// the server closed it (a very busy machine): the
				// reset drops the 429.
				if !isReset(errors.New(e)) {
					t.Errorf("no answer: %s", e)
				}
				statuses[http.StatusTooManyRequests]++
			} else {
				statuses[res.StatusCode]++
			}
		}()
	}
	// Meanwhile another client appends and reads, promptly.
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest("POST", svc.URL+"/v1/stream/many", strings.NewReader("ok;"))
		req.Header.Set("Content-Type", "text/plain")
		t0 := time.Now()
		res, err := other.Do(req)
		if err != nil {
			t.Fatalf("append of another client during the flood: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != 204 || time.Since(t0) > 2*time.Second {
			t.Fatalf("append of another client during the flood: %d after %s", res.StatusCode, time.Since(t0))
		}
	}
	wg.Wait()
	if statuses[http.StatusRequestTimeout] != perClient || statuses[http.StatusTooManyRequests] != slow-perClient {
		t.Fatalf("answers to the slow clients: %v, want %d × 408 and %d × 429", statuses, perClient, slow-perClient)
	}
	res, err := other.Get(svc.URL + "/v1/stream/many")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(got) != "ok;ok;ok;ok;ok;" {
		t.Fatalf("stream %q: the slow clients wrote", got)
	}
}
