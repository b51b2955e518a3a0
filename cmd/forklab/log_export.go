package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/schemas"
	"github.com/forklab/forklab/stream/client"
	"github.com/spf13/cobra"
)

func init() {
	var (
		streams   []string
		prefix    string
		out, name string
		overwrite bool
		lf        *logFlags
	)
	cmd := &cobra.Command{
		Use:   "export (--stream NAME ... | --prefix P) --out DIR",
		Short: "Write session events to Parquet (DIR/events/) for SQL and BI tools",
		Long: `export reads session streams from the beginning and writes their events as
one Parquet file under DIR/events/ (columns: schemas/README.md, "events"). In
a results directory the events sit beside the sweep's tables: forklab db
exposes them as the events view, and queries/session_events.sql joins a
sweep played with --from-log to its pairs. Events a stream's fold refuses are
exported too, with a warning, so a corrupt session can be inspected. A
stream that is not a JSON stream holds no session events: named with
--stream it is refused (exit 2), taken in by --prefix it is skipped with a
warning, as forklab log sink skips it.`,
		Example: `  forklab log export --stream demo --out out
  forklab log export --prefix sweep-1795944505350429617/ --out out   # the prefix forklab sweep --from-log printed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(streams) == 0) == (prefix == "") {
				return usageErr("give --stream NAME (repeatable) or --prefix P")
			}
			if out == "" {
				return usageErr("--out DIR is required")
			}
			// A stream given twice would be exported twice: its events
			// twice in the table.
			if err := onceEach("stream", streams, itself); err != nil {
				return err
			}
			c := lf.client()
			ctx := cmd.Context()
			if prefix != "" {
				var err error
				if streams, err = c.List(ctx, prefix); err != nil {
					return fmt.Errorf("list streams under %s: %w", prefix, err)
				}
				if len(streams) == 0 {
					return asInput(fmt.Errorf("no stream's name starts with %q", prefix))
				}
			}
			if name == "" {
				sel := prefix
				if sel == "" {
					sel = streams[0]
					if len(streams) > 1 {
						sel += fmt.Sprintf("-and-%d-more", len(streams)-1)
					}
				}
				name = regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(sel, "_") + ".parquet"
			}
			if name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, ".") {
				return usageErr("--name %q must be a plain file name (it goes under %s)", name, filepath.Join(out, "events"))
			}
			if filepath.Ext(name) != ".parquet" {
				name += ".parquet"
			}
			path := filepath.Join(out, "events", name)
			if err := checkOutput(path, overwrite, "events"); err != nil {
				return err
			}
			var rows []schemas.SessionEvent
			for _, s := range streams {
				r, err := agent.EventRows(ctx, c, s)
				switch {
				case client.IsNotFound(err):
					return asInput(fmt.Errorf("stream %s does not exist (404)", s))
				case errors.Is(err, agent.ErrNotJSON) && prefix != "":
					// A prefix may take in other streams: skipped, as
					// forklab log sink skips them.
					fmt.Fprintf(os.Stderr, "forklab log export: warning: %v; skipped\n", err)
					continue
				case errors.Is(err, agent.ErrNotJSON):
					return asInput(err)
				case errors.Is(err, session.ErrFold):
					fmt.Fprintf(os.Stderr, "forklab log export: warning: %v (exported as is)\n", err)
				case errors.Is(err, agent.ErrTrimmed):
					fmt.Fprintf(os.Stderr, "forklab log export: warning: %v\n", err)
				case err != nil:
					return err
				}
				rows = append(rows, r...)
			}
			if err := writeEvents(path, rows, overwrite); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s: %d events from %d %s\n", path, len(rows), len(streams), plural(len(streams), "stream", "streams"))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&streams, "stream", nil, "stream to export (repeatable, each stream once)")
	f.StringVar(&prefix, "prefix", "", "export every stream whose name starts with this")
	f.StringVar(&out, "out", "", "directory to write events/ into (a results directory, or any)")
	f.StringVar(&name, "name", "", "file name under DIR/events/ (default: from the selection)")
	f.BoolVar(&overwrite, "overwrite", false, "replace an existing file of the same name")
	lf = addLogFlags(cmd)
	logCmd.AddCommand(cmd)
}

// plural picks the singular or plural form for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// writeEvents writes rows to path as agent.WriteEvents does, through
// atomicfile.Output: the file is registered as derived from the results
// directory holding it (sweep.RegisterDerived), a folder made for it goes
// again on failure, and a signal leaves nothing half-written.
func writeEvents(path string, rows []schemas.SessionEvent, overwrite bool) error {
	undo, err := mkdirAll(filepath.Dir(path))
	if err != nil {
		return asInput(fmt.Errorf("write %s: %w", path, err))
	}
	f, err := atomicfile.Output(path, overwrite)
	if err != nil {
		undo()
		return asInput(err)
	}
	defer f.Abort()
	sweep.DeriveOutput(f, "", "")
	err = agent.EncodeEvents(f, rows)
	if err == nil {
		err = f.Commit()
	}
	if err != nil {
		f.Abort()
		undo()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
