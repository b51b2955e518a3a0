// Package service wires the session log together: the embedded broker (or
// a real Kafka cluster), the kafkalog.Log over it, and the HTTP server, with
// the listening rules for access control. cmd/forklab's "log serve" and the
// tests start the same thing through it.
package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
)

// Config configures a Service.
type Config struct {
	// Addr is the HTTP listen address; default 127.0.0.1:4437 (the
	// protocol's default port, §13.1). Port 0 picks a free one.
	Addr string
	// Listener, if set, is the HTTP listener, already open on Addr: the
	// caller opened it before anything else, so that a taken port is
	// refused before a broker starts or a data directory is created.
	// Without it Start listens on Addr first thing. Start owns it: it is
	// closed when Start fails or the service closes.
	Listener net.Listener
	// Brokers of a Kafka cluster; empty starts the embedded broker.
	Brokers []string
	// DataDir holds the embedded broker's data; required without Brokers.
	DataDir string
	// EmbeddedPort is the embedded broker's port; 0 picks a free one.
	EmbeddedPort int
	// NoSync turns off the embedded broker's fsync per batch (tests only).
	NoSync bool
	// KfakeSync has the embedded broker sync every batch inside kfake
	// (two fsyncs in its request loop) instead of the log syncing the
	// partition after each produce; for the benchmarks' comparison.
	KfakeSync bool
	// NoJournal makes the log fdatasync the embedded broker's segment
	// file after each produce (SyncPartition) instead of writing each
	// batch to the broker's write-ahead file (broker.Journal) while it is
	// produced; for the benchmarks' comparison.
	NoJournal bool
	// Log configures the Kafka mapping (topic, partitions, limits).
	Log kafkalog.Config
	// Server configures the HTTP layer; its Log field is filled in.
	Server server.Config
	// TokenFile turns on bearer-token authentication.
	TokenFile string
	// AllowUnauthenticated permits listening beyond loopback without
	// tokens.
	AllowUnauthenticated bool
	// KafkaUnauthenticated leaves the embedded broker's Kafka port open
	// to every client on the machine although TokenFile is set (for
	// forklab log sink, kcat, workers). Without it, with tokens, the
	// broker takes only the service's own connections (SASL with
	// credentials the service makes up at each start and keeps to
	// itself): the port is no way around the tokens.
	KafkaUnauthenticated bool
	// HeaderTimeout bounds the time a client may take to send a request's
	// headers; default 10s. The body's time is Server.BodyTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request; default 60s.
	IdleTimeout time.Duration
	// MaxConnsPerClient bounds the connections one client IP address may
	// hold open; beyond it a connection is answered 429 and closed.
	// Default 256; negative means no limit.
	MaxConnsPerClient int
	// MaxConns bounds the connections held open in all; beyond it a
	// connection is answered 503 and closed. Default 4096; negative means
	// no limit.
	MaxConns int
}

// Defaults of the connection limits.
const (
	DefaultHeaderTimeout     = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConnsPerClient = 256
	DefaultMaxConns          = 4096
)

// RecordKeyName is the file in the data directory that holds the
// embedded broker's record key (kafkalog.Config.RecordKeyFile).
const RecordKeyName = "record-key.json"

// Service is a running session-log service.
type Service struct {
	Log      *kafkalog.Log
	Broker   *broker.Broker // nil on a real cluster
	URL      string         // base URL, e.g. http://127.0.0.1:4437
	Brokers  []string
	ln       net.Listener
	srv      *http.Server
	serveErr chan error
}

// ErrUnsafeListen is returned for a non-loopback address without tokens.
var ErrUnsafeListen = errors.New("refusing to listen beyond loopback without --token-file; pass --allow-unauthenticated to do it anyway")

// Start starts the service and returns once it accepts requests.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:4437"
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", cfg.Addr, err)
	}
	ln := cfg.Listener
	if cfg.TokenFile == "" && !cfg.AllowUnauthenticated && !server.LoopbackName(host) {
		closeListener(ln)
		return nil, ErrUnsafeListen
	}
	// On loopback without tokens, a request must name a loopback host: a
	// web page that rebinds its own name to 127.0.0.1 does not.
	cfg.Server.LoopbackHostsOnly = cfg.TokenFile == "" && server.LoopbackName(host)
	for _, o := range cfg.Server.CORSOrigins {
		if _, err := server.ParseOrigin(o); err != nil {
			return nil, fmt.Errorf("--cors-origin: %w", err)
		}
	}
	if cfg.TokenFile != "" {
		t, err := server.LoadTokens(cfg.TokenFile)
		if err != nil {
			closeListener(ln)
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		cfg.Server.Tokens = t
	}
	// The port first: on a taken one nothing else starts.
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, err
		}
	}
	s := &Service{serveErr: make(chan error, 1)}
	brokers := cfg.Brokers
	if len(brokers) == 0 {
		if cfg.DataDir == "" {
			ln.Close()
			return nil, errors.New("no --brokers and no --data-dir for the embedded broker")
		}
		// The broker must accept a whole group-commit batch: twice the
		// larger of the batch and record limits, and at least 16 MiB;
		// its journal holds at least two such batches.
		maxMsg := max(16<<20, 2*max(cfg.Log.MaxBatchBytes, cfg.Log.MaxRecordBytes)+4<<20)
		var creds *broker.Credentials
		if cfg.TokenFile != "" && !cfg.KafkaUnauthenticated {
			creds = broker.NewCredentials()
		}
		b, err := broker.Start(broker.Config{DataDir: cfg.DataDir, Port: cfg.EmbeddedPort, NoSync: cfg.NoSync,
			KfakeSync: cfg.KfakeSync, MaxMessageBytes: maxMsg, JournalBytes: int64(maxMsg), Credentials: creds})
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.Broker = b
		brokers = b.Addrs()
		cfg.Log.SASL = b.SASL()
		topic := cfg.Log.Topic
		if topic == "" {
			topic = kafkalog.DefaultTopic
		}
		cfg.Log.Sync = func(part int32) error { return b.SyncPartition(topic, part) }
		if j := b.Journal(topic); j != nil && !cfg.NoJournal {
			cfg.Log.Journal = journal{j}
		}
		if cfg.Log.RecordKeyFile == "" {
			// Only the log writes the topic: records anyone else
			// produces to the broker are never folded in.
			cfg.Log.RecordKeyFile = filepath.Join(cfg.DataDir, RecordKeyName)
		}
		snapTopic := cfg.Log.SnapshotTopic
		if snapTopic == "" {
			snapTopic = topic + ".snapshots"
		}
		cfg.Log.SyncSnapshot = func(part int32) error { return b.SyncPartition(snapTopic, part) }
	}
	s.Brokers = brokers
	cfg.Log.Brokers = brokers
	l, err := kafkalog.Open(ctx, cfg.Log)
	if err != nil {
		ln.Close()
		s.closeBroker()
		return nil, err
	}
	s.Log = l
	cfg.Server.Log = l
	s.URL = "http://" + ln.Addr().String()
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConnsPerClient == 0 {
		cfg.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	h, err := server.New(cfg.Server)
	if err != nil {
		ln.Close()
		l.Close()
		s.closeBroker()
		return nil, fmt.Errorf("--cors-origin: %w", err)
	}
	s.ln = newLimitListener(ln, cfg.MaxConnsPerClient, cfg.MaxConns)
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: cfg.HeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: 64 << 10}
	s.srv.RegisterOnShutdown(h.Shutdown)
	go func() { s.serveErr <- s.srv.Serve(s.ln) }()
	return s, nil
}

func closeListener(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// Wait blocks until the HTTP server stops on its own and returns its error.
func (s *Service) Wait() error { return <-s.serveErr }

// Close stops accepting requests, lets requests in flight finish (up to
// ctx), then stops the log and the embedded broker.
func (s *Service) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	s.Log.Close()
	s.closeBroker()
	return err
}

func (s *Service) closeBroker() {
	if s.Broker != nil {
		s.Broker.Close()
	}
}

// journal hands the log's batches to the embedded broker's write-ahead
// file.
type journal struct{ j *broker.Journal }

func (j journal) Write(part int32, base int64, recs []kafkalog.JournalRecord) func() error {
	brecs := make([]broker.Record, len(recs))
	for i, r := range recs {
		brecs[i] = broker.Record(r)
	}
	return j.j.Write(part, base, brecs)
}

func (j journal) Checkpoint(part int32) error { return j.j.Checkpoint(part) }
