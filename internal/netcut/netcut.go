// Package netcut is a TCP proxy whose network a test cuts and restores: the
// "network cut for a while" of the fault tests (a Kafka broker behind it
// that advertises the proxy's address, so that every client connection
// goes through it: broker.ClusterConfig.Advertise, forklab kafka serve
// --advertise).
//
// Cut stops the traffic as a partition does, not as a stopped server
// does: the connections open at that moment are dropped (their clients
// see a reset or an i/o timeout), and new ones are accepted but never
// answered, so a client waits for its own timeouts ("i/o timeout"), never
// for a quick "connection refused". Restore closes the connections held
// silent and forwards again.
package netcut

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from its own address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]bool // both sides of every forwarded connection
	held    map[net.Conn]bool // accepted during a cut, never answered
	cuts    int
	wg      sync.WaitGroup
	closing bool
}

// Start listens on 127.0.0.1 at port (0: a free one) and forwards every
// connection to target (host:port).
func Start(port string, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, held: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cuts counts the calls of Cut so far.
func (p *Proxy) Cuts() int { p.mu.Lock(); defer p.mu.Unlock(); return p.cuts }

// Cut drops every open connection and holds new ones silent until
// Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.cuts++
	for c := range p.conns {
		c.Close()
	}
}

// Restore closes the connections held during the cut and forwards new
// ones again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c := range p.held {
		c.Close()
	}
	clear(p.held)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closing = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	for c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		switch {
		case p.closing:
			c.Close()
		case p.cut:
			// Never answered: the client's own timeout ends it.
			p.held[c] = true
		default:
			p.wg.Add(1)
			go p.forward(c)
		}
		p.mu.Unlock()
	}
}

// forward copies both ways between c and a new connection to the target
// until either side ends or a cut closes them.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	t, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close() // the target is down: its client sees the connection end
		return
	}
	p.mu.Lock()
	if p.cut || p.closing {
		p.mu.Unlock()
		c.Close()
		t.Close()
		return
	}
	p.conns[c], p.conns[t] = true, true
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Go(func() { io.Copy(t, c); t.Close(); c.Close() })
	both.Go(func() { io.Copy(c, t); c.Close(); t.Close() })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, t)
	p.mu.Unlock()
}
