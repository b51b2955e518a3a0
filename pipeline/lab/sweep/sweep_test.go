package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// runSweep runs spec into a new directory (or out, if given) and returns it.
func runSweep(t testing.TB, spec sweep.Spec, opt sweep.Options, out ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	if len(out) > 0 {
		dir = out[0]
	}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.Stage(dir, true, false)
	if err != nil {
		t.Fatal(err)
	}
	opt.Version = "test"
	if _, err := sweep.Run(context.Background(), r, st, opt); err != nil {
		st.Release()
		t.Fatal(err)
	}
	return dir
}

// tableFiles maps each Parquet file's path relative to dir to its bytes.
func tableFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".parquet" {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%s: %d files against %d", what, len(a), len(b))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s: %s differs", what, name)
		}
	}
}

// The seed's table, through Parquet: rescued 75, harmed 83, unchanged 142,
// and by same_obs as the reference core printed it.
func TestSeedTable(t *testing.T) {
	out := runSweep(t, sweep.DefaultSpec(), sweep.Options{})
	got := fmt.Sprint(ducktest.Query(t, out, "SELECT same_obs, label, count(*) FROM {pairs} GROUP BY ALL ORDER BY ALL"))
	want := "[[false harmed 83] [false unchanged 72] [true rescued 75] [true unchanged 70]]"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// noisySpec is a noisy, imperfect spec with two fork steps, every arm but
// policy, three replicas and a grid, over more than one unit.
func noisySpec(replicas int) sweep.Spec {
	spec := sweep.DefaultSpec()
	spec.ForkAt = []int{1, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	spec.Replicas = replicas
	spec.Model.Temperature = 0.1
	spec.Params = world.Params{"p_obs_noise": 0.05, "p_refresh_fail": 0.2}
	spec.Grid = map[string][]any{"p_stall": {0.0, 0.2}}
	spec.Seeds = sweep.Range{Start: 100, End: 100 + 2*spec.ShardSeeds() + 17}
	return spec
}

// The files, not only the rows, are the same whatever the worker count,
// and whether units are streamed (a built-in world's sweep) or buffered
// whole (an agent's): the layout of a file depends on its rows only.
func TestOutputIndependentOfWorkersAndBuffering(t *testing.T) {
	spec := noisySpec(3)
	a := tableFiles(t, runSweep(t, spec, sweep.Options{Workers: 1}))
	if len(a) < 20 {
		t.Fatalf("want several units, got %d files", len(a))
	}
	sameFiles(t, "3 workers against 1", a, tableFiles(t, runSweep(t, spec, sweep.Options{Workers: 3})))
	sameFiles(t, "buffered against streamed", a, tableFiles(t, runSweep(t, spec, sweep.Options{Workers: 2, Buffered: true})))
}

// Every pair row agrees with its branch rows: the win counts are the
// branches' successes, each side's success is a strict majority of its
// replicas (a tie fails), and the label and quadrant follow — for odd and
// even replica counts; extra_steps is the arm's mean branch cost over its
// replicas minus off's (issue 25 H: the sum, not divided by the replicas,
// passed every test), and fault and the features are the checkpoint's.
func TestPairsAgreeWithBranches(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4} {
		spec := noisySpec(k)
		spec.Seeds = sweep.Range{Start: 0, End: 3000}
		out := runSweep(t, spec, sweep.Options{})
		rows := ducktest.Query(t, out, `
			WITH wins AS (
				SELECT config_id, fork_step, seed, arm, count(*) AS n, count(*) FILTER (WHERE success) AS wins,
				       avg(cost_steps) AS steps
				FROM {branches} GROUP BY ALL
			)
			SELECT count(*) AS pairs,
			       count(*) FILTER (WHERE p.control_wins <> c.wins OR p.treatment_wins <> w.wins
			           OR p.replicas <> w.n OR c.n <> w.n
			           OR p.control_success <> (2 * c.wins > c.n) OR p.treatment_success <> (2 * w.wins > w.n)
			           OR p.label <> CASE WHEN 2 * w.wins > w.n AND NOT 2 * c.wins > c.n THEN 'rescued'
			                              WHEN 2 * c.wins > c.n AND NOT 2 * w.wins > w.n THEN 'harmed'
			                              ELSE 'unchanged' END
			           OR p.quadrant <> CASE WHEN p.label = 'rescued' THEN 'persuadable'
			                                 WHEN p.label = 'harmed' THEN 'sleeping_dog'
			                                 WHEN p.control_success THEN 'sure_thing' ELSE 'lost_cause' END
			           OR NOT abs(p.extra_steps - (w.steps - c.steps)) < 1e-9
			           OR p.fault IS DISTINCT FROM k.hidden_fault OR p.same_obs IS DISTINCT FROM k.same_obs
			           OR p.steps_used IS DISTINCT FROM k.steps_used OR p.hidden_value IS DISTINCT FROM k.hidden_value) AS wrong,
			       count(*) FILTER (WHERE w.steps <> c.steps AND w.n > 1) AS extra_cost,
			       count(*) FILTER (WHERE c.wins * 2 = c.n OR w.wins * 2 = w.n) AS ties
			FROM {pairs} AS p
			JOIN wins AS c ON c.config_id = p.config_id AND c.fork_step = p.fork_step AND c.seed = p.seed AND c.arm = 'off'
			JOIN wins AS w ON w.config_id = p.config_id AND w.fork_step = p.fork_step AND w.seed = p.seed AND w.arm = p.arm
			JOIN {checkpoints} AS k ON k.config_id = p.config_id AND k.fork_step = p.fork_step AND k.seed = p.seed`)
		pairs, wrong, extra, ties := rows[0][0], rows[0][1], rows[0][2], rows[0][3]
		if want := fmt.Sprint(3000 * 2 * 2 * 3); pairs != want || wrong != "0" {
			t.Fatalf("K=%d: %s pairs (want %s), %s disagree with their branches", k, pairs, want, wrong)
		}
		if k > 1 && extra == "0" {
			t.Fatalf("K=%d: no pair whose sides cost differently, so extra_steps went untested", k)
		}
		if k%2 == 0 && ties == "0" {
			t.Fatalf("K=%d: no tied side, so the tie rule went untested", k)
		}
	}
}

// Every row read back is what the reference fork.Lab computes: tasks from
// the start state, checkpoints that decode, round-trip and verify, features
// and hidden truth of the decoded state, and every branch the Lab's branch
// of it.
func TestTablesReadBackAsForkLabComputes(t *testing.T) {
	spec := noisySpec(3)
	spec.Grid = nil
	spec.Params["p_stall"] = 0.1
	spec.Seeds = sweep.Range{Start: 7, End: 7 + 600}
	out := runSweep(t, spec, sweep.Options{})
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	w, err := counter.New(counter.ParamsOf(r.Spec.Params))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := fork.NewLab[counter.State](w, spec.Model)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range ducktest.Query(t, out, "SELECT seed, budget, slack, coalesce(freeze_at, 0), status FROM {tasks} ORDER BY seed") {
		var seed uint64
		fmt.Sscan(row[0], &seed)
		s := w.Start(seed)
		if want := fmt.Sprint([]any{seed, s.Budget, s.Budget - 7, s.FreezeAt, "ok"}); fmt.Sprint(row) != want {
			t.Fatalf("task %v, want %s", row, want)
		}
	}
	// Every column is Snappy-compressed (tableCodec), and reads back.
	codecs := ducktest.Query(t, out, "SELECT list(DISTINCT compression) FROM parquet_metadata('"+out+"/*/*/*/*.parquet')")
	if got := fmt.Sprint(codecs); got != "[[[SNAPPY]]]" {
		t.Errorf("codecs of the checkpoints, branches and pairs %s, want [SNAPPY]", got)
	}
	cps := ducktest.Query(t, out, `SELECT fork_step, seed, checkpoint, over, same_obs, repeat_run, obs_value, steps_used, budget_left,
		hidden_stuck, hidden_fault, hidden_value, cost_steps FROM {checkpoints} ORDER BY fork_step, seed`)
	brs := ducktest.Query(t, out, `SELECT fork_step, seed, arm, replica, intervened, success, cost_steps, noise_key FROM {branches}
		ORDER BY fork_step, seed, CASE arm WHEN 'off' THEN 0 WHEN 'on' THEN 1 WHEN 'placebo' THEN 2 ELSE 3 END, replica`)
	if len(cps) != 2*600 || len(brs) != len(cps)*4*3 {
		t.Fatalf("%d checkpoints, %d branches", len(cps), len(brs))
	}
	for i, row := range cps {
		c, err := fork.DecodeCheckpoint[counter.State]([]byte(row[2]), w.Declaration())
		if err != nil {
			t.Fatalf("%v: %v", row[:2], err)
		}
		if b, _ := c.Encode(); string(b) != row[2] || fmt.Sprint(c.ForkStep) != row[0] {
			t.Fatalf("%v: checkpoint does not round-trip:\n%s\n%s", row[:2], row[2], b)
		}
		if err := fork.Verify(ref, c); err != nil {
			t.Fatalf("%v: %v", row[:2], err)
		}
		s := c.State
		want := fmt.Sprint([]any{w.Over(&s), s.SameObs, s.RepeatRun, s.Obs, s.Steps, max(0, s.Budget-s.Steps), s.Frozen, s.FreezeAt != 0, s.V, s.Steps})
		if got := fmt.Sprint(row[3:]); got != want {
			t.Fatalf("%v: row %s, state %s", row[:2], got, want)
		}
		arms := []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
		for j, b := range brs[i*12 : (i+1)*12] {
			arm, rep := arms[j/3], j%3
			var final counter.State
			ok, iv := ref.Branch(&final, &s, s.Seed, c.ForkStep, arm, rep, false)
			// noise_key: the key the branch's noise was drawn from.
			want := fmt.Sprint([]any{c.ForkStep, s.Seed, arm, rep, iv, ok, final.Steps - s.Steps, fmt.Sprintf("%016x", fork.BranchKey(s.Seed, c.ForkStep, arm, rep, false))})
			if got := fmt.Sprint(b); got != want {
				t.Fatalf("branch %s, fork.Lab %s", got, want)
			}
		}
	}
}

// With a greedy model the A/A arm is off again, replica for replica: its
// flip rate, the noise floor, is exactly zero — also in an imperfect world,
// whose randomness belongs to the task, not to the arm.
func TestAAWithGreedyModelNeverFlips(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 2000}
	spec.ForkAt = []int{2, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.AA}
	spec.Replicas = 3
	spec.Params = world.Params{"p_stall": 0.2, "p_obs_noise": 0.1, "p_refresh_fail": 0.3}
	out := runSweep(t, spec, sweep.Options{})
	got := fmt.Sprint(ducktest.Query(t, out, "SELECT count(*), count(*) FILTER (WHERE label <> 'unchanged' OR control_wins <> treatment_wins) FROM {pairs}"))
	if got != "[[4000 0]]" {
		t.Fatalf("aa pairs and flips: %s, want 4000 and 0", got)
	}
}

// failing is the counter world with branches that fail: every seed
// divisible by failEvery fails its off branch of replica 0 (an agent that
// crashed, say), and seeds divisible by 1000 fail to start.
type failing struct{ lab.Definition }

const failEvery = 97

func (f failing) Open(p world.Params, m fork.Model) (lab.Instance, error) {
	inst, err := f.Definition.Open(p, m)
	return failingInstance{inst}, err
}

type failingInstance struct{ lab.Instance }

func (i failingInstance) Runner(plan lab.Plan) (lab.Runner, error) {
	rn, err := i.Instance.Runner(plan)
	return failingRunner{rn}, err
}

type failingRunner struct{ lab.Runner }

func (r failingRunner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	return r.Runner.Run(ctx, lo, hi, func(res *lab.SeedResult) error {
		switch {
		case res.Seed%1000 == 0:
			res.Err, res.Forks = "start: agent exited with status 1", res.Forks[:0]
		case res.Seed%failEvery == 0:
			res.Forks[0].Branches[0].Err = "timeout after 30s"
		}
		return emit(res)
	})
}

// Errors are rows, never labels: a failed branch makes its pairs error rows
// with the error text and no label, a seed that failed to start makes every
// row of it an error row, the other pairs are untouched, and a unit with
// errors is written the same whether it was streamed (and redone when the
// first error came) or buffered from the start.
func TestErrorsAreRowsNeverLabels(t *testing.T) {
	def := failing{counter.Definition}
	decl := def.Declaration()
	decl.Name = "failing_counter"
	lab.Register(renamed{def, decl})
	defer lab.Unregister(decl.Name)
	spec := sweep.DefaultSpec()
	spec.World = decl.Name
	spec.Seeds = sweep.Range{Start: 0, End: 3000}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo}
	streamed := runSweep(t, spec, sweep.Options{})
	sameFiles(t, "buffered against streamed", tableFiles(t, streamed), tableFiles(t, runSweep(t, spec, sweep.Options{Buffered: true})))
	got := ducktest.Query(t, streamed, `SELECT status, count(*), count(label), count(DISTINCT error), min(error),
		count(*) FILTER (WHERE same_obs IS NULL) FROM {pairs} GROUP BY status ORDER BY status`)
	// 3000 seeds × 2 treatment arms; seeds 0, 1000, 2000 fail to start;
	// the other 30 multiples of 97 fail a branch of off, so both of their
	// pairs fail but keep their features.
	want := "[[error 66 0 2 off replica 0: timeout after 30s 6] [ok 5934 5934 0 <nil> 0]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("pairs by status: %v, want %s", got, want)
	}
	got = ducktest.Query(t, streamed, "SELECT count(*) FILTER (WHERE status = 'error'), count(*) FILTER (WHERE success IS NULL), count(*) FILTER (WHERE noise_key IS NULL) FROM {branches}")
	if fmt.Sprint(got) != "[[39 39 9]]" {
		t.Fatalf("error branches: %v, want 3 seeds × 3 arms + 30 = 39, of which the 9 without a checkpoint have no noise key", got)
	}
}

// renamed is a definition under another declaration's name.
type renamed struct {
	lab.Definition
	decl world.Declaration
}

func (r renamed) Declaration() world.Declaration { return r.decl }

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want sweep.Range
		err  string
	}{
		{"0:300", sweep.Range{Start: 0, End: 300}, ""},
		{"300", sweep.Range{Start: 0, End: 300}, ""},
		{" 5 : 9 ", sweep.Range{Start: 5, End: 9}, ""},
		{"9:5", sweep.Range{}, "empty"},
		{"5:5", sweep.Range{}, "empty"},
		{"a:b", sweep.Range{}, "malformed"},
		{"-1:5", sweep.Range{}, "malformed"},
		{"0:9223372036854775808", sweep.Range{}, "malformed"},
		{"", sweep.Range{}, "malformed"},
	} {
		got, err := sweep.ParseRange(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRange(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"3", "[3]", ""},
		{"3,1,2", "[1 2 3]", ""},
		// A repeated step is refused, as a repeated arm is; it used to be
		// dropped without a word.
		{"3,3", "", `fork step 3 is listed twice in "3,3": list each step once (e.g. 3, 1,2,3 or 1-4)`},
		{"3,1,2,3", "", `fork step 3 is listed twice in "3,1,2,3"`},
		{"1-4,3", "", `fork step 3 is listed twice in "1-4,3"`},
		{"1-3,2-5", "", `fork step 2 is listed twice in "1-3,2-5"`},
		{"1-4", "[1 2 3 4]", ""},
		{"1-2,5", "[1 2 5]", ""},
		{"0", "", "below 1"},
		{"-1", "", "malformed"},
		{"4-2", "", "upwards"},
		{"x", "", "malformed"},
		{"1,,2", "", "malformed"},
	} {
		got, err := sweep.ParseSteps(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSteps(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("ParseSteps(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestReadSpecFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want, err string }{
		{"a.yaml", "fork_at: 3\nseeds: \"0:50\"\n", "[3] 0:50", ""},
		{"b.yaml", "fork_at: \"1-3\"\n", "[1 2 3] 0:300", ""},
		{"c.json", `{"fork_at": [4, 2]}`, "[2 4] 0:300", ""},
		{"d.yaml", "fork_at: \"3,3\"\n", "", `fork_at: fork step 3 is listed twice in "3,3"`},
		{"e.yaml", "replicas: five\n", "", "replicas must be an integer in [1, 1000], got text (or a number too large to read)"},
		{"f.json", `{"fork_at": [3],}`, "", "invalid character"},
		{"g.yaml", "- 1\n- 2\n", "", "want a mapping of keys"},
		{"h.toml", "", "", "want a .json, .yaml or .yml file"},
		{"i.yaml", "temprature: 0.1\n", "", `unknown key "temprature"`},
	} {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, []byte(tc.text), 0o644)
		s, err := sweep.ReadSpecFile(p, sweep.DefaultSpec())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(s.ForkAt, " ", s.Seeds) != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, s.ForkAt, err, tc.want)
		}
	}
}

// Resolve refuses what no world can play, naming the valid choices.
func TestResolveRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*sweep.Spec)
		err  string
	}{
		{"unknown world", func(s *sweep.Spec) { s.World = "chess" }, `unknown world "chess" (known: counter`},
		{"unknown param", func(s *sweep.Spec) { s.Params = world.Params{"p_stal": 0.1} }, `world counter has no parameter "p_stal" (its parameters: target, base_budget`},
		{"out of range", func(s *sweep.Spec) { s.Params = world.Params{"p_stall": 1.5} }, "p_stall must be a number in [0, 1], got 1.5"},
		{"wrap-around", func(s *sweep.Spec) { s.Params = world.Params{"base_budget": 2147483648.0} }, "base_budget must be an integer in [1, 1048576], got 2147483648"},
		{"not an integer", func(s *sweep.Spec) { s.Params = world.Params{"target": 6.5} }, "target must be an integer in [1, 1048576], got 6.5"},
		{"grid key", func(s *sweep.Spec) { s.Grid = map[string][]any{"p_stal": {0.1}} }, `grid: unknown parameter "p_stal"`},
		{"grid list", func(s *sweep.Spec) { s.Grid = map[string][]any{"slack": {1.0}} }, "grid: slack is a list"},
		{"grid value", func(s *sweep.Spec) { s.Grid = map[string][]any{"p_stall": {0.1, 2.0}} }, "grid: p_stall must be a number in [0, 1], got 2"},
		{"fork past budget", func(s *sweep.Spec) { s.ForkAt = []int{100000} }, "fork_at: step 100000 is past the most steps a run can take (9)"},
		{"fork step twice", func(s *sweep.Spec) { s.ForkAt = []int{2, 3, 3} }, "fork_at: step 3 is listed twice: list each fork step once (e.g. [1, 2, 3])"},
		{"policy without arm", func(s *sweep.Spec) { s.Arms = []fork.Arm{fork.Off, fork.Policy} }, "the policy arm needs a guard rule"},
		{"replicas", func(s *sweep.Spec) { s.Replicas = 0 }, "replicas: must be an integer in [1, 1000], got 0"},
	} {
		s := sweep.DefaultSpec()
		tc.edit(&s)
		_, err := s.Resolve()
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
	}
}

// The units of a sweep are produced one at a time: the largest seed range
// a sweep takes costs no memory up front, and the last unit ends at END
// exactly, without overflow (issue 12 G).
func TestUnitsStream(t *testing.T) {
	s := sweep.DefaultSpec()
	size := s.ShardSeeds()
	s.Seeds = sweep.Range{Start: sweep.MaxSeed - sweep.MaxUnits*size, End: sweep.MaxSeed}
	r, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	allocs := testing.AllocsPerRun(3, func() {
		n = 0
		r.Units(func(u sweep.Unit) bool { n++; return n < 5 })
	})
	if n != 5 || r.UnitCount() != sweep.MaxUnits || allocs > 2 {
		t.Fatalf("took %d units; %d in all; %v allocations", n, r.UnitCount(), allocs)
	}
	var last sweep.Unit
	r.Units(func(u sweep.Unit) bool { last = u; return true })
	if last.Index != sweep.MaxUnits-1 || last.Seeds.End != sweep.MaxSeed || last.Seeds.Len() != size {
		t.Fatalf("last unit %+v", last)
	}
	s.Seeds = sweep.Range{Start: sweep.MaxSeed - 10, End: sweep.MaxSeed}
	if r, err = s.Resolve(); err != nil {
		t.Fatal(err)
	}
	var units []sweep.Unit
	r.Units(func(u sweep.Unit) bool { units = append(units, u); return true })
	if len(units) != 1 || units[0].Seeds != s.Seeds {
		t.Fatalf("units %v", units)
	}
}

// The automatic unit size cuts the seed range into units of equal size (a
// multiple of 64), as many as units of 2^18 branch rows would make, so no
// worker is left alone with a long unit at the end while a short last one
// kept the other idle; unit_seeds, when set, is taken as it is.
func TestUnitsEqualSize(t *testing.T) {
	for _, c := range []struct {
		seeds     sweep.Range
		unitSeeds int
		size      uint64 // ShardSeeds
		units     int
		last      uint64 // seeds in the last unit
	}{
		{sweep.Range{Start: 0, End: 1_000_000}, 0, 125_056, 8, 124_608},
		{sweep.Range{Start: 5, End: 1_000_005}, 0, 125_056, 8, 124_608},
		{sweep.Range{Start: 0, End: 131_072}, 0, 131_072, 1, 131_072},
		{sweep.Range{Start: 0, End: 131_073}, 0, 65_600, 2, 65_473},
		{sweep.Range{Start: 0, End: 100}, 0, 131_072, 1, 100},
		{sweep.Range{Start: 0, End: 1_000_000}, 1000, 1000, 1000, 1000},
		{sweep.Range{Start: 0, End: 1_000_500}, 1000, 1000, 1001, 500},
	} {
		s := sweep.DefaultSpec()
		s.Seeds, s.UnitSeeds = c.seeds, c.unitSeeds
		r, err := s.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		var units []sweep.Unit
		r.Units(func(u sweep.Unit) bool { units = append(units, u); return true })
		if got := s.ShardSeeds(); got != c.size || len(units) != c.units || r.UnitCount() != uint64(c.units) ||
			units[len(units)-1].Seeds.Len() != c.last || units[len(units)-1].Seeds.End != c.seeds.End {
			t.Errorf("seeds %v unit_seeds %d: size %d, %d units (UnitCount %d), last %v; want size %d, %d units, last of %d seeds",
				c.seeds, c.unitSeeds, got, len(units), r.UnitCount(), units[len(units)-1].Seeds, c.size, c.units, c.last)
		}
	}
}

// A sweep is bounded whatever its seed range: at most MaxUnits units (the
// manifest lists each unit's files) and MaxRows branch rows; one past
// either is refused naming the bound and the largest range that fits —
// never a sweep that runs for ever or a count that wraps (issue 12 G).
func TestSizeBounds(t *testing.T) {
	size := sweep.DefaultSpec().ShardSeeds()
	grid := func(s *sweep.Spec) { s.Grid = map[string][]any{"target": {6.0, 7.0, 8.0, 9.0}} }
	for _, tc := range []struct {
		name string
		edit func(*sweep.Spec)
		err  string
	}{
		{"whole seed space", func(s *sweep.Spec) { s.Seeds = sweep.Range{Start: 0, End: sweep.MaxSeed} },
			"seeds: 0:9223372036854775807 is 70368744177664 units of 131072 seeds in each of 1 configuration(s); a sweep holds at most 65536 units (its manifest lists every unit's files): sweep at most 8589934592 seeds at a time (e.g. 0:8589934592), or raise unit_seeds (up to 16777216)"},
		{"most units", func(s *sweep.Spec) { s.Seeds = sweep.Range{Start: 5, End: 5 + sweep.MaxUnits*size} }, ""},
		{"one unit more", func(s *sweep.Spec) { s.Seeds = sweep.Range{Start: 5, End: 6 + sweep.MaxUnits*size} },
			"seeds: 5:8589934598 is 65537 units of 131072 seeds in each of 1 configuration(s)"},
		{"most units of a grid", func(s *sweep.Spec) { grid(s); s.Seeds = sweep.Range{End: sweep.MaxUnits / 4 * size} }, ""},
		{"grid past the units", func(s *sweep.Spec) { grid(s); s.Seeds = sweep.Range{End: sweep.MaxUnits/4*size + 1} },
			"seeds: 0:2147483649 is 16385 units of 131072 seeds in each of 4 configuration(s); a sweep holds at most 65536 units (its manifest lists every unit's files): sweep at most 2147483648 seeds at a time (e.g. 0:2147483648)"},
		{"bigger units", func(s *sweep.Spec) {
			s.UnitSeeds = sweep.MaxUnitSeeds
			s.Seeds = sweep.Range{End: sweep.MaxUnits * sweep.MaxUnitSeeds}
		}, ""},
		{"rows", func(s *sweep.Spec) {
			s.UnitSeeds, s.Replicas, s.ForkAt = sweep.MaxUnitSeeds, sweep.MaxReplicas, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
			s.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
			s.Seeds = sweep.Range{End: sweep.MaxRows/36000 + 1}
		}, "seeds: 0:250199979299 would make more than 9007199254740992 branch rows (36000 per seed: fork steps × arms × replicas × configurations); a sweep writes at most 9007199254740992 (2^53, the largest count JSON readers hold exactly): sweep at most 250199979298 seeds at a time"},
		{"most rows", func(s *sweep.Spec) {
			s.UnitSeeds, s.Replicas, s.ForkAt = sweep.MaxUnitSeeds, sweep.MaxReplicas, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
			s.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
			s.Seeds = sweep.Range{End: sweep.MaxRows / 36000}
		}, ""},
	} {
		s := sweep.DefaultSpec()
		tc.edit(&s)
		_, err := s.Resolve()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
		var ke *sweep.KeyError
		if tc.err != "" && (!errors.As(err, &ke) || ke.Key != "seeds") {
			t.Errorf("%s: %v is not a KeyError of seeds", tc.name, err)
		}
	}
}

// A duration in a spec is read as text or as seconds, and one too large for
// a time.Duration is refused, not wrapped (issue 12 G).
func TestDurationBounds(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{`"90s"`, "1m30s", ""},
		{`90`, "1m30s", ""},
		{`0.5`, "500ms", ""},
		{`1e300`, "", "duration 1e+300 seconds is out of range: want a duration in [1ms, 24h]"},
		{`-1e300`, "", "duration -1e+300 seconds is out of range"},
		{`"9999999999h"`, "", `duration "9999999999h": want a duration in [1ms, 24h]`},
		{`true`, "", "duration true: want a duration in [1ms, 24h]"},
	} {
		var d sweep.Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		switch {
		case tc.err == "" && (err != nil || time.Duration(d).String() != tc.want):
			t.Errorf("%s: %v, %v; want %s", tc.in, time.Duration(d), err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v; want %q", tc.in, err, tc.err)
		}
	}
}

// With a noisy model the policy arm's branch is exactly the on branch where
// its rule fires and exactly the off branch where it does not, replica for
// replica (fork.BranchKey): a policy pair whose rule did not fire is
// unchanged by construction.
func TestPolicyBranchesAreOnOrOff(t *testing.T) {
	spec := noisySpec(3)
	spec.Grid = nil
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Policy}
	rule := policy.Rule{Version: policy.Version, World: "counter", WorldVersion: counter.Version,
		All: []policy.Condition{{Feature: "repeat_run", Op: ">=", Value: 1.0}}}
	spec.Policy = &rule
	spec.Seeds = sweep.Range{Start: 0, End: 4000}
	out := runSweep(t, spec, sweep.Options{})
	got := ducktest.Query(t, out, `
		SELECT count(*) AS branches,
		       count(*) FILTER (WHERE p.intervened) AS fired,
		       count(*) FILTER (WHERE p.success <> CASE WHEN p.intervened THEN o.success ELSE f.success END
		                           OR p.cost_steps <> CASE WHEN p.intervened THEN o.cost_steps ELSE f.cost_steps END) AS differing,
		       count(*) FILTER (WHERE o.success <> f.success) AS on_differs_from_off,
		       count(*) FILTER (WHERE p.noise_key <> CASE WHEN p.intervened THEN o.noise_key ELSE f.noise_key END OR o.noise_key = f.noise_key) AS keys
		FROM {branches} AS p
		JOIN {branches} AS o USING (config_id, fork_step, seed, replica)
		JOIN {branches} AS f USING (config_id, fork_step, seed, replica)
		WHERE p.arm = 'policy' AND o.arm = 'on' AND f.arm = 'off'`)
	row := got[0]
	if row[0] != fmt.Sprint(4000*2*3) || row[1] == "0" || row[1] == row[0] || row[2] != "0" || row[3] == "0" || row[4] != "0" {
		t.Fatalf("policy branches %v: want %d, some fired and some not, 0 differing from on/off, on and off differing somewhere, each with on's noise key where it fired and off's elsewhere", row, 4000*2*3)
	}
	unfired := ducktest.Query(t, out, "SELECT count(*) FROM {pairs} AS pairs WHERE arm = 'policy' AND label <> 'unchanged' AND NOT EXISTS (SELECT 1 FROM {branches} AS b WHERE b.arm = 'policy' AND b.intervened AND b.seed = pairs.seed AND b.fork_step = pairs.fork_step)")
	if unfired[0][0] != "0" {
		t.Fatalf("%s policy pairs without a fired branch flipped", unfired[0][0])
	}
}

// A parameter is one value or a grid axis, never both, and a grid axis
// lists each value once (testdata/specs/grid-*.yaml); a resolved grid
// spec's params leave the axes out (each configuration has its own), so
// it resolves again to the same spec.
func TestGridRefusesSingleValuesAndRepeats(t *testing.T) {
	for _, tc := range []struct{ file, err string }{
		{"grid-and-params.yaml", "params: p_stall is given a single value (params: p_stall: 0.3) and is a grid axis too (grid: p_stall: [0, 0.2]): keep one of the two"},
		{"grid-duplicate.yaml", "grid: p_stall lists 0 twice: two configurations would be the same"},
		{"grid-and-model.yaml", "model: temperature is given a single value (model: temperature: 0.3) and is a grid axis too (grid: temperature: [0, 0.1]): keep one of the two"},
	} {
		s, err := sweep.ReadSpecFile("../../../testdata/specs/"+tc.file, sweep.DefaultSpec())
		if err == nil {
			_, err = s.Resolve()
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.file, err, tc.err)
		}
	}
	s, err := sweep.ReadSpecFile("../../../testdata/specs/grid-stall.yaml", sweep.DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Spec.Params["p_stall"]; ok || r.Spec.Params["target"] != int64(6) {
		t.Fatalf("resolved params %v: want every parameter but the grid's p_stall", r.Spec.Params)
	}
	if len(r.Configs) != 2 || r.Configs[0].Params["p_stall"] != 0.0 || r.Configs[1].Params["p_stall"] != 0.2 {
		t.Fatalf("configs %+v", r.Configs)
	}
	again, err := r.Spec.Resolve()
	if err != nil {
		t.Fatalf("a resolved grid spec does not resolve again: %v", err)
	}
	a, _ := json.Marshal(again.Spec)
	b, _ := json.Marshal(r.Spec)
	if string(a) != string(b) {
		t.Fatalf("resolved twice:\n%s\n%s", a, b)
	}
}
