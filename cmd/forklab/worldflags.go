package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/pflag"
)

// worldFlags are the flags that set a spec's world and model parameters,
// shared by sweep and checkpoint. A flag the user set replaces the spec
// file's value; an unset flag leaves it alone.
type worldFlags struct {
	fs                          *pflag.FlagSet
	target, baseBudget          int
	slack, freezeAt             string
	pStall, pObsNoise, pRefresh float64
	temperature, noTool         float64
}

func addWorldFlags(fs *pflag.FlagSet) *worldFlags {
	d := sweep.DefaultSpec()
	f := &worldFlags{fs: fs}
	fs.IntVar(&f.target, "target", d.Params.Target, "value the counter must be declared at")
	fs.IntVar(&f.baseBudget, "base-budget", d.Params.BaseBudget, "step budget before slack")
	fs.StringVar(&f.slack, "slack", "0,0,1,2", "extra budget steps a task draws from, uniformly by position")
	fs.StringVar(&f.freezeAt, "freeze-at", "none,none,1,2", "values the sensor sticks at, drawn uniformly by position (none: never)")
	fs.Float64Var(&f.pStall, "p-stall", 0, "probability an increment stalls (observation repeats, sensor fine)")
	fs.Float64Var(&f.pObsNoise, "p-obs-noise", 0, "probability a sensor read is off by one")
	fs.Float64Var(&f.pRefresh, "p-refresh-fail", 0, "probability a refresh burns its step and does nothing")
	fs.Float64Var(&f.temperature, "temperature", 0, "probability a model turn departs from the greedy choice")
	fs.Float64Var(&f.noTool, "no-tool", d.Model.NoTool, "share of departing turns that call no tool at all")
	return f
}

// apply copies the flags the user set into spec.
func (f *worldFlags) apply(spec *sweep.Spec) error {
	set := f.fs.Changed
	if set("target") {
		spec.Params.Target = f.target
	}
	if set("base-budget") {
		spec.Params.BaseBudget = f.baseBudget
	}
	if set("slack") {
		v, err := parseInts("--slack", f.slack, false)
		if err != nil {
			return err
		}
		spec.Params.Slack = v
	}
	if set("freeze-at") {
		v, err := parseInts("--freeze-at", f.freezeAt, true)
		if err != nil {
			return err
		}
		spec.Params.FreezeAt = v
	}
	if set("p-stall") {
		spec.Params.PStall = f.pStall
	}
	if set("p-obs-noise") {
		spec.Params.PObsNoise = f.pObsNoise
	}
	if set("p-refresh-fail") {
		spec.Params.PRefreshFail = f.pRefresh
	}
	if set("temperature") {
		spec.Model.Temperature = f.temperature
	}
	if set("no-tool") {
		spec.Model.NoTool = f.noTool
	}
	return nil
}

// parseInts parses a comma-separated list of non-negative integers; with
// allowNone, "none" stands for 0 (the sensor never sticks).
func parseInts(flag, s string, allowNone bool) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if allowNone && strings.EqualFold(f, "none") {
			out = append(out, 0)
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			hint := "non-negative integers"
			if allowNone {
				hint += " or none"
			}
			return nil, fmt.Errorf("%s %q: want a comma-separated list of %s", flag, s, hint)
		}
		out = append(out, v)
	}
	return out, nil
}
