package main

import "github.com/spf13/cobra"

// logCmd groups the session-log subcommands (log_*.go).
var logCmd = &cobra.Command{
	Use:   "log",
	Short: "The session log: Durable Streams over Kafka with producer epochs that fence zombie workers",
}

func init() { rootCmd.AddCommand(logCmd) }
