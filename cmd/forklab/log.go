package main

import "github.com/spf13/cobra"

// logCmd groups the session-log subcommands (log_*.go).
var logCmd = &cobra.Command{
	Use:   "log",
	Short: "The session log: Durable Streams over Kafka with producer epochs that fence zombie workers",
	Long: `log groups the session log's commands: serve runs the log service (the
Durable Streams protocol, stored in Kafka); read follows a stream from an
offset; export writes chosen streams' events as Parquet; sink copies every
event into Parquet continuously, exactly once; bench loads servers side by
side. docs/session-log.md describes the service, docs/sessions.md the
agent sessions it holds.`,
	Example: `  forklab log serve --data-dir ./log
  forklab log read --stream demo --offsets
  forklab log sink --out out --follow`,
}

func init() { rootCmd.AddCommand(logCmd) }
