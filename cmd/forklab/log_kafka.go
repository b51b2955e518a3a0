package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/stream/broker"
)

// kafkaCmd groups the development Kafka cluster.
var kafkaCmd = &cobra.Command{
	Use:   "kafka",
	Short: "A development Kafka cluster (several kfake brokers in one process) for tests and trials",
	Long: `kafka groups the development cluster's commands: serve runs several
Kafka-protocol brokers (franz-go's kfake) in one process with replicated
topics, for trying the session log's --brokers and distributed sweeps
(forklab sweep --distributed, forklab worker) without a real cluster.`,
	Example: `  forklab kafka serve --brokers 3 --addr-file /tmp/kafka.addrs &
  forklab sweep --distributed --brokers "$(cat /tmp/kafka.addrs)" --out /shared/out --seeds 0:1000000`,
}

func init() {
	var (
		brokers           int
		dataDir, addrFile string
		ports, advertise  string
		sync              bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Kafka-protocol cluster of several brokers, replicated topics, until interrupted",
		Long: `Run a development Kafka cluster: --brokers brokers (franz-go's kfake) in
this process, on 127.0.0.1, with topics replicated across them (replication
factor up to 3 by default, min.insync.replicas 2) and partition leaders
spread over them, so that clients must route every request to the right
broker. It prints the bootstrap addresses on stdout and, with --addr-file,
writes them to that file (one line, comma-separated; written once every
broker listens), then runs until SIGINT or SIGTERM.

It is for testing what runs against a real cluster without one:
'forklab log serve --brokers ADDRS --replication-factor 3' (make
log-cluster-test), Kafka consumer groups. It is not a production broker.`,
		Example: `  forklab kafka serve --brokers 3 --addr-file /tmp/kafka.addrs &
  forklab log serve --brokers "$(cat /tmp/kafka.addrs)" --replication-factor 3 --partitions 3`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := broker.ClusterConfig{Brokers: brokers, DataDir: dataDir, Sync: sync}
			if ports != "" {
				for _, p := range strings.Split(ports, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(p))
					if err != nil || n < 1 || n > 65535 {
						return usageErr("--ports %q: want %d port numbers, each an integer in [1, 65535], comma-separated", ports, brokers)
					}
					cfg.Ports = append(cfg.Ports, n)
				}
				if len(cfg.Ports) != brokers {
					return usageErr("--ports names %d ports for %d brokers", len(cfg.Ports), brokers)
				}
			}
			if advertise != "" {
				cfg.Advertise = splitList(advertise)
				if len(cfg.Advertise) != brokers {
					return usageErr("--advertise names %d addresses for %d brokers", len(cfg.Advertise), brokers)
				}
				for _, a := range cfg.Advertise {
					if _, p, err := net.SplitHostPort(a); err != nil || p == "" {
						return usageErr("--advertise %q: want host:port,… (one per broker)", advertise)
					}
				}
			}
			if sync && dataDir == "" {
				return usageErr("--sync needs --data-dir")
			}
			if addrFile != "" {
				if err := atomicfile.CheckReplaceable(addrFile); err != nil {
					return asInput(fmt.Errorf("--addr-file: %w", err))
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cl, err := broker.StartCluster(cfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			addrs := strings.Join(cl.Addrs(), ",")
			if addrFile != "" {
				if err := atomicfile.WriteFile(addrFile, []byte(addrs+"\n")); err != nil {
					return fmt.Errorf("--addr-file: %w", err)
				}
				defer os.Remove(addrFile)
			}
			where := "in memory"
			if dataDir != "" {
				where = "data in " + dataDir
			}
			fmt.Fprintf(c.OutOrStdout(), "forklab kafka: %d brokers at %s (%s)\n", brokers, addrs, where)
			<-ctx.Done()
			fmt.Fprintln(c.OutOrStdout(), "forklab kafka: shutting down")
			return nil
		},
	}
	f := cmd.Flags()
	intFlag(f, &brokers, "brokers", 3, 1, 64, "number of brokers")
	f.StringVar(&dataDir, "data-dir", "", "persist the cluster's data here (default: in memory)")
	f.StringVar(&ports, "ports", "", "the brokers' ports on 127.0.0.1, comma-separated (default: free ports)")
	f.StringVar(&addrFile, "addr-file", "", "write the bootstrap addresses (host:port,…) to this file once the cluster listens; removed on exit")
	f.StringVar(&advertise, "advertise", "", "the brokers' addresses as clients must dial them, host:port,… one per broker (Kafka's advertised.listeners: a port forward, a proxy; default: the listening addresses)")
	f.BoolVar(&sync, "sync", false, "fsync every produced batch before acknowledging it (needs --data-dir)")
	ownSignals(cmd)
	kafkaCmd.AddCommand(cmd)
	rootCmd.AddCommand(kafkaCmd)
}
