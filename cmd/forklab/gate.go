package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/analysis/gate"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var (
		arms                             []string
		bound, overwrite                 bool
		junit, specFile                  string
		harmRate, netRate, p, errRate, d float64
		harmed, net                      int64
	)
	cmd := &cobra.Command{
		Use:   "gate DIR",
		Short: "Check a sweep against thresholds for CI: exit 0 when every condition holds, 1 when one fails; --junit writes JUnit XML",
		Long: `gate checks the finished sweep in DIR against thresholds, per treatment arm
(--arm; default on and policy, those the sweep has), configuration and fork
step, and prints one line per condition: its value, the threshold, PASS or
FAIL. Each condition is checked on the point estimate, or with --bound on the
worse end of its 95% interval (harm rates and error rate: Wilson's upper end;
counts: the rate's end times the pairs; net: Newcombe's lower end; score
difference: the paired t interval's lower end).

The thresholds come from the flags; without any, from the gate key of the
spec file --spec FILE names, or of the spec the sweep was run with (its
manifest), which may set thresholds per arm (docs/gate.md). Flags given
beside a spec's gate replace its values for every arm checked.

--junit FILE writes the checks as JUnit XML for CI systems: one test case per
arm, configuration, fork step and condition, a failure with the numbers for
each condition that fails. It is written whether the gate passes or not.

Exit status: 0 every condition holds; 1 a condition fails; 2 bad input (a
threshold outside its domain, an arm the sweep lacks, no condition at all, a
score condition on a pass/fail world; nothing is written); 4 DIR does not
match its manifest.`,
		Example: `  forklab gate out --max-harm-rate 0.02
  forklab gate out --arm on --min-net 1 --max-p 0.05 --bound --junit gate.xml
  forklab gate out --spec ci.yaml --junit gate.xml --overwrite
  forklab gate out-toolloop --min-score-diff 0 --bound`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if junit != "" {
				if err := checkOutput(junit, overwrite); err != nil {
					return err
				}
			}
			db, err := openResults(cmd, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			g := gate.Gate{}
			switch {
			case specFile != "":
				spec, err := sweep.ReadSpecFile(specFile, sweep.Spec{})
				if err != nil {
					return asInput(err)
				}
				if spec.Gate == nil {
					return usageErr("--spec %s has no gate key: add one (docs/gate.md) or give the thresholds as flags", specFile)
				}
				g = *spec.Gate
				if err := g.Validate(); err != nil {
					return usageErr("spec %s: gate: %s", specFile, strings.TrimPrefix(err.Error(), gate.ErrInput.Error()+": "))
				}
			case db.Manifest.Spec.Gate != nil:
				g = *db.Manifest.Spec.Gate
			}
			// Flags replace the spec's values, for every arm checked.
			var t gate.Thresholds
			set := map[string]func(){
				"max-harm-rate": func() { t.MaxHarmRate = &harmRate }, "max-harmed": func() { t.MaxHarmed = &harmed },
				"min-net": func() { t.MinNet = &net }, "min-net-rate": func() { t.MinNetRate = &netRate },
				"max-p": func() { t.MaxP = &p }, "max-error-rate": func() { t.MaxErrorRate = &errRate },
				"min-score-diff": func() { t.MinScoreDiff = &d },
			}
			for _, name := range gate.Flags() {
				if fl.Changed(name) {
					set[name]()
				}
			}
			g.Thresholds = g.Thresholds.With(t)
			for a, at := range g.PerArm {
				g.PerArm[a] = at.With(t)
			}
			if fl.Changed("arm") {
				g.Arms = arms
			}
			if fl.Changed("bound") {
				g.Bound = bound
			}
			s, err := gateSweep(cmd, db)
			if err != nil {
				return err
			}
			checks, err := g.Run(s)
			if errors.Is(err, gate.ErrInput) {
				return usageErr("%s", strings.TrimPrefix(err.Error(), gate.ErrInput.Error()+": "))
			}
			if err != nil {
				return err
			}
			failed := gate.Write(os.Stdout, checks, s.Configs, g.Bound)
			if junit != "" {
				if err := writeJUnit(junit, overwrite, db, checks, s.Configs); err != nil {
					return err
				}
			}
			if failed > 0 {
				return exitError{1, fmt.Errorf("gate: %d of %d conditions fail on %s", failed, len(checks), args[0])}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&arms, "arm", nil, "treatment arms to check, comma-separated or repeated (default: on and policy, those the sweep has)")
	f.BoolVar(&bound, "bound", false, "check each condition on the worse end of its 95% interval instead of the point estimate")
	floatFlag(f, &harmRate, "max-harm-rate", 0, 0, 1, "fail when an arm's harm rate (harmed / pairs) is above this share")
	int64Flag(f, &harmed, "max-harmed", 0, 0, gate.MaxExact, "fail when an arm harms more pairs than this")
	int64Flag(f, &net, "min-net", 0, -gate.MaxExact, gate.MaxExact, "fail when an arm's net (rescued - harmed) is below this")
	floatFlag(f, &netRate, "min-net-rate", 0, -1, 1, "fail when an arm's net rate (net / pairs) is below this")
	addBounded(f, &bounded[float64]{p: &p, min: 0, max: 1, openMin: true, kind: "float"}, "max-p", "", 0.05,
		"fail unless an arm's net is a gain with McNemar exact p at most this (a p-value has no interval: --bound leaves it)")
	floatFlag(f, &errRate, "max-error-rate", 0, 0, 1, "fail when more than this share of an arm's pairs errored (no label)")
	floatFlag(f, &d, "min-score-diff", 0, -1e6, 1e6, "scored worlds: fail when an arm's mean paired score difference is below this (within the score range's width)")
	f.StringVar(&specFile, "spec", "", "read the gate from this spec file's gate key (.json, .yaml)")
	f.StringVar(&junit, "junit", "", "also write the checks as JUnit XML to this file")
	f.BoolVar(&overwrite, "overwrite", false, "let --junit replace an existing file")
	markNeeds(f, "overwrite", "junit")
	rootCmd.AddCommand(cmd)
}

// gateSweep reads what the gate checks from db: the summary's rows, the
// sweep's arms and its declared score's width.
func gateSweep(cmd *cobra.Command, db *results.DB) (gate.Sweep, error) {
	t, err := db.Run(cmd.Context(), "summary")
	if err != nil {
		return gate.Sweep{}, err
	}
	m := db.Manifest
	s := gate.Sweep{Configs: len(m.Configs) > 1}
	if sc := m.Declaration.Score; sc != nil {
		s.Score = sc.Max - sc.Min
	}
	for _, a := range m.Spec.Arms {
		if a != "off" {
			s.Arms = append(s.Arms, string(a))
		}
	}
	for _, r := range t.Records() {
		s.Rows = append(s.Rows, gate.Row{ConfigID: int(r.Int("config_id")), ForkStep: int(r.Int("fork_step")), Arm: r.Str("arm"),
			Pairs: r.Int("pairs"), Rescued: r.Int("rescued"), Harmed: r.Int("harmed"), Net: r.Int("net"), Errors: r.Int("errors"),
			HarmRate: orNaN(r, "harm_rate"), HarmHi: orNaN(r, "harm_hi"), NetRate: orNaN(r, "net_rate"), NetLo: orNaN(r, "net_lo"),
			McNemarP: orNaN(r, "mcnemar_p"), ScoreDiff: orNaN(r, "mean_score_diff"), ScoreDiffLo: orNaN(r, "score_diff_lo"), ScoreDiffHi: orNaN(r, "score_diff_hi")})
	}
	return s, nil
}

// orNaN is column c of r, NaN when NULL.
func orNaN(r results.Row, c string) float64 {
	if r[c] == nil {
		return math.NaN()
	}
	return r.Float(c)
}

// writeJUnit writes the checks to path as JUnit XML, atomically; a file
// inside the results directory belongs to its sweep.
func writeJUnit(path string, overwrite bool, db *results.DB, checks []gate.Check, configs bool) error {
	f, err := atomicfile.Output(path, overwrite)
	if err != nil {
		return asInput(fmt.Errorf("--junit: %w", err))
	}
	defer f.Abort()
	sweep.DeriveOutput(f, db.Dir, db.Manifest.SweepID)
	if err := gate.WriteJUnit(f, db.Dir, checks, configs); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	return nil
}
