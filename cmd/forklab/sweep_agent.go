package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"errors"
	"github.com/forklab/forklab/internal/floattext"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
)

// agentFlags are sweep's flags for external agents and for how much
// failure and cost a sweep tolerates.
type agentFlags struct {
	fs           *pflag.FlagSet
	command      string
	parallel     int
	timeout      time.Duration
	retries      int
	env          []string
	maxErrorRate string
	failOnError  string
	maxCost      string
	unitSeeds    int
}

func addAgentFlags(fs *pflag.FlagSet) *agentFlags {
	f := &agentFlags{fs: fs}
	fs.StringVar(&f.command, "agent", "", "sweep an external agent: the shell command that starts one agent process, speaking forklab-agent/1 (docs/agent-protocol.md)")
	intFlag(fs, &f.parallel, "parallel", 0, 0, sweep.MaxAgentParallel, "agent processes run at once (with --agent; 0: one per CPU)")
	durationFlag(fs, &f.timeout, "timeout", agentproc.DefaultTimeout, time.Millisecond, sweep.MaxAgentTimeout, "time an agent may take per run or branch before it is killed and restarted")
	intFlag(fs, &f.retries, "retries", agentproc.DefaultRetries, 0, sweep.MaxAgentRetries, "times a failed agent request is retried (with backoff) before its pairs become error rows")
	fs.StringArrayVar(&f.env, "agent-env", nil, "KEY=VALUE added to the agent's environment (repeatable; values are not recorded)")
	fs.StringVar(&f.maxErrorRate, "max-error-rate", "1%", "share of error pairs above which the sweep is reported incomplete and exits 5: 1%, 0.05")
	fs.StringVar(&f.failOnError, "fail-on-error", "50%", "with --agent: stop the sweep (resumably, exit 7) once more than this share of the agent's last 100 attempts failed (its first attempts all failing stop it too); 100% for no limit")
	fs.StringVar(&f.maxCost, "max-cost", "", "with --agent, in one process: stop cleanly (resumably, exit 6) once the cost reported so far reaches this, overshooting by at most one seed's cost: 5 (US dollars) or tokens=2000000,usd=5")
	intFlag(fs, &f.unitSeeds, "unit-seeds", 0, 0, sweep.MaxUnitSeeds, "seeds per unit of work and file (0: automatic)")
	return f
}

// apply copies the flags the user set into spec; agent flags without an
// agent are refused.
func (f *agentFlags) apply(spec *sweep.Spec) error {
	set := f.fs.Changed
	if set("agent") {
		if strings.TrimSpace(f.command) == "" {
			return fmt.Errorf("--agent: the command is empty")
		}
		if spec.Agent == nil {
			spec.Agent = &sweep.AgentSpec{}
		}
		spec.Agent.Command = f.command
	}
	for _, name := range []string{"parallel", "timeout", "retries", "agent-env", "fail-on-error"} {
		if set(name) && spec.Agent == nil {
			return fmt.Errorf("--%s applies to an external agent: give --agent CMD (or agent: in the spec file)", name)
		}
	}
	if set("parallel") {
		spec.Agent.Parallel = f.parallel
	}
	if set("timeout") {
		spec.Agent.Timeout = sweep.Duration(f.timeout)
	}
	if set("retries") {
		r := f.retries
		spec.Agent.Retries = &r
	}
	if set("fail-on-error") {
		r, err := parseShare(f.failOnError)
		if err != nil {
			return fmt.Errorf("--fail-on-error: %w", err)
		}
		spec.Agent.FailOnError = &r
	}
	if len(f.env) > 0 {
		env, err := envMap(f.env)
		if err != nil {
			return err
		}
		if spec.Agent.Environment == nil {
			spec.Agent.Environment = map[string]string{}
		}
		for k, v := range env {
			spec.Agent.Environment[k] = v // the flag replaces the spec file's value
		}
	}
	if set("max-error-rate") {
		r, err := parseShare(f.maxErrorRate)
		if err != nil {
			return fmt.Errorf("--max-error-rate: %w", err)
		}
		spec.MaxErrorRate = &r
	}
	if set("max-cost") {
		c, err := parseCostLimit(f.maxCost)
		if err != nil {
			return fmt.Errorf("--max-cost: %w", err)
		}
		spec.MaxCost = c
	}
	if set("unit-seeds") {
		spec.UnitSeeds = f.unitSeeds
	}
	return nil
}

// parseShare reads "1%" or "0.01".
func parseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSuffix(t, "%"), 0.01
	}
	v, err := floattext.Parse(t)
	if errors.Is(err, floattext.ErrNotFloat64) {
		return 0, fmt.Errorf("%s; must be a share in [0, 1] (0%% to 100%%), such as 1%% or 0.05", trimNotFloat(err))
	}
	if err != nil || !(v*scale >= 0 && v*scale <= 1) {
		return 0, fmt.Errorf("must be a share in [0, 1] (0%% to 100%%), such as 1%% or 0.05, got %q", s)
	}
	return v * scale, nil
}

// parseCostLimit reads "5" (US dollars) or "tokens=2000000,usd=5".
func parseCostLimit(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			k, v = world.CostUSD, k
		}
		k = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(k), "$"))
		v = strings.TrimPrefix(strings.TrimSpace(v), "$")
		x, err := floattext.Parse(v)
		if errors.Is(err, floattext.ErrNotFloat64) {
			return nil, fmt.Errorf("%s; each amount must be a finite number above 0, such as 5 (US dollars) or tokens=2000000,usd=5", trimNotFloat(err))
		}
		if err != nil || !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("each amount must be a finite number above 0, such as 5 (US dollars) or tokens=2000000,usd=5, got %q", s)
		}
		if _, ok := out[k]; ok {
			return nil, fmt.Errorf("%s is limited twice in %q: give each cost field once, such as tokens=2000000,usd=5", k, s)
		}
		out[k] = x
	}
	return out, nil
}

// openAgent starts the spec's agent and learns its declaration. With batch
// (a sweep, a worker), its work stops once the agent is failing
// (agentproc.FailFast, the spec's agent.fail_on_error), and the agents'
// standard error stays off forklab's own until the caller names their log
// directory.
func openAgent(ctx context.Context, a *sweep.AgentSpec, batch bool) (*agentproc.Definition, error) {
	cfg := agentproc.Config{Command: agentproc.Command{Line: a.Command, Env: a.Environment}, Parallel: a.Parallel, HoldStderr: batch,
		Timeout: time.Duration(a.Timeout), Retries: agentproc.DefaultRetries, Client: agentproc.ClientInfo{Name: "forklab", Version: version},
		Warn: func(msg string) { fmt.Fprintf(os.Stderr, "forklab: warning: %s\n", msg) }}
	if a.Retries != nil {
		cfg.Retries = *a.Retries
	}
	if batch {
		cfg.FailFast = &agentproc.FailFast{MaxRate: agentproc.DefaultFailOnError}
		if a.FailOnError != nil {
			cfg.FailFast.MaxRate = *a.FailOnError
		}
	}
	return agentproc.Open(ctx, cfg)
}

// failingMessage says why a sweep (what) stopped early because its agent
// is failing (exit 7): the rule, the last failure as its error row would
// say it (the line the agent wrote, its exit status, the end of its
// stderr), and what to do: fix the agent, then again.
func failingMessage(err error, what, command, again string) string {
	var fe *agentproc.FailingError
	if !errors.As(err, &fe) {
		return err.Error()
	}
	return fmt.Sprintf("%s stopped early: the agent is failing: %s.\n  the last failure: %s\n  fix the agent (forklab agent check %s shows what is wrong), then %s",
		what, fe.Rule, fe.Last, shellQuote(command), again)
}

// sweepProgress is the progress of a sweep for people: a bar on a
// terminal (pairs done, errors, rate, ETA, cost so far), a line every ten
// seconds otherwise for agent sweeps, and the --max-cost budget.
type sweepProgress struct {
	mu       sync.Mutex
	bar      *progressbar.ProgressBar
	perSeed  int
	total    int64
	done     int64
	errs     int64
	kept     world.Cost
	def      *agentproc.Definition
	decl     world.Declaration
	limit    map[string]float64
	start    time.Time
	lastLine time.Time
	lines    bool
}

func (p *sweepProgress) cost() world.Cost {
	if p.def != nil {
		return p.def.Counted() // what its budget counts (agentproc/budget.go)
	}
	return p.kept
}

// costText writes the reported cost fields: "1,234 steps · $0.42".
func costText(d world.Declaration, c world.Cost) string {
	var parts []string
	for _, f := range d.Cost.Fields {
		switch f {
		case world.CostSteps:
			parts = append(parts, fmt.Sprintf("%d steps", c.Steps))
		case world.CostTokens:
			parts = append(parts, fmt.Sprintf("%d tokens", c.Tokens))
		case world.CostUSD:
			parts = append(parts, usdText(c.USD))
		case world.CostSeconds:
			parts = append(parts, fmt.Sprintf("%.0fs agent time", c.Seconds))
		}
	}
	return strings.Join(parts, " · ")
}

// usdText writes US dollars: cents from $0.10 up ($5.00, $12.34), three
// significant digits below ($0.00313), never a small cost as $0.00.
func usdText(x float64) string {
	if x >= 0.1 {
		return fmt.Sprintf("$%.2f", x)
	}
	return "$" + report.CostNum(x)
}

// seeds records n finished seeds with errs error pairs among them.
func (p *sweepProgress) seeds(n, errs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(n * p.perSeed)
	p.errs += int64(errs)
	p.update()
}

// etaText is the time left at the rate so far — or, while most pairs
// finished so far are errors, no figure: a failing agent's rate says
// nothing of when a sweep will end (and fail-fast will stop it first).
func etaText(done, errs, total int64, elapsed time.Duration) string {
	switch {
	case done > 0 && 2*errs > done:
		return "ETA ? (most pairs are errors)"
	case done == 0 || elapsed <= 0:
		return "ETA ?"
	}
	rate := float64(done) / elapsed.Seconds()
	return "ETA " + (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
}

func (p *sweepProgress) keep(c world.Cost) {
	p.mu.Lock()
	p.kept = p.kept.Add(c)
	p.mu.Unlock()
	if p.def != nil {
		p.def.AddKept(c) // counted against the budget
	}
}

// budgetCost is the cost --max-cost budgets: for an agent, what its
// definition's budget counts (agentproc/budget.go: the seeds in the journal
// as they cost when they were played, plus what this run spent asking the
// agent — a figure that does not depend on the order in which seeds are
// replayed); for a built-in world, the cost of the units kept and written.
func (p *sweepProgress) budgetCost() world.Cost {
	if p.def == nil {
		return p.kept
	}
	return p.def.Counted()
}

// update refreshes the bar; p.mu is held. The budget is enforced where
// the agent's work is handed out (agentproc/budget.go), not here.
func (p *sweepProgress) update() {
	c := p.cost()
	desc := fmt.Sprintf("%d errors", p.errs)
	if p.def != nil {
		desc += " · " + costText(p.decl, c)
	}
	eta := etaText(p.done, p.errs, p.total, time.Since(p.start))
	if p.bar != nil {
		p.bar.Describe(desc + " · " + eta)
		p.bar.Set64(p.done)
		return
	}
	if p.lines && time.Since(p.lastLine) >= 10*time.Second {
		p.lastLine = time.Now()
		rate := float64(p.done) / max(time.Since(p.start).Seconds(), 1e-9)
		fmt.Fprintf(os.Stderr, "forklab sweep: %d/%d pairs · %s · %.1f pairs/s · %s\n", p.done, p.total, desc, rate, eta)
	}
}

// budgetReached names the --max-cost limits cost has reached, "" for none:
// "usd 5.00219 ≥ 5", in the order world.CostFields lists the fields.
func budgetReached(limit map[string]float64, c world.Cost) string {
	var parts []string
	for _, f := range world.CostFields {
		if max, ok := limit[f]; ok {
			if v := c.Field(f); v >= max {
				parts = append(parts, fmt.Sprintf("%s %s ≥ %s", f, strconv.FormatFloat(roundCost(v), 'g', -1, 64), strconv.FormatFloat(max, 'g', -1, 64)))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// roundCost rounds a sum of reported costs to 9 significant digits: the
// same seeds summed in another order (they finish in any order) differ in
// the last bits of a float64, which a message must not show.
func roundCost(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 9, 64), 64)
	return v
}

// stopMessage says why a sweep stopped at --max-cost, with the cost of
// the sweep so far (budgetCost) taken once the seeds in progress had
// finished: a deterministic figure — a resume that asks nothing new prints
// the same every time — not the moment the budget was noticed.
func (p *sweepProgress) stopMessage(out string) string {
	c := p.budgetCost()
	reached := budgetReached(p.limit, c)
	if reached == "" {
		reached = "not reached"
	}
	msg := fmt.Sprintf("sweep stopped at --max-cost %s (%s): the seeds finished so far cost %s", limitText(p.limit), reached, costText(p.decl, c))
	if p.def != nil {
		spent, _ := p.def.Spent()
		switch {
		case spent == (world.Cost{}):
			msg += ", all in earlier runs: nothing new was asked of the agent"
		case p.def.Journaled() != (world.Cost{}):
			msg += fmt.Sprintf(" (%s in earlier runs, %s now)", costText(p.decl, p.def.Journaled()), costText(p.decl, spent))
		}
	}
	return msg + fmt.Sprintf("; %s is as it was before; every finished seed is kept: raise --max-cost and run again with --resume", out)
}

// limitText writes a --max-cost budget as the flag takes it: usd=5 or
// tokens=2000000,usd=5.
func limitText(limit map[string]float64) string {
	var parts []string
	for _, f := range world.CostFields {
		if max, ok := limit[f]; ok {
			parts = append(parts, f+"="+strconv.FormatFloat(max, 'g', -1, 64))
		}
	}
	for f, max := range limit {
		if !slices.Contains(world.CostFields, f) {
			parts = append(parts, f+"="+strconv.FormatFloat(max, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// watch checks the budget and refreshes the bar while the agent spends,
// between finished seeds; it returns when ctx ends.
func (p *sweepProgress) watch(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.mu.Lock()
			p.update()
			p.mu.Unlock()
		}
	}
}
