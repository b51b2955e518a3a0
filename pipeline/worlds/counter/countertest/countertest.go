// Package countertest holds the counter world's noisy and imperfect
// configurations to an independent reference: the seed's Python core
// extended with the imperfect-world parameters, the noisy model, every arm
// and replicas (testdata/seed/imperfect_reference.py), whose tables
// testdata/seed/gen_imperfect_golden.py writes to
// testdata/seed/imperfect_golden.json.
//
// A test plays a golden configuration its own way (fork.Lab, the counter's
// runner, a sweep read back from Parquet), describes each checkpoint and
// its branches as a Fork, and calls Config.Check, which compares the
// per-seed rows and the quadrant tables with the reference's, exactly.
package countertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// Golden is testdata/seed/imperfect_golden.json.
type Golden struct {
	Configs []Config `json:"configs"`
}

// Config is one golden configuration and the reference's numbers for it.
type Config struct {
	Name string `json:"name"`
	// Seeds is the seed range [start, end) the tables count.
	Seeds    [2]uint64  `json:"seeds"`
	ForkAt   []int      `json:"fork_at"`
	Arms     []fork.Arm `json:"arms"` // off first
	Replicas int        `json:"replicas"`
	// Params are the world parameters the configuration sets (the others
	// take their defaults), as JSON decodes them.
	Params map[string]any `json:"params"`
	Model  fork.Model     `json:"model"`
	// Policy is the policy arm's rule as [feature, op, value] conditions
	// that must all hold; nil without a policy arm.
	Policy [][3]any `json:"policy"`
	// PerSeedSeeds is how many seeds, from Seeds[0], PerSeed describes.
	PerSeedSeeds uint64 `json:"per_seed_seeds"`
	// Tables maps fork step (decimal) → treatment arm → slice ("all",
	// "same_obs=true", "same_obs=false", and for the policy arm
	// "fires=true", "fires=false") → the pair counts [persuadable,
	// sleeping_dog, sure_thing, lost_cause].
	Tables map[string]map[fork.Arm]map[string][4]int `json:"tables"`
	// PerSeed has one row per (seed, fork step), seed-major (Row).
	PerSeed []string `json:"per_seed"`
}

// Quadrants is the order of a table's counts.
var Quadrants = []fork.Quadrant{fork.Persuadable, fork.SleepingDog, fork.SureThing, fork.LostCause}

// Root returns the module's root directory: the nearest directory above
// the working directory that holds go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}

// Load reads the golden file and checks that it is whole.
func Load(t testing.TB) Golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "testdata", "seed", "imperfect_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g Golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("imperfect_golden.json: %v", err)
	}
	if len(g.Configs) < 5 {
		t.Fatalf("imperfect_golden.json: %d configurations, want at least 5", len(g.Configs))
	}
	for _, c := range g.Configs {
		if len(c.Tables) != len(c.ForkAt) || uint64(len(c.PerSeed)) != c.PerSeedSeeds*uint64(len(c.ForkAt)) ||
			c.PerSeedSeeds == 0 || len(c.Arms) < 2 || c.Arms[0] != fork.Off {
			t.Fatalf("imperfect_golden.json: configuration %s is incomplete", c.Name)
		}
	}
	return g
}

// WorldParams resolves the configuration's parameters, defaults filled in.
func (c Config) WorldParams(t testing.TB) world.Params {
	t.Helper()
	p, err := counter.Declaration().Resolve(c.Params)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return p
}

// World returns the counter world of the configuration.
func (c Config) World(t testing.TB) counter.World {
	t.Helper()
	w, err := counter.New(counter.ParamsOf(c.WorldParams(t)))
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return w
}

// Rule returns the policy arm's rule, or nil.
func (c Config) Rule() *policy.Rule {
	if c.Policy == nil {
		return nil
	}
	r := &policy.Rule{Version: policy.Version, World: counter.Name, WorldVersion: counter.Version, All: []policy.Condition{}}
	for _, cond := range c.Policy {
		r.All = append(r.All, policy.Condition{Feature: fmt.Sprint(cond[0]), Op: fmt.Sprint(cond[1]), Value: cond[2]})
	}
	return r
}

// Fires returns the compiled policy rule, or nil.
func (c Config) Fires(t testing.TB) func([]world.Value) bool {
	t.Helper()
	r := c.Rule()
	if r == nil {
		return nil
	}
	f, err := r.Compile(counter.Declaration())
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return f
}

// Fork is one checkpoint of a seed and what its branches gave, as a test
// found it.
type Fork struct {
	Seed     uint64
	ForkStep int
	// Budget and FreezeAt are the task (FreezeAt 0: never sticks).
	Budget, FreezeAt int
	// SameObs and RepeatRun are the checkpoint's features of those names.
	SameObs   bool
	RepeatRun int
	// Fires is the policy rule's verdict (false without a policy arm).
	Fires bool
	// Wins counts each arm's successful replicas, off included.
	Wins map[fork.Arm]int
	// Quadrants has each treatment arm's pair quadrant.
	Quadrants map[fork.Arm]fork.Quadrant
}

// Row renders f as the reference's per-seed row:
// "SEED fF task=BUDGET/FREEZE same_obs=B repeat=N [fires=B] wins=ARM:W,...
// quadrants=ARM:Q,...".
func (c Config) Row(f Fork) string {
	var b strings.Builder
	freeze := "-"
	if f.FreezeAt != 0 {
		freeze = fmt.Sprint(f.FreezeAt)
	}
	fmt.Fprintf(&b, "%d f%d task=%d/%s same_obs=%t repeat=%d", f.Seed, f.ForkStep, f.Budget, freeze, f.SameObs, f.RepeatRun)
	if c.Policy != nil {
		fmt.Fprintf(&b, " fires=%t", f.Fires)
	}
	for i, a := range c.Arms {
		b.WriteString(map[bool]string{true: " wins=", false: ","}[i == 0])
		fmt.Fprintf(&b, "%s:%d", a, f.Wins[a])
	}
	for i, a := range c.Arms[1:] {
		b.WriteString(map[bool]string{true: " quadrants=", false: ","}[i == 0])
		fmt.Fprintf(&b, "%s:%s", a, f.Quadrants[a])
	}
	return b.String()
}

// Check compares forks, one per (seed, fork step) of the configuration's
// seed range in any order, with the reference: the per-seed rows of the
// first PerSeedSeeds seeds, and every table, count for count. It reports
// each difference as a test error naming the configuration, fork step,
// arm and slice.
func (c Config) Check(t testing.TB, how string, forks []Fork) {
	t.Helper()
	n := (c.Seeds[1] - c.Seeds[0]) * uint64(len(c.ForkAt))
	if uint64(len(forks)) != n {
		t.Errorf("%s %s: %d forks, want %d", how, c.Name, len(forks), n)
		return
	}
	rows := map[string]string{}
	tables := map[string]map[fork.Arm]map[string][4]int{}
	for _, f := range forks {
		if f.Seed < c.Seeds[0]+c.PerSeedSeeds {
			rows[fmt.Sprintf("%d f%d", f.Seed, f.ForkStep)] = c.Row(f)
		}
		fs := fmt.Sprint(f.ForkStep)
		if tables[fs] == nil {
			tables[fs] = map[fork.Arm]map[string][4]int{}
		}
		for _, a := range c.Arms[1:] {
			if tables[fs][a] == nil {
				tables[fs][a] = map[string][4]int{}
			}
			q := -1
			for i, x := range Quadrants {
				if f.Quadrants[a] == x {
					q = i
				}
			}
			if q < 0 {
				t.Errorf("%s %s: seed %d fork %d arm %s: quadrant %q", how, c.Name, f.Seed, f.ForkStep, a, f.Quadrants[a])
				return
			}
			slices := []string{"all", fmt.Sprintf("same_obs=%t", f.SameObs)}
			if a == fork.Policy {
				slices = append(slices, fmt.Sprintf("fires=%t", f.Fires))
			}
			for _, s := range slices {
				counts := tables[fs][a][s]
				counts[q]++
				tables[fs][a][s] = counts
			}
		}
	}
	bad := 0
	for _, want := range c.PerSeed {
		var seed uint64
		var step int
		fmt.Sscanf(want, "%d f%d", &seed, &step)
		if got := rows[fmt.Sprintf("%d f%d", seed, step)]; got != want && bad < 5 {
			bad++
			t.Errorf("%s %s: per-seed row\n got %s\nwant %s (reference)", how, c.Name, got, want)
		}
	}
	for fs, arms := range c.Tables {
		for a, slices := range arms {
			for s, want := range slices {
				if got := tables[fs][a][s]; got != want {
					t.Errorf("%s %s: fork %s arm %s %s: got %v, reference %v (persuadable, sleeping dog, sure thing, lost cause)",
						how, c.Name, fs, a, s, got, want)
				}
			}
			if len(tables[fs][a]) != len(slices) {
				t.Errorf("%s %s: fork %s arm %s: slices %v, reference has %d", how, c.Name, fs, a, tables[fs][a], len(slices))
			}
		}
	}
}

// Reference is what imperfect_reference.py prints for one job.
type Reference struct {
	Tables  map[string]map[fork.Arm]map[string][4]int `json:"tables"`
	PerSeed []string                                  `json:"per_seed"`
}

// Job asks the reference for configuration Config over seeds [Start,
// Start+Seeds), with per-seed rows for the first PerSeed of them.
type Job struct {
	Config       Config
	Start, Seeds uint64
	PerSeed      uint64
}

// RunReference runs testdata/seed/imperfect_reference.py with python3, in
// one process, on jobs and returns its results in order. It skips the test
// when python3 is not installed.
func RunReference(t testing.TB, jobs []Job) []Reference {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the reference cannot be run")
	}
	var in []map[string]any
	for _, j := range jobs {
		c := j.Config
		in = append(in, map[string]any{"start": j.Start, "seeds": j.Seeds, "per_seed": j.PerSeed,
			"config": map[string]any{"params": c.Params, "model": c.Model, "arms": c.Arms,
				"replicas": c.Replicas, "fork_at": c.ForkAt, "policy": c.Policy}})
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join(Root(t), "testdata", "seed", "imperfect_reference.py"), "--jobs")
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("imperfect_reference.py: %v\n%s", err, stderr.String())
	}
	var r []Reference
	if err := json.Unmarshal(out, &r); err != nil || len(r) != len(jobs) {
		t.Fatalf("imperfect_reference.py printed %d results for %d jobs (%v): %.200q", len(r), len(jobs), err, out)
	}
	return r
}
