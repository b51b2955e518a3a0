package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/export"
	"github.com/forklab/forklab/queries"
	"github.com/spf13/cobra"
)

func init() {
	var (
		format, out, file string
		overwrite         bool
		vars, settings    []string
		allow             export.Allow
	)
	formats := make([]string, len(export.Formats))
	for i, f := range export.Formats {
		formats[i] = string(f)
	}
	cmd := &cobra.Command{
		Use:   "sql DIR [QUERY | -]",
		Short: "Run ad hoc SQL over a results directory's views; print a table or write CSV, JSON, Parquet or Arrow",
		Long: `sql runs SQL over the views of a finished results directory — configs, tasks,
checkpoints, branches, pairs (schemas/README.md) — with the statistics macros
of queries/stats.sql (wilson_lo, mcnemar_p, newcombe_lo, …) and the variables
the report queries read set to the report's values (config_id 0, max_harm 0,
harm_scope 'clean', holdout 0.3; --var changes them).

The query is the second argument, a file (--file FILE), or standard input
("-"). Several statements may be given; the last one's rows are the result.
A query that starts with a comment ("-- …") needs --file, "-", or "--" before
it, or it is taken for a flag.

By default the query only reads, and only the results directory: statements
that change anything (CREATE, INSERT, COPY, ATTACH, …) need --allow-writes;
files outside DIR need --allow-path PATH (or --allow-external-access for any);
DuckDB's configuration is locked (settings go in --setting NAME=VALUE); no
extension is installed or loaded (--allow-extensions). Every connection runs
in UTC. A refused statement exits 2 naming the flag that allows it.

Formats: table (aligned text, every value as DuckDB renders it), csv, json
(one array), ndjson (JSON Lines), parquet (zstd), arrow (Arrow IPC file,
.arrow) and arrows (Arrow IPC stream, .arrows). Every format is exact: a
type a format cannot hold exactly is converted to one it can (HUGEINT to
DECIMAL(38,0) in Parquet and Arrow) or refused, naming the column and the
cast to use (docs/bi.md). csv, json, ndjson and parquet are written by
DuckDB's COPY, which streams the result in bounded memory (a name ending .gz
is gzipped); arrow comes through DuckDB's Arrow interface one record batch
at a time. --out writes a file under a temporary name and renames it when
complete; an existing file needs --overwrite. Without --format, --out's
name says the format (.csv, .json, .ndjson or .jsonl, .parquet, .arrow,
.arrows, .txt for table; other names get table); a --format the name
contradicts (--format csv --out rows.json), or .gz or .zst after a format
that is not compressed by its name (table, parquet, arrow), is refused.`,
		Example: `  forklab sql out "SELECT label, count(*) FROM pairs GROUP BY label"
  forklab sql out --file queries/summary.sql --format csv
  forklab sql out "SELECT * FROM pairs" --format parquet --out pairs.parquet
  forklab sql out "SELECT * FROM branches" --format arrow --out branches.arrow
  forklab sql out --file queries/policy_search.sql --var max_harm=2 --var harm_scope=all
  echo "SELECT count(*) FROM tasks" | forklab sql out -
  forklab sql out --allow-path labels.csv "SELECT * FROM pairs JOIN 'labels.csv' USING (seed)"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := export.ParseFormat(format)
			if err != nil {
				return usageErr("--format: %v", err)
			}
			var text string
			switch {
			case len(args) == 2 && file != "":
				return usageErr("give the query as an argument or with --file, not both")
			case len(args) == 2:
				text = args[1]
			case file != "":
				text, err = readQuery(file)
			default:
				return usageErr("no query: give it as the second argument, with --file FILE, or as - to read standard input")
			}
			if text == "-" {
				text, err = readQuery("-")
			}
			if err != nil {
				return asInput(err)
			}
			if out != "" {
				// --out pairs.parquet writes Parquet, not a text table
				// under that name.
				if f, err = export.OutFormat(out, f, cmd.Flags().Changed("format")); err != nil {
					return asInput(err)
				}
			}
			opt := export.Options{Format: f, Out: out, Overwrite: overwrite, Allow: allow}
			if err := onceEach("var", vars, keyOf); err != nil {
				return err
			}
			if err := onceEach("setting", settings, keyOf); err != nil {
				return err
			}
			for _, v := range vars {
				pv, err := export.ParseVar(v)
				if err != nil {
					return asInput(fmt.Errorf("--var: %w", err))
				}
				opt.Vars = append(opt.Vars, pv)
			}
			for _, v := range settings {
				st, err := export.ParseSetting(v)
				if err != nil {
					return asInput(err)
				}
				opt.Settings = append(opt.Settings, st)
			}
			err = export.Run(cmd.Context(), args[0], text, opt)
			if export.BadInput(err) {
				return asInput(err)
			}
			return err
		},
	}
	cmd.Long += "\n\n" + macrosHelp()
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// pflag takes a query that starts with a comment for a flag.
		// A flag's name never holds white space.
		if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok && strings.ContainsAny(name, " \t\n") {
			return usageErr("the query starts with \"--\" and was taken for a flag: put -- before it, pass it with --file FILE, or pipe it to forklab sql DIR -")
		}
		return usageErr("%v (see 'forklab %s --help')", err, c.Name())
	})
	fl := cmd.Flags()
	fl.StringVarP(&format, "format", "f", "table", "output format: "+strings.Join(formats, ", ")+" (with --out: by default the one its name ends in)")
	fl.StringVarP(&out, "out", "o", "", "write to this file instead of standard output")
	fl.BoolVar(&overwrite, "overwrite", false, "let --out replace an existing file")
	markNeeds(fl, "overwrite", "out")
	fl.StringVar(&file, "file", "", "read the query from this file (- for standard input)")
	fl.StringArrayVar(&vars, "var", nil, "set a DuckDB variable the query reads with getvariable('NAME'): NAME=VALUE (repeatable, each NAME once; a NAME neither the query nor the views read is refused)")
	fl.StringArrayVar(&settings, "setting", nil, "set a DuckDB setting before the configuration is locked: NAME=VALUE, e.g. threads=2 (repeatable, each NAME once)")
	fl.BoolVar(&allow.Writes, "allow-writes", false, "run statements that change something (CREATE, INSERT, COPY, ATTACH, …), not only reads")
	fl.StringArrayVar(&allow.Paths, "allow-path", nil, "let the query read this file or directory too (and write it, with --allow-writes) (repeatable)")
	fl.BoolVar(&allow.ExternalAccess, "allow-external-access", false, "let the query read and write any file, and the network through extensions")
	fl.BoolVar(&allow.Extensions, "allow-extensions", false, "let INSTALL and LOAD run, and DuckDB fetch and load the extensions a query needs (implies --allow-external-access)")
	rootCmd.AddCommand(cmd)
}

// readQuery reads SQL text from a file, or from standard input for "-".
func readQuery(path string) (string, error) {
	if path == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return "", fmt.Errorf("read the query from standard input: %w", err)
		}
		return string(b), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the query: %w", err)
	}
	return string(b), nil
}

// macrosHelp lists the statistics macros every query can call, each with
// its arguments, and what they compute (queries/stats.sql's header).
func macrosHelp() string {
	var sigs []string
	for _, m := range queries.Macros() {
		sigs = append(sigs, m.Name+"("+m.Args+")")
	}
	return "Statistics macros (queries/stats.sql): " + strings.Join(sigs, ", ") + ".\n" +
		"  " + strings.ReplaceAll(queries.MacrosHelp(), "\n", "\n  ")
}
