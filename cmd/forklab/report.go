package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/htmlreport"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var (
		htmlOut   string
		overwrite bool
		brief     bool
		timing    bool
	)
	cmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Print the rescue/harm report of a results directory, read through DuckDB; --html writes it as a page with charts",
		Long: `report prints, from DIR's Parquet tables through DuckDB, for whatever world
made them: per configuration, fork step and treatment arm the headline
(rescued, harmed, unchanged, net, Newcombe interval, McNemar's p, the mean cost
against off and per net rescue), the slices by every pre-decision feature the
world declares, for noisy sweeps how counts and intervals move with replicas
and seeds, the guard policy search of every configuration and fork step with
its held-out check, cost and uplift (Qini) curve, and a Result paragraph.
--brief prints only the headlines and the Result.

--html FILE also writes the same report as one self-contained HTML page with
charts (rescued against harmed per slice, the policy frontier, the Qini curve,
replicas and seeds), the first rescued and harmed pairs of every slice linked
to their side-by-side views (as forklab show prints them, embedded in the
page), and the sweep's parameters: it fetches nothing from the network and
opens offline in any browser. An existing FILE needs --overwrite; FILE may
not be one of DIR's own files (its tables, manifest.json).`,
		Example: `  forklab report out
  forklab report out --html out/report.html --overwrite
  forklab report out/rerun --brief`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := createHTML(htmlOut, overwrite)
			if err != nil {
				return err
			}
			if out != nil {
				defer out.Abort()
			}
			if timing {
				cmd.SetContext(results.WithTrace(cmd.Context(), traceTo(os.Stderr)))
			}
			db, err := openResults(cmd, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			if out != nil {
				// The page belongs to this sweep (sweep.DeriveOutput).
				sweep.DeriveOutput(out, db.Dir, db.Manifest.SweepID)
			}
			s, err := report.Collect(cmd.Context(), db)
			if err != nil {
				return err
			}
			if out != nil {
				// The page links a few rescued and harmed pairs of every
				// slice to their views (forklab show), embedded.
				if err := report.CollectExamples(cmd.Context(), db, s); err != nil {
					return err
				}
			}
			write := report.WriteSections
			if brief {
				write = report.WriteBrief
			}
			if err := write(os.Stdout, db, s); err != nil {
				return err
			}
			if out == nil {
				return nil
			}
			if err := htmlreport.Render(out, s, db.Manifest, db.Dir); err != nil {
				return err
			}
			if err := out.Commit(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s\n", htmlOut)
			return nil
		},
	}
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write the report as a self-contained HTML page to this file")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "let --html replace an existing file")
	markNeeds(cmd.Flags(), "overwrite", "html")
	cmd.Flags().BoolVar(&timing, "timing", false, "print to stderr how long opening DIR and each query took")
	cmd.Flags().BoolVar(&brief, "brief", false, "print only the headlines and the Result paragraphs (the HTML page stays whole)")
	rootCmd.AddCommand(cmd)
}

// traceTo returns a results.DB.Trace that prints to w, as they end, the
// wall time of each step of opening the results and of each query, one
// "timing: STEP SECONDS s" line each.
func traceTo(w io.Writer) func(string, time.Duration) {
	return func(what string, d time.Duration) {
		fmt.Fprintf(w, "timing: %s %.3f s\n", what, d.Seconds())
	}
}

// openResults opens a results directory, marking a missing or unfinished one
// as bad input.
func openResults(cmd *cobra.Command, dir string) (*results.DB, error) {
	db, err := results.Open(cmd.Context(), dir)
	var pe *duck.PathError
	if errors.Is(err, sweep.ErrNotResults) || errors.As(err, &pe) {
		return nil, asInput(err)
	}
	return db, err
}
