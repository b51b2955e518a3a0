package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/forklab/forklab/internal/atomicfile"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

func init() {
	var (
		addr, brokers, dataDir, topic, tokenFile string
		partitions, embeddedPort, replication    int
		maxBody                                  int64
		cacheMB                                  int64
		longPoll, appendTimeout                  time.Duration
		headerTimeout, bodyTimeout, writeTimeout time.Duration
		idleTimeout, dialTimeout                 time.Duration
		maxConnsPerClient, maxConns              int
		allowUnauth, noSync, quiet, kafkaOpen    bool
		recordKeyFile                            string
		cpuProfile                               string
		corsOrigins                              []string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Durable Streams protocol at /v1/stream/, stored in Kafka",
		Long: `Serve the session log over HTTP (the Durable Streams protocol, base path
/v1/stream/). With no --brokers it starts an embedded Kafka-protocol broker
persisted to --data-dir, fsyncing every batch before an append is answered;
with --brokers the same code runs on a real Kafka cluster.

Without --token-file the service only listens on loopback addresses unless
--allow-unauthenticated is given, and on loopback it answers only requests
for a loopback host (localhost, 127.0.0.1, [::1]). A token file has one
"SCOPE TOKEN" per line, SCOPE being read or read-write.

Browsers: pages from loopback origins (http://localhost:5173, …) may use the
service; a request from any other origin is refused unless --cors-origin
names it (docs/session-log.md, "Threat model").`,
		Example: `  forklab log serve --data-dir ./log                    # embedded broker, loopback only
  forklab log serve --cors-origin https://notebook.example.org   # a web app on another origin may use it
  forklab log serve --brokers k1:9092,k2:9092 --replication-factor 3 --token-file tokens.txt --addr :8080`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var bl []string
			for _, b := range strings.Split(brokers, ",") {
				if b = strings.TrimSpace(b); b != "" {
					bl = append(bl, b)
				}
			}
			if len(bl) == 0 && dataDir == "" {
				dataDir = defaultDataDir()
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return usageErr("--addr %q: %v (want host:port)", addr, err)
			}
			if tokenFile != "" {
				if _, err := server.LoadTokens(tokenFile); err != nil {
					return usageErr("--token-file: %v", err)
				}
			}
			for _, o := range corsOrigins {
				if _, err := server.ParseOrigin(o); err != nil {
					return usageErr("--cors-origin: %v", err)
				}
			}
			// The ports before anything else: on a taken one, no
			// broker starts and no data directory is created (issue 26).
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr %s: %w: another forklab log serve, or another program, holds it; stop it, or give another --addr", addr, portErr(err))
			}
			defer ln.Close() // once service.Start took it, closing it again is harmless
			if len(bl) == 0 && embeddedPort > 0 {
				kl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(embeddedPort)))
				if err != nil {
					return fmt.Errorf("--kafka-port %d: %w: another forklab log serve, or a Kafka broker, holds it; stop it, or give another --kafka-port", embeddedPort, portErr(err))
				}
				kl.Close()
			}
			if len(bl) == 0 {
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					return usageErr("--data-dir: %v", err)
				}
			}
			logf := func(format string, args ...any) {
				if !quiet {
					fmt.Fprintf(os.Stderr, format+"\n", args...)
				}
			}
			if cpuProfile != "" {
				// Written under a temporary name and put in place when
				// the server stops; a symlink or a device is refused.
				f, err := atomicfile.Output(cpuProfile, true)
				if err != nil {
					return usageErr("--cpuprofile: %v", err)
				}
				defer f.Abort()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer func() {
					pprof.StopCPUProfile()
					if err := f.Commit(); err != nil {
						fmt.Fprintf(os.Stderr, "forklab log serve: --cpuprofile: %v\n", err)
					}
				}()
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			svc, err := service.Start(ctx, service.Config{
				Addr: addr, Listener: ln, Brokers: bl, DataDir: dataDir, EmbeddedPort: embeddedPort, NoSync: noSync,
				TokenFile: tokenFile, AllowUnauthenticated: allowUnauth, KafkaUnauthenticated: kafkaOpen,
				HeaderTimeout: headerTimeout, IdleTimeout: idleTimeout,
				MaxConnsPerClient: noLimit(maxConnsPerClient), MaxConns: noLimit(maxConns),
				Log: kafkalog.Config{Topic: topic, Partitions: partitions, ReplicationFactor: replication,
					MaxRecordBytes: int(maxBody), CacheBytes: cacheMB << 20, WriteTimeout: appendTimeout, DialTimeout: dialTimeout,
					RecordKeyFile: recordKeyFile, Logf: logf},
				Server: server.Config{LongPollTimeout: longPoll, MaxBodyBytes: maxBody, BodyTimeout: bodyTimeout,
					WriteTimeout: writeTimeout, CORSOrigins: corsOrigins, Logf: logf},
			})
			if errors.Is(err, service.ErrUnsafeListen) {
				return asInput(err)
			}
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			fmt.Fprintf(out, "forklab log: listening on %s/v1/stream/\n", svc.URL)
			if svc.Broker != nil {
				closed := ""
				if svc.Broker.SASL() != nil {
					closed = ", closed to other clients (--kafka-unauthenticated opens it)"
				}
				fmt.Fprintf(out, "forklab log: data in %s (embedded Kafka broker at %s%s, topic %s, fsync per batch: %v)\n",
					svc.Broker.Dir(), strings.Join(svc.Brokers, ","), closed, svc.Log.Topic(), !noSync)
			} else {
				fmt.Fprintf(out, "forklab log: data in Kafka at %s, topic %s\n", strings.Join(svc.Brokers, ","), svc.Log.Topic())
			}
			select {
			case <-ctx.Done():
			case err := <-waitErr(svc):
				return err
			}
			fmt.Fprintln(out, "forklab log: shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			svc.Close(sctx)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:4437", "HTTP listen address")
	f.StringVar(&brokers, "brokers", "", "Kafka bootstrap brokers, host:port,… (default: start the embedded broker)")
	dialTimeoutFlag(f, &dialTimeout, "with --brokers: ")
	markNeeds(f, "dial-timeout", "brokers")
	f.StringVar(&dataDir, "data-dir", "", "embedded broker data directory (default $XDG_DATA_HOME/forklab/log)")
	intFlag(f, &embeddedPort, "kafka-port", 0, 0, 65535, "embedded broker port on 127.0.0.1 (0: a free port)")
	f.StringVar(&topic, "topic", "forklab.streams", "Kafka data topic")
	intFlag(f, &partitions, "partitions", 1, 1, 100000, "partitions when the data topic is created (an existing topic keeps its own)")
	intFlagOr(f, &replication, "replication-factor", -1, 1, 32767, -1, "the cluster's default", "replication factor when the data topic is created")
	int64Flag(f, &maxBody, "max-body", 1<<20, 1, 64<<20, "largest append or create body in bytes; larger ones get 413")
	int64Flag(f, &cacheMB, "cache-mb", 256, 1, 1<<20, "record values kept in memory, MiB; older ones are read back from Kafka")
	durationFlag(f, &longPoll, "long-poll-timeout", 20*time.Second, time.Millisecond, time.Hour, "how long a long-poll read waits for data")
	durationFlag(f, &appendTimeout, "append-timeout", 10*time.Second, time.Millisecond, time.Hour, "how long a write waits for Kafka's acknowledgement before it is answered 503 (retry with the same Producer-Seq)")
	durationFlag(f, &headerTimeout, "header-timeout", service.DefaultHeaderTimeout, time.Millisecond, time.Hour, "time a client may take to send a request's headers")
	durationFlag(f, &bodyTimeout, "body-timeout", 30*time.Second, time.Millisecond, time.Hour, "time a client may take to send a request body; slower ones get 408")
	durationFlag(f, &writeTimeout, "write-timeout", 30*time.Second, time.Millisecond, time.Hour, "time a response (each SSE event) may take to reach the client")
	durationFlag(f, &idleTimeout, "idle-timeout", service.DefaultIdleTimeout, time.Millisecond, 24*time.Hour, "how long a keep-alive connection waits for its next request")
	intFlag(f, &maxConnsPerClient, "max-conns-per-client", service.DefaultMaxConnsPerClient, 0, 1<<20, "connections one client IP may hold open; more get 429 (0: no limit)")
	intFlag(f, &maxConns, "max-conns", service.DefaultMaxConns, 0, 1<<20, "connections held open in all; more get 503 (0: no limit)")
	f.StringVar(&tokenFile, "token-file", "", `bearer tokens, one "read|read-write TOKEN" per line; turns on authentication`)
	f.BoolVar(&allowUnauth, "allow-unauthenticated", false, "allow listening beyond loopback without --token-file")
	f.StringSliceVar(&corsOrigins, "cors-origin", nil, "an origin (scheme://host[:port]) whose web pages may use the service, besides loopback ones; repeatable; * allows every origin")
	f.BoolVar(&kafkaOpen, "kafka-unauthenticated", false, "with --token-file: leave the embedded broker's Kafka port open to every client on this machine (for log sink, kcat); records written there are still never served")
	markNeeds(f, "kafka-unauthenticated", "token-file")
	f.StringVar(&recordKeyFile, "record-key-file", "", "with --brokers: the secret that authenticates the service's records, created if missing; records without it are never served (the embedded broker keeps one in --data-dir)")
	markNeeds(f, "record-key-file", "brokers")
	f.BoolVar(&noSync, "no-sync", false, "embedded broker: do not fsync every batch (faster, loses acknowledged appends on a crash)")
	// The embedded broker's flags mean nothing beside a Kafka cluster.
	for _, name := range []string{"data-dir", "kafka-port", "no-sync", "kafka-unauthenticated"} {
		markExcludes(f, name, "brokers")
	}
	f.BoolVarP(&quiet, "quiet", "q", false, "do not log operational events to stderr")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the service to this file until it stops (for make bench-log-profile)")
	f.MarkHidden("cpuprofile")
	ownSignals(cmd)
	logCmd.AddCommand(cmd)
}

// noLimit maps the flags' 0 (no limit) onto the service's negative.
func noLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func waitErr(svc *service.Service) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- svc.Wait() }()
	return ch
}

// defaultDataDir is $XDG_DATA_HOME/forklab/log, or ~/.local/share/forklab/log.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "forklab", "log")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "forklab", "log")
	}
	return "forklab-log"
}

// portErr is the part of a listen error that says why: "address already
// in use" rather than "listen tcp 127.0.0.1:4437: bind: address already in
// use", whose address the message already names.
func portErr(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sc *os.SyscallError
		if errors.As(op.Err, &sc) {
			return sc.Err
		}
		return op.Err
	}
	return err
}
