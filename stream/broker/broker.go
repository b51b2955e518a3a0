// Package broker runs the embedded Kafka-protocol broker the session log
// uses when no --brokers are given: franz-go's kfake, one node, persisted to
// a data directory. Durability is the session log's to ask for. By default
// each batch the log produces is also written to the broker's write-ahead
// file of its partition (Journal: preallocated and zero-filled, so that
// its fdatasync commits no file-system metadata) and synced while kfake
// takes the batch; the log answers the appends once both are done. kfake's
// own segment files are synced at checkpoints (a full journal, a failed
// write, a clean stop), and on start the journal's records that kfake's
// files lost are produced again at their offsets (wal.go). Without the
// journal, SyncPartition fdatasyncs the partition's segment file after
// each produce, outside kfake's request loop; kfake's own SyncWrites would
// sync two files per batch inside its loop (see docs/session-log.md,
// "Where an append's time goes").
//
// It is a real Kafka wire-protocol server: kafka-go talks to it as to any
// broker, and so do kcat and other Kafka tools.
package broker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/forklab/forklab/internal/dirlock"
)

// Config configures the embedded broker.
type Config struct {
	// DataDir is where the broker persists its log; created if missing.
	DataDir string
	// Port to listen on at 127.0.0.1; 0 picks a free one.
	Port int
	// MaxMessageBytes is the broker's message.max.bytes: the largest
	// record batch it accepts. Default 16 MiB.
	MaxMessageBytes int
	// NoSync makes SyncPartition a no-op (tests that do not crash).
	NoSync bool
	// KfakeSync has kfake fsync every batch itself (kfake.SyncWrites) and
	// SyncPartition do nothing: the broker's own durability, two syncs
	// per batch inside its request loop. For comparison in the benchmarks.
	KfakeSync bool
	// JournalBytes is the size of each partition's write-ahead file
	// (Journal); default DefaultJournalBytes (16 MiB).
	JournalBytes int64
	// Credentials, when set, close the broker to every client that does
	// not authenticate with them (SASL PLAIN; kfake then refuses every
	// request but ApiVersions and the SASL handshake before it). The
	// session log with tokens passes credentials it made up and kept to
	// itself, so that the Kafka port is not a way around the tokens.
	Credentials *Credentials
}

// Credentials are a SASL PLAIN user name and password. Over loopback
// the password is not seen by other users of the machine.
type Credentials struct{ User, Password string }

// NewCredentials makes up credentials no one else knows: the password is
// 32 random bytes, hex-encoded, and lives only in this process.
func NewCredentials() *Credentials {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return &Credentials{User: "forklab-log", Password: hex.EncodeToString(b)}
}

// Mechanism is the kafka-go SASL mechanism that authenticates with c; nil
// for nil credentials.
func (c *Credentials) Mechanism() sasl.Mechanism {
	if c == nil {
		return nil
	}
	return plain.Mechanism{Username: c.User, Password: c.Password}
}

// Broker is a running embedded broker.
type Broker struct {
	c      *kfake.Cluster
	dir    string
	unlock func()
	sync   bool // SyncPartition syncs

	walDir   string // the write-ahead files (Journal)
	walBytes int64

	closeOnce sync.Once

	mu       sync.Mutex
	parts    map[string]*segments // by partition directory
	journals map[string]*Journal  // by topic

	// Recovered is how many records Start produced again from the
	// write-ahead files: acknowledged records kfake's files had lost (a
	// crash of the machine), or that it held unsynced.
	Recovered int

	creds *Credentials
}

// LockName is the lock file the broker holds in its data directory: two
// brokers writing one directory would each number records from the same
// offsets (pipeline/dirlock).
const LockName = ".forklab-broker.lock"

// Start starts the broker, reloading whatever DataDir holds.
func Start(cfg Config) (*Broker, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("embedded broker: no data directory")
	}
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "kafka"))
	if err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	unlock, err := dirlock.Lock(cfg.DataDir, LockName)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: data directory %w; stop the other forklab log serve or use another --data-dir", err)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 16 << 20
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DataDir(dir),
		kfake.ClusterID("forklab-embedded"),
		kfake.BrokerConfigs(map[string]string{
			"message.max.bytes": strconv.Itoa(cfg.MaxMessageBytes),
			// Compact the snapshot topic every 10 minutes (kfake's
			// default is an hour), so that old snapshots do not pile up.
			"log.cleaner.backoff.ms": "600000",
		}),
	}
	if cfg.Port > 0 {
		opts = append(opts, kfake.Ports(cfg.Port))
	}
	if cfg.KfakeSync && !cfg.NoSync {
		opts = append(opts, kfake.SyncWrites())
	}
	if c := cfg.Credentials; c != nil {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser("PLAIN", c.User, c.Password))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded broker in %s: %w", dir, err)
	}
	if cfg.JournalBytes <= 0 {
		cfg.JournalBytes = DefaultJournalBytes
	}
	b := &Broker{c: c, dir: dir, unlock: unlock, sync: !cfg.NoSync && !cfg.KfakeSync, parts: map[string]*segments{},
		walDir: filepath.Join(filepath.Dir(dir), walDir), walBytes: max(cfg.JournalBytes, 2*walHeaderSize),
		journals: map[string]*Journal{}, creds: cfg.Credentials}
	if b.sync {
		// What kfake wrote before (a previous run that crashed, the
		// cluster's metadata) is made durable once; then what the
		// write-ahead files hold beyond it is produced again.
		err := syncTree(dir)
		if err == nil {
			err = os.MkdirAll(b.walDir, 0o755)
		}
		if err == nil {
			err = b.recoverJournals()
		}
		if err != nil {
			c.Close()
			unlock()
			return nil, fmt.Errorf("embedded broker in %s: %w", dir, err)
		}
	}
	return b, nil
}

// Addrs are the broker's listen addresses, host:port.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// SASL is the mechanism a client of this broker authenticates with: nil
// unless the broker was started with Credentials.
func (b *Broker) SASL() sasl.Mechanism { return b.creds.Mechanism() }

// Dir is the directory the broker persists to.
func (b *Broker) Dir() string { return b.dir }

// Cluster exposes the kfake cluster, for fault injection in tests
// (Cluster.Fault) and for retention (Cluster.DeleteRecords).
func (b *Broker) Cluster() *kfake.Cluster { return b.c }

// Close shuts the broker down, syncing its files, and releases the data
// directory.
func (b *Broker) Close() {
	b.closeOnce.Do(func() {
		b.c.Close()
		synced := b.sync && syncTree(b.dir) == nil
		b.release(synced)
	})
}

// crash stops the broker as a crash leaves it, for tests: nothing
// synced, the journals as they are.
func (b *Broker) crash() {
	b.closeOnce.Do(func() {
		b.c.Close()
		b.release(false)
	})
}

// release closes the files and the data directory's lock; synced says
// kfake's files hold everything.
func (b *Broker) release(synced bool) {
	b.mu.Lock()
	for _, s := range b.parts {
		s.close()
	}
	b.parts = map[string]*segments{}
	for _, j := range b.journals {
		// Everything is synced in kfake's files now: a new epoch
		// leaves the next start nothing to read in the journal.
		j.close(synced)
	}
	b.mu.Unlock()
	b.unlock()
}
