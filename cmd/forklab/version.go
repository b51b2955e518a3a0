package main

import (
	"fmt"
	"runtime"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/schemas"
	"github.com/spf13/cobra"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print forklab's version, its tables' schema version, the agent protocol it speaks, and the DuckDB inside it",
		Long: `version prints the forklab release (what every manifest records as
forklab_version, and forklab --version prints), then on a second line the
schema_version of the tables it writes, the agent protocol it speaks, the Go
toolchain that built it and the DuckDB version linked into it (the one a
results.duckdb it writes needs at least).`,
		Example: `  forklab version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engine := "DuckDB ?"
			if db, err := duck.Open(""); err == nil {
				var v string
				if db.QueryRowContext(cmd.Context(), "SELECT version()").Scan(&v) == nil {
					engine = "DuckDB " + v
				}
				db.Close()
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "forklab %s\n", version)
			fmt.Fprintf(out, "tables schema_version %d · agent protocol %s · %s %s/%s · %s\n",
				schemas.SchemaVersion, agentproc.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, engine)
			return nil
		},
	})
}
