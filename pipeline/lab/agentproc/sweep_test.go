package agentproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// journalSeeds returns the seeds the journal files under dir hold.
func journalSeeds(t testing.TB, dir string) map[uint64]bool {
	t.Helper()
	out := map[uint64]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			var s struct {
				Seed *uint64 `json:"seed"`
			}
			if json.Unmarshal([]byte(l), &s) == nil && s.Seed != nil {
				out[*s.Seed] = true
			}
		}
	}
	return out
}

// requests reads a count file: how many times each "METHOD SEED" was
// asked.
func requests(t testing.TB, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out[l]++
		}
	}
	return out
}

// An agent that crashes on some seeds, hangs on others and prints garbage
// on a third set gives a finished sweep: each failure is an error row
// naming it, the labels count only the good pairs, and the manifest says
// the numbers are incomplete. Run again without the faults and resumed,
// the sweep asks the agent for the failed seeds only and ends with the
// files of a sweep that never failed.
func TestFaultsAreErrorRowsAndResumeCompletes(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 200}
	spec.UnitSeeds = 64
	clean, _, err := sweepWith(t, spec, nil, "", false, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(t.TempDir(), "count")
	bad := openAgent(t, agent("counter", "crash=7,hang=13,garbage=21,count="+count), 2, 300*time.Millisecond, 1)
	out, res, err := sweepWith(t, spec, bad, "", false, sweep.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if res.Errors != 12 || m.Errors != 12 || m.Rows["pairs"] != 200 || m.ErrorRate != 0.06 || m.MaxErrorRate != 0.01 || !m.Incomplete {
		t.Fatalf("errors %d, manifest: %d of %d pairs, rate %v of %v, incomplete %t; want 12 of 200, incomplete", res.Errors, m.Errors, m.Rows["pairs"], m.ErrorRate, m.MaxErrorRate, m.Incomplete)
	}
	got := ducktest.Query(t, out, `SELECT seed % 50 AS fault, count(*), count(label),
		count(*) FILTER (WHERE error LIKE '%exited with status 3 during start%'),
		count(*) FILTER (WHERE error LIKE '%timed out after 600ms waiting for the branch reply%' AND error LIKE '%hanging on seed%'),
		count(*) FILTER (WHERE error LIKE '%malformed start reply: the line is not JSON: "Traceback%'),
		count(*) FILTER (WHERE error LIKE '%(2 attempts)%')
		FROM {pairs} WHERE status = 'error' GROUP BY ALL ORDER BY fault`)
	want := "[[7 4 0 4 0 0 4] [13 4 0 0 4 0 4] [21 4 0 0 0 4 4]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("error pairs by fault: %v, want %s", got, want)
	}
	if got := ducktest.Query(t, out, "SELECT count(label), count(*) FILTER (WHERE status = 'ok') FROM {pairs}"); fmt.Sprint(got) != "[[188 188]]" {
		t.Fatalf("labelled pairs: %v, want the 188 good ones", got)
	}

	// The fault fixed, resumed: only the failed seeds are asked again.
	first := requests(t, count)
	os.Remove(count)
	good := openAgent(t, agent("counter", "count="+count), 2, 10*time.Second, 1)
	_, res, err = sweepWith(t, spec, good, out, true, sweep.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Manifest.Errors != 0 || res.Manifest.Incomplete || res.Resumed != 1 {
		t.Fatalf("resumed: %d errors, incomplete %t, %d units kept; want 0 errors and unit 3 (seeds 192:200, no faults) kept", res.Errors, res.Manifest.Incomplete, res.Resumed)
	}
	again := requests(t, count)
	var asked []string
	for k := range again {
		var seed int
		fmt.Sscanf(strings.Fields(k)[1], "%d", &seed)
		if f := seed % 50; f != 7 && f != 13 && f != 21 {
			t.Errorf("resumed sweep asked %q again (asked %d times before), though it had finished", k, first[k])
		}
		asked = append(asked, k)
	}
	if len(asked) == 0 {
		t.Fatal("the resumed sweep asked nothing")
	}
	sameFiles(t, "resumed against never failed", tableFiles(t, clean), tableFiles(t, out))
	if _, err := os.Stat(filepath.Join(out, ".forklab-units")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a complete sweep kept its ledger: %v", err)
	}
}

// A sweep cancelled midway (as ^C or a kill leaves it) and resumed asks the
// agent for no seed it had finished: the journal keeps each seed as it
// completes, not each unit.
func TestInterruptedSweepPaysNoSeedTwice(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 400}
	want, _, err := sweepWith(t, spec, nil, "", false, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(t.TempDir(), "count")
	def := openAgent(t, agent("counter", "count="+count), 2, 10*time.Second, 1)
	r, err := spec.ResolveWith(def)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	def.SetJournal(st.JournalDir())
	ctx, cancel := context.WithCancel(context.Background())
	seen := 0
	_, err = sweep.Run(ctx, r, st, sweep.Options{Workers: 1, Progress: func(n, _ int) {
		if seen += n; seen >= 150 {
			cancel()
		}
	}})
	st.Release()
	if err == nil {
		t.Fatal("the sweep finished though cancelled")
	}
	// The seeds the journal holds are those whose results forklab had
	// received: none of them may be asked for again.
	journaled := journalSeeds(t, st.JournalDir())
	if len(journaled) < 150 {
		t.Fatalf("%d seeds journaled before the interruption, want at least the 150 emitted", len(journaled))
	}
	os.Remove(count)
	_, res, err := sweepWith(t, spec, def, out, true, sweep.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 0 {
		t.Fatalf("kept %d units of one unfinished unit", res.Resumed)
	}
	second := requests(t, count)
	for k := range second {
		var seed uint64
		fmt.Sscanf(strings.Fields(k)[1], "%d", &seed)
		if journaled[seed] {
			t.Errorf("%s: seed %d was finished before the interruption and asked again", k, seed)
		}
	}
	if len(second) == 0 || len(journaled)+len(second)/2 < 400 {
		t.Fatalf("%d seeds journaled, %d requests after; want every seed played", len(journaled), len(second))
	}
	sameFiles(t, "resumed against uninterrupted", tableFiles(t, want), tableFiles(t, out))
}

// sweepStopped sweeps spec with the test agent serving the counter with
// faults, --parallel 2, stopping the definition (as a budget reached does)
// once 10 seeds are in: the runner has the seeds of four batch lines in
// flight (two per process) and starts no fifth. It returns the output
// directory, unpublished, and the definition.
func sweepStopped(t *testing.T, spec sweep.Spec, faults string) (string, *agentproc.Definition) {
	t.Helper()
	def := openAgent(t, agent("counter", faults), 2, 10*time.Second, 1)
	seen := 0
	out, _, err := sweepWith(t, spec, def, "", false, sweep.Options{Workers: 1, Progress: func(n, _ int) {
		if seen += n; seen >= 10 {
			def.Stop()
		}
	}})
	if !errors.Is(err, agentproc.ErrStopped) {
		t.Fatalf("got %v, want ErrStopped", err)
	}
	return out, def
}

// A budget reached stops the sweep cleanly: the seeds in progress finish
// and are journaled, Run returns ErrStopped without publishing, and the
// resumed sweep completes with the same files and no seed asked twice.
func TestStopAtBudgetIsResumable(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 300}
	want, _, err := sweepWith(t, spec, nil, "", false, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(t.TempDir(), "count")
	out, def := sweepStopped(t, spec, "count="+count)
	if _, err := os.Stat(filepath.Join(out, sweep.ManifestName)); err == nil {
		t.Fatal("a stopped sweep published its results")
	}
	spent, _ := def.Spent()
	first := requests(t, count)
	os.Remove(count)
	again := openAgent(t, agent("counter", "count="+count), 2, 10*time.Second, 1)
	_, _, err = sweepWith(t, spec, again, out, true, sweep.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	second := requests(t, count)
	for k := range second {
		if first[k] > 0 {
			t.Errorf("%s was asked again after the stop", k)
		}
	}
	if len(first) != 2*256 || len(second) != 2*44 {
		t.Errorf("%d requests before the stop, %d after; want the 256 seeds in flight finished, then the other 44", len(first), len(second))
	}
	_, replayed := again.Spent()
	if spent.Steps == 0 || replayed.Steps == 0 {
		t.Errorf("spent %+v before the stop, replayed %+v after", spent, replayed)
	}
	sameFiles(t, "resumed after the budget against uninterrupted", tableFiles(t, want), tableFiles(t, out))
}

// Every branch an agent is asked in a sweep carries the sweep's id (its
// manifest's sweep_id) and the branch's identity,
// <sweep_id>/<seed>/<fork_step>/<arm>/<replica>; a sweep stopped and
// resumed keeps its id, so the branches asked before the stop name the
// sweep that is published.
func TestBranchIdentity(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 300}
	spec.ForkAt = []int{2, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.AA}
	spec.Replicas = 2
	ids := filepath.Join(t.TempDir(), "ids")
	out, _ := sweepStopped(t, spec, "ids="+ids)
	again := openAgent(t, agent("counter", "ids="+ids), 2, 10*time.Second, 1)
	_, res, err := sweepWith(t, spec, again, out, true, sweep.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	sweepID := res.Manifest.SweepID
	b, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sid, bid, _ := strings.Cut(l, " ")
		if sid != sweepID || !strings.HasPrefix(bid, sweepID+"/") {
			t.Fatalf("branch asked with sweep_id %q, branch_id %q; the manifest's sweep_id is %q", sid, bid, sweepID)
		}
		asked[strings.TrimPrefix(bid, sweepID+"/")]++
	}
	for seed := range 300 {
		for _, step := range spec.ForkAt {
			for _, arm := range spec.Arms {
				for rep := range 2 {
					if id := fmt.Sprintf("%d/%d/%s/%d", seed, step, arm, rep); asked[id] != 1 {
						t.Fatalf("branch %s asked %d times, want once (the stopped sweep's seeds are journaled)", id, asked[id])
					}
				}
			}
		}
	}
	if len(asked) != 300*2*3*2 {
		t.Fatalf("%d distinct branches asked, want %d", len(asked), 300*2*3*2)
	}
}

// An agent that writes a stray line on stdout before every start reply
// fails every attempt: with fail-fast on, the sweep stops after its first
// 20 attempts (not after every seed's retries), quoting the line and the
// rule, and publishes nothing; fixed and resumed, it ends with the files
// of a sweep that never failed. The seeds it finished before the failure
// are kept (here none).
func TestFailFastStopsAFailingAgent(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 3000}
	want, _, err := sweepWith(t, spec, nil, "", false, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := agentproc.Open(context.Background(), agentproc.Config{Command: agent("counter", "stray=1"), Parallel: 2, Timeout: 10 * time.Second,
		Retries: 2, Backoff: 10 * time.Millisecond, FailFast: &agentproc.FailFast{MaxRate: agentproc.DefaultFailOnError}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	out, _, err := sweepWith(t, spec, bad, "", false, sweep.Options{Workers: 2})
	var fe *agentproc.FailingError
	if !errors.As(err, &fe) || !errors.Is(err, agentproc.ErrFailing) || fe.Rule != "its first 20 attempts failed, none succeeded" ||
		!strings.Contains(fe.Last, `wrote a malformed start reply: the line is not JSON: "loading model... done"`) {
		t.Fatalf("got %v, want the sweep stopped after 20 failed attempts, quoting the stray line", err)
	}
	if !errors.Is(bad.Failing(), agentproc.ErrFailing) {
		t.Fatalf("Failing() = %v", bad.Failing())
	}
	if n := bad.Pool().Stats().Processes; n > 25 {
		t.Errorf("%d processes started; the sweep should have stopped at about 20 failed attempts", n)
	}
	if _, err := os.Stat(filepath.Join(out, sweep.ManifestName)); err == nil {
		t.Fatal("a sweep stopped by fail-fast published its results")
	}
	good := openAgent(t, agent("counter", ""), 2, 10*time.Second, 1)
	_, res, err := sweepWith(t, spec, good, out, true, sweep.Options{Workers: 2})
	if err != nil || res.Errors != 0 {
		t.Fatalf("resumed: %v, %d errors", err, res.Errors)
	}
	sameFiles(t, "resumed after fail-fast against never failed", tableFiles(t, want), tableFiles(t, out))
}

// A process's start-up is paid once: a sweep of a sound agent starts each
// of its --parallel processes once and restarts none, and starts no more
// than the work keeps busy at once — a sweep of one seed asks the process
// that told the declaration, whatever --parallel is.
func TestProcessesStartOnce(t *testing.T) {
	spec := sweep.DefaultSpec()
	for _, tc := range []struct {
		seeds     uint64
		processes int64
	}{{1, 1}, {3000, 3}} {
		spec.Seeds = sweep.Range{Start: 0, End: tc.seeds}
		def := openAgent(t, agent("counter", ""), 3, 10*time.Second, 1)
		if _, _, err := sweepWith(t, spec, def, "", false, sweep.Options{Workers: 3}); err != nil {
			t.Fatal(err)
		}
		if st := def.Pool().Stats(); st.Processes != tc.processes || st.Retries != 0 {
			t.Errorf("%d seeds, --parallel 3: %d processes started, %d retries; want %d, none", tc.seeds, st.Processes, st.Retries, tc.processes)
		}
	}
}
