package main

import (
	"errors"
	"os"

	"github.com/forklab/forklab/pipeline/report"
	"github.com/forklab/forklab/pipeline/results"
	"github.com/forklab/forklab/pipeline/sweep"
	"github.com/spf13/cobra"
)

func init() {
	cmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Print the rescue/harm report of a results directory, read through DuckDB",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openResults(cmd, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			return report.Write(cmd.Context(), os.Stdout, db)
		},
	}
	rootCmd.AddCommand(cmd)
}

// openResults opens a results directory, marking a missing or unfinished one
// as bad input.
func openResults(cmd *cobra.Command, dir string) (*results.DB, error) {
	db, err := results.Open(cmd.Context(), dir)
	if errors.Is(err, sweep.ErrNotResults) {
		return nil, asInput(err)
	}
	return db, err
}
