package sweep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// golden is the population of the equivalence test: seeds 0..299's
// checkpoints at fork step 3, forklab checkpoint's.
const golden = "../../../testdata/runs/counter-0-300-at-3.jsonl"

// recordedSpec opens the population at path for the counter and returns
// its resolved spec, its source kept.
func recordedSpec(t testing.TB, path string, edit func(*sweep.Spec)) sweep.Resolved {
	t.Helper()
	return recordedSpecOf(t, "counter", path, edit)
}

// recordedSpecOf is recordedSpec for built-in world name.
func recordedSpecOf(t testing.TB, name, path string, edit func(*sweep.Spec)) sweep.Resolved {
	t.Helper()
	def, err := lab.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	src, err := recorded.Open(context.Background(), path, recorded.Options{Decl: def.Declaration(), Builtin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	spec := sweep.DefaultSpec()
	spec.World = name
	runs := sweep.Runs{Source: path}.FromListing(src.Listing())
	spec.Seeds, spec.Runs, spec.ForkAt = sweep.Range{}, &runs, src.Listing().ForkSteps
	if edit != nil {
		edit(&spec)
	}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	r.Source = src
	return r
}

func runResolved(t testing.TB, r sweep.Resolved, opt sweep.Options) (string, sweep.Result) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(dir, true, false)
	if err != nil {
		t.Fatal(err)
	}
	opt.Version = "test"
	res, err := sweep.Run(context.Background(), r, st, opt)
	if err != nil {
		st.Release()
		t.Fatal(err)
	}
	return dir, res
}

// A population of checkpoints at two fork steps, some with metadata, one
// whose features disagree with its checkpoint: each run has rows at its
// own step only, keyed by its run id; the disagreement is an error row
// that names the record and both values, never a label; the others'
// labels are their seeds'.
func TestRecordedSweepRows(t *testing.T) {
	def, _ := lab.Lookup("counter")
	params, _ := def.Declaration().Resolve(world.Params{})
	inst, err := def.Open(params, sweep.DefaultSpec().Model)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for seed := uint64(0); seed < 150; seed++ {
		step := 3
		if seed >= 100 {
			step = 2
		}
		f, err := inst.Checkpoint(seed, step)
		if err != nil {
			t.Fatal(err)
		}
		extra := ""
		switch {
		case seed%10 == 0:
			extra = `,"team":"a","note":{"k":1}`
		case seed == 7:
			extra = fmt.Sprintf(`,"features":{"same_obs":%t,"repeat_run":0,"obs_value":0,"steps_used":3,"budget_left":0}`, f.Features[0].I == 0)
		}
		fmt.Fprintf(&text, `{"run_id":"run-%d","checkpoint":%s%s}`+"\n", seed, f.Checkpoint, extra)
	}
	path := filepath.Join(t.TempDir(), "mixed.jsonl")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := recordedSpec(t, path, nil)
	if fmt.Sprint(r.Spec.ForkAt) != "[2 3]" || !r.Spec.Runs.Metadata {
		t.Fatalf("spec %+v, runs %+v", r.Spec, r.Spec.Runs)
	}
	out, res := runResolved(t, r, sweep.Options{Workers: 2})
	if res.Manifest.Rows["tasks"] != 150 || res.Manifest.Rows["checkpoints"] != 150 || res.Manifest.Rows["pairs"] != 150 || res.Errors != 1 {
		t.Fatalf("rows %v, errors %d", res.Manifest.Rows, res.Errors)
	}
	got := ducktest.Query(t, out, "SELECT fork_step, count(*), min(seed), max(seed), count(*) FILTER (WHERE run_id = 'run-' || seed) FROM {pairs} GROUP BY ALL ORDER BY ALL")
	if fmt.Sprint(got) != "[[2 50 100 149 50] [3 100 0 99 100]]" {
		t.Errorf("pairs by fork step (count, seeds, run ids): %v", got)
	}
	got = ducktest.Query(t, out, "SELECT seed, metadata FROM {tasks} WHERE metadata IS NOT NULL ORDER BY seed LIMIT 2")
	if fmt.Sprint(got) != `[[0 {"note":{"k":1},"team":"a"}] [10 {"note":{"k":1},"team":"a"}]]` {
		t.Errorf("metadata: %v", got)
	}
	got = ducktest.Query(t, out, "SELECT seed, status, error FROM {checkpoints} WHERE status <> 'ok'")
	if len(got) != 1 || got[0][0] != "7" || !strings.Contains(got[0][2], "mixed.jsonl line 8 (run run-7): features disagree with what world counter computes from its checkpoint: features.same_obs is") {
		t.Errorf("the disagreeing record: %v", got)
	}
	// The other runs are labelled as their seeds are.
	seeds := sweep.DefaultSpec()
	seeds.Seeds = sweep.Range{Start: 0, End: 100}
	seedOut := runSweep(t, seeds, sweep.Options{})
	q := "SELECT seed, label, same_obs, extra_steps FROM {pairs} WHERE fork_step = 3 AND seed <> 7 ORDER BY seed"
	if a, b := ducktest.Query(t, out, q), ducktest.Query(t, seedOut, q); fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 99 {
		t.Errorf("recorded labels differ from the seeds':\n%v\n%v", a, b)
	}
}

// A recorded sweep writes the same bytes whatever the number of workers
// and whether its units are written streamed or buffered, and an
// interrupted one, resumed, ends with the uninterrupted one's bytes.
func TestRecordedSweepResumesToTheSameBytes(t *testing.T) {
	edit := func(s *sweep.Spec) { s.UnitSeeds = 64 }
	one, _ := runResolved(t, recordedSpec(t, golden, edit), sweep.Options{Workers: 1})
	two, _ := runResolved(t, recordedSpec(t, golden, edit), sweep.Options{Workers: 2, Buffered: true})
	sameFiles(t, "workers 1 and 2 (buffered)", tableFiles(t, one), tableFiles(t, two))

	r := recordedSpec(t, golden, edit)
	dir := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(dir, false, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := 0
	_, err = sweep.Run(ctx, r, st, sweep.Options{Workers: 1, Version: "test", Progress: func(n, _ int) {
		if done += n; done >= 64 {
			cancel()
		}
	}})
	st.Release()
	if err == nil {
		t.Fatal("the interrupted sweep finished")
	}
	st, err = sweep.Stage(dir, false, true)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sweep.Run(context.Background(), recordedSpec(t, golden, edit), st, sweep.Options{Workers: 1, Version: "test"})
	if err != nil {
		st.Release()
		t.Fatal(err)
	}
	if res.Resumed == 0 {
		t.Error("no unit was kept from the interrupted sweep")
	}
	sameFiles(t, "resumed", tableFiles(t, one), tableFiles(t, dir))
}

// A scored world's recorded checkpoints (toolloop, seeds 0..39 at fork
// step 2), swept with transcripts, give the branches — score, transcript,
// noise key — and the pairs' score columns of the seed sweep: the record
// runner scores and records transcripts as the seed runner does.
func TestRecordedScoresAndTranscripts(t *testing.T) {
	def, _ := lab.Lookup("toolloop")
	params, _ := def.Declaration().Resolve(world.Params{})
	inst, err := def.Open(params, sweep.DefaultSpec().Model)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for seed := range uint64(40) {
		f, err := inst.Checkpoint(seed, 2)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&text, `{"run_id":"t%d","checkpoint":%s}`+"\n", seed, f.Checkpoint)
	}
	path := filepath.Join(t.TempDir(), "toolloop.jsonl")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, _ := runResolved(t, recordedSpecOf(t, "toolloop", path, func(s *sweep.Spec) { s.Transcripts = true }), sweep.Options{})
	spec := sweep.DefaultSpec()
	spec.World, spec.Seeds, spec.ForkAt, spec.Transcripts = "toolloop", sweep.Range{Start: 0, End: 40}, []int{2}, true
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	seeds, _ := runResolved(t, r, sweep.Options{})
	for _, q := range []string{
		"SELECT seed, arm, replica, score, transcript, noise_key FROM {branches} ORDER BY ALL",
		"SELECT seed, arm, label, score_control, score_treated, score_diff FROM {pairs} ORDER BY ALL",
	} {
		got, want := ducktest.Query(t, rec, q), ducktest.Query(t, seeds, q)
		if len(want) < 40 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the recorded sweep's rows differ from the seeds':\n%.600v\nwant\n%.600v", q, got, want)
		}
		for _, row := range got {
			for _, v := range row {
				if v == "<nil>" {
					t.Fatalf("%s: a NULL in %v", q, row)
				}
			}
		}
	}
}
