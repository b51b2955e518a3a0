package service

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/forklab/forklab/stream/server"
)

// limitListener bounds the connections the HTTP server holds open: at most
// perClient from one client IP address and total in all. A connection
// beyond a limit is answered at once, without reading its request, with
// 429 Too Many Requests (per client) or 503 Service Unavailable (in all),
// Retry-After: 1, Connection: close and the headers every response
// carries (server.CommonHeaders), and closed. With the server's
// header, body, write and idle timeouts this keeps slow or idle clients
// from exhausting the service: each holds a connection for a bounded time,
// and no client can hold more than its share.
type limitListener struct {
	net.Listener
	perClient, total int

	mu       sync.Mutex
	n        int
	byAddr   map[string]int
	refusing int // refusals being answered
}

// maxRefusing bounds the refused connections answered at once; beyond it
// a refused connection is closed without an answer.
const maxRefusing = 256

func newLimitListener(ln net.Listener, perClient, total int) *limitListener {
	return &limitListener{Listener: ln, perClient: perClient, total: total, byAddr: map[string]int{}}
}

// Accept returns the next connection within the limits, refusing the
// others.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c)
		l.mu.Lock()
		status, reason := "", ""
		switch {
		case l.total > 0 && l.n >= l.total:
			status, reason = "503 Service Unavailable", fmt.Sprintf("the server holds its limit of %d connections (--max-conns); retry", l.total)
		case l.perClient > 0 && l.byAddr[addr] >= l.perClient:
			status, reason = "429 Too Many Requests", fmt.Sprintf("%s holds its limit of %d connections (--max-conns-per-client); reuse them or retry", addr, l.perClient)
		}
		if status != "" {
			if l.refusing >= maxRefusing {
				l.mu.Unlock()
				c.Close()
				continue
			}
			l.refusing++
			l.mu.Unlock()
			go func() {
				refuse(c, status, reason)
				l.mu.Lock()
				l.refusing--
				l.mu.Unlock()
			}()
			continue
		}
		l.n++
		l.byAddr[addr]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *limitListener) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

// clientAddr is the IP address a connection comes from.
func clientAddr(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// refuse answers a connection over a limit and closes it. It reads what
// the client sends for up to two seconds first (or until the client
// closes), so that closing does not reset the connection, which would drop
// the answer, before the client has read it.
func refuse(c net.Conn, status, reason string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	body := reason + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %s\r\n%sContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, server.CommonHeaders(), len(body), body)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// limitedConn gives its slot back when it closes.
type limitedConn struct {
	net.Conn
	l    *limitListener
	addr string
	once sync.Once
}

// Close closes the connection and releases its slot, once.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
