package main

import (
	"os"

	"github.com/forklab/forklab/pipeline/report"
	"github.com/spf13/cobra"
)

func init() {
	cmd := &cobra.Command{
		Use:   "sql DIR QUERY",
		Short: "Run ad hoc SQL over a results directory's views (tasks, checkpoints, branches, pairs)",
		Example: `  forklab sql out "SELECT label, count(*) FROM pairs GROUP BY label"
  forklab sql out "$(cat queries/summary.sql)"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openResults(cmd, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			t, err := db.Query(cmd.Context(), args[1])
			if err != nil {
				return asInput(err)
			}
			return report.WriteTable(os.Stdout, t)
		},
	}
	rootCmd.AddCommand(cmd)
}
