package brokertest

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/netcut"
	"github.com/forklab/forklab/stream/broker"
)

// Cut is a one-broker development cluster (broker.StartCluster) behind a
// netcut proxy that it advertises, so that every client connection goes
// through the proxy: the test cuts the network (Proxy.Cut), or stops the
// broker and starts it again on the same port (and data directory, if
// any).
type Cut struct {
	t     testing.TB
	cfg   broker.ClusterConfig
	c     *broker.Cluster
	Proxy *netcut.Proxy
}

// StartCut starts the broker, persisted to dataDir ("" keeps it in
// memory), and its proxy; both stop when the test ends.
func StartCut(t testing.TB, dataDir string) *Cut {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p, err := netcut.Start("0", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	b := &Cut{t: t, Proxy: p, cfg: broker.ClusterConfig{Brokers: 1, Ports: []int{port}, Advertise: []string{p.Addr()}, DataDir: dataDir}}
	b.Start()
	t.Cleanup(func() {
		if b.c != nil {
			b.c.Close()
		}
		p.Close()
	})
	return b
}

// Start starts the broker (again), retrying for 5s while its port is
// still taken.
func (b *Cut) Start() {
	b.t.Helper()
	var err error
	for range 50 {
		if b.c, err = broker.StartCluster(b.cfg); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatal(err)
}

// Stop stops the broker.
func (b *Cut) Stop() { b.c.Close(); b.c = nil }

// Brokers is the bootstrap list: the proxy.
func (b *Cut) Brokers() []string { return []string{b.Proxy.Addr()} }
