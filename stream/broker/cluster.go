package broker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/forklab/forklab/internal/dirlock"
)

// ClusterConfig configures a development Kafka cluster: several brokers
// (franz-go's kfake) in one process, for testing what runs against a real
// multi-broker cluster (`forklab log serve --brokers`, consumer groups)
// without one. Topics are replicated across the brokers (replication factor
// up to the number of brokers, 3 by default), partition leaders spread over
// them, so clients must route each request to the right broker.
type ClusterConfig struct {
	// Brokers is the number of brokers; default 3.
	Brokers int
	// DataDir persists the cluster's data; "" keeps it in memory.
	DataDir string
	// Ports are the brokers' ports on 127.0.0.1, one per broker; empty
	// picks free ones.
	Ports []int
	// Sync fsyncs every produced batch (kfake.SyncWrites) before it is
	// acknowledged; otherwise acknowledged means "on every replica", as on
	// a real cluster, and the data reaches the disk later.
	Sync bool
	// MaxMessageBytes is the brokers' message.max.bytes; default 16 MiB.
	MaxMessageBytes int
	// MinInsyncReplicas is the cluster's min.insync.replicas; default 2
	// (1 with a single broker).
	MinInsyncReplicas int
	// Advertise, if set, holds one host:port per broker: the address the
	// broker gives clients in its metadata instead of the one it listens
	// on (Kafka's advertised.listeners), for a broker reached through a
	// port forward or a proxy (the fault tests' netcut proxy).
	Advertise []string
}

// Cluster is a running development cluster.
type Cluster struct {
	c      *kfake.Cluster
	unlock func()
}

// StartCluster starts a development cluster.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Brokers <= 0 {
		cfg.Brokers = 3
	}
	if len(cfg.Ports) > 0 && len(cfg.Ports) != cfg.Brokers {
		return nil, fmt.Errorf("cluster: %d ports for %d brokers", len(cfg.Ports), cfg.Brokers)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 16 << 20
	}
	if cfg.MinInsyncReplicas <= 0 {
		cfg.MinInsyncReplicas = min(2, cfg.Brokers)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(cfg.Brokers),
		kfake.ClusterID("forklab-dev"),
		kfake.BrokerConfigs(map[string]string{
			"message.max.bytes":          strconv.Itoa(cfg.MaxMessageBytes),
			"default.replication.factor": strconv.Itoa(min(3, cfg.Brokers)),
			"min.insync.replicas":        strconv.Itoa(cfg.MinInsyncReplicas),
		}),
	}
	if len(cfg.Ports) > 0 {
		opts = append(opts, kfake.Ports(cfg.Ports...))
	}
	if len(cfg.Advertise) > 0 {
		if len(cfg.Advertise) != cfg.Brokers {
			return nil, fmt.Errorf("cluster: %d advertised addresses for %d brokers", len(cfg.Advertise), cfg.Brokers)
		}
		next := 0 // kfake opens the brokers' listeners in order
		opts = append(opts, kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			l, err := net.Listen(network, addr)
			if err != nil || next >= len(cfg.Advertise) {
				return l, err
			}
			next++
			return advertised{l, cfg.Advertise[next-1]}, nil
		}))
	}
	unlock := func() {}
	if cfg.DataDir != "" {
		dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "kafka"))
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if unlock, err = dirlock.Lock(cfg.DataDir, LockName); err != nil {
			return nil, fmt.Errorf("cluster: data directory %w; stop the other cluster or use another --data-dir", err)
		}
		opts = append(opts, kfake.DataDir(dir))
		if cfg.Sync {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &Cluster{c: c, unlock: unlock}, nil
}

// Addrs are the brokers' addresses, host:port: the bootstrap list.
func (c *Cluster) Addrs() []string { return c.c.ListenAddrs() }

// Kfake exposes the kfake cluster (fault injection, leader moves).
func (c *Cluster) Kfake() *kfake.Cluster { return c.c }

// Close stops the cluster, saving its data when it has a data directory.
func (c *Cluster) Close() {
	c.c.Close()
	c.unlock()
}

// advertised is a listener that names another address than its own.
type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr { return advAddr(a.addr) }

type advAddr string

func (a advAddr) Network() string { return "tcp" }
func (a advAddr) String() string  { return string(a) }
