package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var (
		out, outDir string
		overwrite   bool
		opt         = search.Defaults()
	)
	cmd := &cobra.Command{
		Use:   "policy DIR",
		Short: "Search guard triggers on part of the seeds, judge them on the rest, write the chosen rule",
		Long: `policy enumerates triggers over the pre-decision features DIR's world
declares, on the always-on pairs of every configuration and fork step (each
feature against each of its values or bucket edges, and conjunctions of two),
keeps those whose harms stay within --max-harm on the search seeds, picks the
one with the most rescues (ties go to the simpler, then the less harmful, then
the cheaper trigger), and reports it and the baselines on the held-out seeds
with an exact 95% upper bound on the harm rate and their extra cost.

--out writes the chosen rule as JSON for 'forklab sweep --arms off,on,policy
--policy FILE'. The rule names its world and version, configuration and fork
step. A sweep with several configurations or fork steps has one rule each:
--out then needs --config (and --fork-at) to say which, and --out-dir DIR
writes every one, as DIR/policy-config-C-fork-F.json.`,
		Example: `  forklab policy out --max-harm 0 --out policy.json
  forklab sweep --arms off,on,policy --policy policy.json --out rerun
  forklab policy grid --config 1 --out policy.json
  forklab policy grid --out-dir policies`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opt.Validate(); err != nil {
				return asInput(err)
			}
			if out != "" && outDir != "" {
				return usageErr("--out and --out-dir: give one")
			}
			if out != "" {
				if err := checkOutput(out, overwrite); err != nil {
					return err
				}
			}
			if outDir != "" {
				if err := atomicfile.CheckReplaceable(outDir); err != nil && !isDir(outDir) {
					return asInput(fmt.Errorf("--out-dir: %w", err))
				}
			}
			db, err := openResults(cmd, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			r, err := search.Run(cmd.Context(), db, opt)
			if errors.Is(err, search.ErrInput) {
				return asInput(err)
			}
			if err != nil {
				return err
			}
			if len(r.Searched()) == 0 {
				g := &r.Groups[0]
				return usageErr("%s: no configuration or fork step could be searched; %s: %s", args[0], report.GroupTitle(db.Manifest, g.ConfigID, g.ForkStep), g.Skipped)
			}
			if err := report.WritePolicy(os.Stdout, r, db.Manifest, nil); err != nil {
				return err
			}
			switch {
			case out != "":
				if len(r.Groups) > 1 {
					return usageErr("%s", chooseOne(r, db.Manifest, args[0]))
				}
				g := &r.Groups[0]
				if g.Skipped != "" {
					return usageErr("%s: %s: no rule chosen: %s", args[0], report.GroupTitle(db.Manifest, g.ConfigID, g.ForkStep), g.Skipped)
				}
				return writeRule(out, db, g, opt, overwrite)
			case outDir != "":
				// Every file is checked before any is written, and a
				// folder made for them goes again if writing fails: a
				// refusal or a failure leaves no trace.
				var todo []*search.Group
				for i := range r.Groups {
					g := &r.Groups[i]
					if g.Skipped != "" {
						fmt.Fprintf(os.Stderr, "no rule for %s: %s\n", report.GroupTitle(db.Manifest, g.ConfigID, g.ForkStep), g.Skipped)
						continue
					}
					if err := checkOutput(ruleFile(outDir, g), overwrite); err != nil {
						return err
					}
					todo = append(todo, g)
				}
				if len(todo) == 0 {
					return nil
				}
				made := !isDir(outDir)
				if made {
					// A folder forklab makes in a results directory
					// belongs to its sweep.
					if err := sweep.RegisterDerived(outDir); err != nil {
						return fmt.Errorf("--out-dir: %w", err)
					}
					if err := os.MkdirAll(outDir, 0o755); err != nil {
						return asInput(fmt.Errorf("--out-dir: %w", err))
					}
				}
				for _, g := range todo {
					if err := writeRule(ruleFile(outDir, g), db, g, opt, overwrite); err != nil {
						if made {
							os.RemoveAll(outDir)
						}
						return err
					}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	intFlag(f, &opt.MaxHarm, "max-harm", opt.MaxHarm, 0, sweep.MaxRows, "cap on harms (see --harm-scope)")
	f.StringVar(&opt.Scope, "harm-scope", opt.Scope, "clean: the cap counts harms on runs whose declared fault flag is false (the seed's cap); all: every harm")
	openFloatFlag(f, &opt.Holdout, "holdout", opt.Holdout, 0, 1, "share of seeds held out, split by a stable hash of the seed")
	intFlagOr(f, &opt.ConfigID, "config", -1, 0, sweep.MaxConfigs-1, -1, "every one", "search only this configuration of a grid sweep")
	intFlagOr(f, &opt.ForkStep, "fork-at", -1, 1, sweep.MaxForkStep, -1, "every one", "search only this fork step (--fork-step, its old name, still works)")
	aliasFlags(f, map[string]string{"fork-step": "fork-at"})
	f.StringVarP(&out, "out", "o", "", "write the chosen rule to this JSON file (one configuration and fork step)")
	f.StringVar(&outDir, "out-dir", "", "write one rule per configuration and fork step into this directory")
	f.BoolVar(&overwrite, "overwrite", false, "replace --out (or the files in --out-dir) if they exist")
	markNeeds(f, "overwrite", "out", "out-dir")
	rootCmd.AddCommand(cmd)
}

// chooseOne is the refusal of --out for a sweep with several
// configurations or fork steps: it names each one and its chosen rule.
func chooseOne(r *search.Result, m sweep.Manifest, dir string) string {
	var choices []string
	for i := range r.Groups {
		g := &r.Groups[i]
		c := fmt.Sprintf("--config %d --fork-at %d (%s", g.ConfigID, g.ForkStep, report.GroupTitle(m, g.ConfigID, g.ForkStep))
		if g.Skipped == "" {
			c += ": recover when " + g.Chosen.Rule.String()
		} else {
			c += ": not searched, too few pairs"
		}
		choices = append(choices, c+")")
	}
	return fmt.Sprintf("%s has one rule per configuration and fork step, %d here; choose one for --out with %s; or write all with --out-dir DIR",
		dir, len(r.Groups), strings.Join(choices, " or "))
}

// ruleFile is the file of g's rule in --out-dir dir.
func ruleFile(dir string, g *search.Group) string {
	return filepath.Join(dir, fmt.Sprintf("policy-config-%d-fork-%d.json", g.ConfigID, g.ForkStep))
}

// writeRule writes g's chosen rule to path, noting where it came from; the
// file belongs to db's sweep (sweep.DeriveOutput).
func writeRule(path string, db *results.DB, g *search.Group, opt search.Options, overwrite bool) error {
	rule := g.Chosen.Rule
	// Where it was chosen: a sweep applies it there only (sweep.PolicyScope),
	// and says whether a rerun's seeds are the ones it was searched on.
	m := db.Manifest
	if c := g.ConfigID; c >= 0 && c < len(m.Configs) {
		rule.Params, rule.Model = m.Configs[c].Params, &m.Configs[c].Model
	}
	rule.Search = &policy.Split{Start: m.Spec.Seeds.Start, End: m.Spec.Seeds.End, Holdout: opt.Holdout}
	if r := m.Spec.Runs; r != nil {
		rule.Search = &policy.Split{Runs: r.Source, CRC32C: r.CRC32C, Count: r.Count, Holdout: opt.Holdout}
	}
	rule.Note = fmt.Sprintf("chosen by forklab policy on %s (config %d, fork step %d): most search rescues with at most %s on %s runs; search %d rescued / %d harmed, held out %d rescued / %d harmed",
		db.Dir, g.ConfigID, g.ForkStep, plural.Count(opt.MaxHarm, "harm"), opt.Scope, g.Chosen.Search.Rescued, g.Chosen.Search.Harmed, g.Chosen.Holdout.Rescued, g.Chosen.Holdout.Harmed)
	b, err := rule.Encode()
	if err != nil {
		return err
	}
	f, err := atomicfile.Output(path, overwrite)
	if err != nil {
		return asInput(fmt.Errorf("write policy: %w", err))
	}
	defer f.Abort()
	sweep.DeriveOutput(f, db.Dir, db.Manifest.SweepID)
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write policy: %w", err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("write policy: %w", err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s: recover when %s\n", path, rule)
	return nil
}
