package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/export"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	cmd := &cobra.Command{
		Use:   "db DIR",
		Short: "Write DIR/results.duckdb: a DuckDB database of views over the results, for BI tools and the duckdb CLI",
		Long: `db writes DIR/results.duckdb, a DuckDB database that holds no data, only
views over DIR's Parquet tables (configs, tasks, checkpoints, branches, pairs,
manifest), every query of queries/ as a view (summary, slices, convergence,
policy_search, qini, …), the statistics macros, and — once forklab log export
has written DIR/events/ or forklab log sink DIR/sink/ — the session events
(events, session_events). The sink's later files show in the view without a
rerun.

The views read DIR by its absolute path, so a BI tool or the duckdb CLI opens
the database from any working directory (duckdb -readonly DIR/results.duckdb).
If DIR moves, run forklab db again in its new place, or set DuckDB's
file_search_path to it (docs/bi.md shows Python and BI tools).

Every view checks first that the manifest.json it finds is this sweep's, so
opened from another results directory it fails, naming both, rather than show
that sweep's data. The statistics macros work however the file is attached.

It refuses (exit 4) a directory whose files do not match its manifest, as
report, sql and policy do: BI tools would read partial data.

Rerun it at any time: it writes a new file and renames it over the old one, so
readers holding the old one open (a BI tool, duckdb -readonly) are no obstacle;
it adds events when they appear, and copies anything else stored in the old
file.`,
		Example: `  forklab db out
  duckdb -readonly out/results.duckdb -c "SELECT * FROM summary"          # the duckdb CLI, from duckdb.org
  forklab sql out "SELECT * FROM summary"                                 # the same views, no CLI needed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := export.WriteDB(cmd.Context(), args[0])
			var pe *duck.PathError
			if errors.Is(err, sweep.ErrNotResults) || errors.As(err, &pe) || errors.Is(err, atomicfile.ErrBadOutput) {
				return asInput(err)
			}
			if err != nil {
				return err
			}
			abs, _ := filepath.Abs(args[0])
			fmt.Fprintf(os.Stderr, "wrote %s: views %s; macros %s\n", info.Path, strings.Join(info.Views, ", "), strings.Join(info.Macros, ", "))
			fmt.Fprintf(os.Stderr, "open it with the duckdb CLI (duckdb.org) or a BI tool, from any directory: duckdb -readonly %s; forklab sql %s \"SELECT …\" reads the same views without either\n",
				shellQuote(filepath.Join(abs, export.DBName)), shellQuote(args[0]))
			return nil
		},
	}
	rootCmd.AddCommand(cmd)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
