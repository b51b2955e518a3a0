package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/pflag"
)

// identityFlags are sweep's flags that set a key of the spec's Identity (what
// the sweep computes). --resume given with none of them (and no --spec)
// goes on with the spec stored with the interrupted sweep; the others
// (--workers, -q, --max-error-rate, …) may change on a resume.
var identityFlags = []string{"seeds", "fork-at", "arms", "replicas", "policy", "policy-anywhere", "unit-seeds",
	"world", "param", "temperature", "no-tool", "agent", "transcripts", "runs"}

// specFlagGiven says whether the user set any flag that sets a key of the
// spec: one of identityFlags or a world parameter's own flag (--p-stall).
func specFlagGiven(fl *pflag.FlagSet, wf *worldFlags) bool {
	for _, name := range identityFlags {
		if fl.Changed(name) {
			return true
		}
	}
	for name := range wf.byFlag {
		if fl.Changed(name) {
			return true
		}
	}
	return false
}

// agentSweep says whether the stored spec, found in dir, is an external
// agent's sweep: its world is no built-in one, or dir holds agent logs.
func agentSweep(spec sweep.Spec, dir string) bool {
	if _, err := lab.Lookup(spec.World); err != nil {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, sweep.AgentLogs))
	return err == nil
}

// specSummary words a spec for the line saying it is resumed: "world
// counter, seeds 0:400000, fork at 3, arms off,on, 1 replica, 1000
// seeds per unit".
func specSummary(s sweep.Spec) string {
	steps := make([]string, len(s.ForkAt))
	for i, st := range s.ForkAt {
		steps[i] = fmt.Sprint(st)
	}
	arms := make([]string, len(s.Arms))
	for i, a := range s.Arms {
		arms[i] = string(a)
	}
	parts := []string{"world " + s.World, s.PopulationText(), "fork at " + strings.Join(steps, ","),
		"arms " + strings.Join(arms, ","), plural.Count(s.Replicas, "replica")}
	if len(s.Grid) > 0 {
		parts = append(parts, "a grid of "+plural.Of(len(s.Grid), "axis", "axes"))
	}
	if s.UnitSeeds > 0 {
		parts = append(parts, plural.Count(s.UnitSeeds, "seed")+" per unit")
	}
	return strings.Join(parts, ", ") + " (the spec stored with it)"
}
