package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/spf13/pflag"
)

// What a new user's first tour of forklab found (the QA report): each
// case exits 2 with the one-line message that says what to do, and writes
// no results.
func TestUserTrialRefusals(t *testing.T) {
	out := t.TempDir()
	spec := "../../testdata/specs/"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// A parameter given as a grid axis and as a single value.
		{"flag beside grid", []string{"sweep", "--spec", spec + "grid-stall.yaml", "--p-stall", "0.5"},
			"--p-stall 0.5 sets parameter p_stall, which the spec's grid varies (grid: p_stall: [0, 0.2]): drop the flag or the grid axis"},
		{"param beside grid", []string{"sweep", "--spec", spec + "grid-stall.yaml", "--param", "p_stall=0.4"},
			"--param p_stall=0.4 sets parameter p_stall, which the spec's grid varies (grid: p_stall: [0, 0.2])"},
		{"params beside grid", []string{"sweep", "--spec", spec + "grid-and-params.yaml"},
			"params: p_stall is given a single value (params: p_stall: 0.3) and is a grid axis too (grid: p_stall: [0, 0.2]): keep one of the two"},
		{"model beside grid", []string{"sweep", "--spec", spec + "grid-and-model.yaml"},
			"model: temperature is given a single value (model: temperature: 0.3) and is a grid axis too (grid: temperature: [0, 0.1])"},
		{"temperature flag beside grid", []string{"sweep", "--spec", spec + "grid-temperature.yaml", "--temperature", "0.2"},
			"--temperature sets the model's temperature, which the spec's grid varies (grid: temperature: [0, 0.1]): drop the flag or the grid axis"},
		{"repeated grid value", []string{"sweep", "--spec", spec + "grid-duplicate.yaml"},
			"grid: p_stall lists 0 twice: two configurations would be the same"},
		// One parameter set by two flags.
		{"flag then param", []string{"sweep", "--target", "7", "--param", "target=6"},
			"--target 7 and --param target=6 both set parameter target, to different values: give it once"},
		{"param then flag", []string{"sweep", "--param", "target=6", "--target", "7"},
			"--target 7 and --param target=6 both set parameter target, to different values: give it once"},
		{"param twice", []string{"sweep", "--param", "target=6", "--param", "target=5"},
			"--param target=6 and --param target=5 both set parameter target, to different values: give it once"},
		{"toolloop k_max", []string{"sweep", "--world", "toolloop", "--k-max", "6", "--param", "k_max=7"},
			"--k-max 6 and --param k_max=7 both set parameter k_max, to different values: give it once"},
		// A flag that would do nothing.
		{"sink rotate-interval without follow", []string{"log", "sink", "--rotate-interval", "5s"},
			"--rotate-interval applies with --follow: a run without it closes a batch every --rotate-records events and at its end"},
		// A budget nothing would enforce.
		{"max-cost of a built-in world", []string{"sweep", "--seeds", "0:1000", "--max-cost", "steps=50"},
			"max_cost: world counter is built in and a budget applies only to an external agent's sweep (--agent): leave max_cost (--max-cost) out"},
		{"max-cost in dollars of a built-in world", []string{"sweep", "--seeds", "0:1000", "--max-cost", "5"},
			"max_cost: world counter is built in and a budget applies only to an external agent's sweep (--agent): leave max_cost (--max-cost) out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(out, strings.ReplaceAll(tc.name, " ", "-"))
			stdout, stderr, code := run(t, append(tc.args, "--out", dir, "-q")...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 {
				t.Errorf("error is %d lines, want one: %q", n+1, stderr)
			}
			if stdout != "" {
				t.Errorf("printed %q on stdout", stdout)
			}
			if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
				t.Errorf("%s has a manifest after a refused run", dir)
			}
		})
	}
	// The same value twice is no conflict.
	dir := filepath.Join(out, "same-value")
	mustRun(t, "sweep", "--seeds", "0:10", "--target", "7", "--param", "target=7", "--out", dir, "-q")
}

// --max-cost is enforced where it is accepted — an external agent's sweep
// in one process stops having spent at most one seed's cost (27 steps of
// the seed's counter) beyond the budget, exit 6, though the agent takes
// batches — and refused where nothing would enforce it: the shares of a
// static split and the workers of a distributed sweep each spend on their
// own.
func TestMaxCostEnforcedOrRefused(t *testing.T) {
	agent := seedCore(t)
	dir := filepath.Join(t.TempDir(), "mc")
	for _, par := range []string{"1", "4"} {
		_, stderr, code := run(t, "sweep", "--agent", agent, "--parallel", par, "--seeds", "0:1000", "--max-cost", "steps=50", "--out", dir, "-q", "--overwrite")
		var got int
		if i := strings.Index(stderr, "the seeds finished so far cost "); i >= 0 {
			fmt.Sscanf(stderr[i:], "the seeds finished so far cost %d steps", &got)
		}
		if code != 6 || got < 50 || got >= 50+27 {
			t.Errorf("--parallel %s: exit %d, stopped at %d steps; want 6 and 50 to 76 steps: %s", par, code, got, stderr)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "0/2"}, "--max-cost (max_cost) is not enforced across the shares of a static split (--shard): leave it out"},
		{[]string{"--distributed", "--brokers", "127.0.0.1:9"}, "--max-cost (max_cost) is not enforced across the workers of a distributed sweep (--distributed): leave it out"},
	} {
		out := filepath.Join(t.TempDir(), "share")
		_, stderr, code := run(t, append([]string{"sweep", "--agent", agent, "--seeds", "0:1000", "--max-cost", "steps=50", "--out", out, "-q"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: the refused sweep created %s", tc.args, out)
		}
	}
}

// The shares of a split run with --overwrite over a finished sweep, then
// finalize: without --overwrite it refuses (exit 2) and leaves the
// finished sweep as it was; with --overwrite it replaces it with the
// split's sweep, which is the single-process sweep's, byte for byte. A
// resume of the shares' staging without --overwrite says what to pass.
func TestSplitOverwriteThenFinalizeReplaces(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "single")
	mustRun(t, "sweep", "--seeds", "0:5000", "--out", out, "-q")
	args := []string{"--seeds", "0:2000", "--unit-seeds", "500", "--out", out, "--overwrite", "-q"}
	for _, sh := range []string{"0/2", "1/2"} {
		mustRun(t, append([]string{"sweep", "--shard", sh}, args...)...)
	}
	_, stderr, code := run(t, "sweep", "finalize", out)
	if code != 2 || !strings.Contains(stderr, "holds a finished sweep (manifest.json); pass --overwrite to replace it") {
		t.Fatalf("finalize without --overwrite: exit %d, %q", code, stderr)
	}
	_, stderr, code = run(t, "sweep", "--seeds", "0:2000", "--unit-seeds", "500", "--out", out, "--resume", "-q")
	if code != 2 || !strings.Contains(stderr, "holds a finished sweep and units staged to replace it (a run with --overwrite): pass --overwrite") {
		t.Fatalf("resume without --overwrite: exit %d, %q", code, stderr)
	}
	if !strings.Contains(mustRun(t, "report", out), "5000 pairs") {
		t.Fatal("the refusals touched the finished sweep")
	}
	mustRun(t, "sweep", "finalize", out, "--overwrite", "-q")
	want := filepath.Join(root, "want")
	mustRun(t, "sweep", "--seeds", "0:2000", "--unit-seeds", "500", "--out", want, "-q")
	sameSweep(t, want, out, false)
	if _, err := os.Stat(filepath.Join(root, ".single.forklab-staging")); err == nil {
		t.Error("the staging directory is left after the publish")
	}
}

// A distributed agent sweep whose command names a path relative to the
// coordinator's directory: the workers get it made absolute, so a worker
// started elsewhere runs it. A worker that cannot start its agent (here
// its own --agent, a file that is not there) records a failed attempt,
// which the coordinator shows, and exits 1 without holding the queue up:
// the next worker finishes the sweep.
func TestDistributedAgentFromAnotherDirectory(t *testing.T) {
	python := pythonBin(t)
	broker := startBroker(t)
	out := filepath.Join(t.TempDir(), "out")
	coord := startProc(t, "coordinator", "sweep", "--distributed", "--brokers", broker, "--queue", "reldir", "--partitions", "2",
		"--agent", python+" ../../examples/agents/seed_core.py", "--seeds", "0:400", "--unit-seeds", "100", "--out", out)
	defer func() { coord.cmd.Process.Kill(); <-coord.done }()
	elsewhere := t.TempDir()
	worker := func(args ...string) (string, int) {
		cmd := exec.Command(forklabBin, append([]string{"worker", "--brokers", broker, "--queue", "reldir", "--parallel", "1", "--session-timeout", "6s"}, args...)...)
		cmd.Dir = elsewhere
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(b), cmd.ProcessState.ExitCode()
	}
	msg, code := worker("--agent", python+" agent-not-here.py")
	if code != 1 || !strings.Contains(msg, "cannot start its agent: agent ") || !strings.Contains(msg, "attempt is recorded as failed and reported") {
		t.Fatalf("worker without its agent: exit %d:\n%s", code, msg)
	}
	if msg, code := worker("--max-units", "4"); code != 0 {
		t.Fatalf("worker: exit %d:\n%s", code, msg)
	}
	select {
	case <-coord.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the coordinator did not finish")
	}
	stderr := coord.errb.String()
	abs := repoFile(t, "examples/agents/seed_core.py")
	if code := coord.cmd.ProcessState.ExitCode(); code != 0 ||
		!strings.Contains(stderr, "it sends them ../../examples/agents/seed_core.py as "+abs) ||
		!strings.Contains(stderr, "failed on worker ") || !strings.Contains(stderr, "could not start the agent: agent ") {
		t.Fatalf("coordinator: exit %d:\n%s", code, stderr)
	}
	if got := mustRun(t, "sql", out, "SELECT status, count(*) AS n FROM pairs GROUP BY ALL", "--format", "csv"); got != "status,n\nok,400\n" {
		t.Fatalf("pairs: %s", got)
	}
}

// absAgent makes the words of an agent command that name files here
// absolute, and leaves the rest: the command's name (looked up in PATH),
// options, quoted words, words that name nothing here.
func TestAbsAgent(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "agents"), 0o755)
	for _, f := range []string{"agents/a.py", "b.js", "python3", "with space.py"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	for _, tc := range []struct{ line, want string }{
		{"python3 agents/a.py --model small", "python3 " + dir + "/agents/a.py --model small"},
		{"node b.js", "node " + dir + "/b.js"},
		{"./agents/a.py", dir + "/agents/a.py"},
		{"python3 /opt/a.py", "python3 /opt/a.py"},
		{"python3 -m agents.a", "python3 -m agents.a"},
		{"python3 'with space.py'", "python3 'with space.py'"},
		{"python3 missing.py", "python3 missing.py"},
		{"A=1 python3 agents/a.py", "A=1 python3 " + dir + "/agents/a.py"},
	} {
		if got, _ := absAgent(tc.line, dir); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.line, got, tc.want)
		}
	}
}

// readOffsets is forklab log read --offsets: each event's offset, and the
// events.
func readOffsets(t *testing.T, url, stream string) (offsets, events []string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(mustRun(t, "log", "read", "--log", url, "--stream", stream, "--offsets")), "\n") {
		o, e, _ := strings.Cut(l, "  ")
		offsets, events = append(offsets, o), append(events, e)
	}
	return offsets, events
}

// fork --stream refuses a fork point with no run to fork — -1, after the
// incarnation, after session_start, after the outcome, now on a finished
// session — with exit 2, the same message when run again, and no child
// stream left; now on a paused session forks at its tail. The events
// agent run and fork count are those log read lists.
func TestForkPointsWithNothingToFork(t *testing.T) {
	url := startLogServe(t)
	out := mustRun(t, "agent", "run", "--log", url, "--session", "done", "--seed", "5", "-v")
	offsets, events := readOffsets(t, url, "done")
	if len(events) != 19 || !strings.Contains(out, "· 19 events (1 incarnation), epoch 0") {
		t.Fatalf("log read lists %d events; agent run -v said %q", len(events), out)
	}
	last := offsets[len(offsets)-1]
	noTurn := "no turn has been played at this offset, so there is nothing to fork; fork at an offset after step 1 (forklab log read --stream done --offsets prints each event's offset)"
	ended := "the run had already ended at this offset; nothing to fork"
	for _, tc := range []struct{ name, offset, want string }{
		{"the beginning", "-1", "done at -1 (the beginning): " + noTurn},
		{"after the incarnation", offsets[0], "done at " + offsets[0] + ": " + noTurn},
		{"after session_start", offsets[1], "done at " + offsets[1] + ": " + noTurn},
		{"after the outcome", last, "done at " + last + ": " + ended},
		{"now, finished", "now", "done at " + last + ": " + ended},
	} {
		for range 2 { // the same answer when run again
			stdout, stderr, code := run(t, "fork", "--log", url, "--stream", "done", "--offset", tc.offset, "--arm", "on")
			if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("%s: exit %d, %q %q; want 2 and %q", tc.name, code, stdout, stderr, tc.want)
			}
		}
	}
	for _, o := range append(offsets, "-1", "now") {
		if _, errs, code := run(t, "log", "read", "--log", url, "--stream", "done/fork-on-r0-"+o); code != 2 || !strings.Contains(errs, "does not exist") {
			t.Errorf("a refused fork at %s left its child stream: exit %d, %q", o, code, errs)
		}
	}
	// now on a paused session: its tail, after step 3.
	mustRun(t, "agent", "run", "--log", url, "--session", "paused", "--seed", "5", "--until", "3")
	pOffsets, _ := readOffsets(t, url, "paused")
	var got struct {
		Stream   string `json:"stream"`
		ForkStep int    `json:"fork_step"`
		Events   int    `json:"events"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "fork", "--log", url, "--stream", "paused", "--offset", "now", "--arm", "on", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	tail := pOffsets[len(pOffsets)-1]
	_, childEvents := readOffsets(t, url, "paused/fork-on-r0-"+tail)
	if got.Stream != "paused/fork-on-r0-"+tail || got.ForkStep != 3 || got.Events != len(childEvents) {
		t.Fatalf("fork --offset now: %+v; want the child at the tail %s, fork step 3, the %d events log read lists", got, tail, len(childEvents))
	}
}

// The commands that meet a 410 say which one it is: an offset of a stream
// deleted and created again since (not "older than the log retains"), a
// deleted stream kept for its forks.
func TestGoneSaysWhy(t *testing.T) {
	url := startLogServe(t)
	mustRun(t, "agent", "run", "--log", url, "--session", "g", "--seed", "5")
	offsets, _ := readOffsets(t, url, "g")
	old := offsets[4] // after turn 1
	del := func(name string) {
		req, _ := http.NewRequest("DELETE", url+"/v1/stream/"+name, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 204 {
			t.Fatalf("delete %s: %v %v", name, res, err)
		}
		res.Body.Close()
	}
	mustRun(t, "fork", "--log", url, "--stream", "g", "--offset", old, "--arm", "on")
	del("g")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"log", "read", "--stream", "g"}, "stream g was deleted (410 Gone; its data is kept only for its forks)"},
		{[]string{"agent", "run", "--session", "g"}, "stream was deleted (its data is kept for its forks) (nothing can read or continue a deleted stream; its forks keep its events and can be read)"},
		{[]string{"fork", "--stream", "g", "--offset", old, "--arm", "off"}, "nothing can read or continue a deleted stream"},
	} {
		if _, stderr, code := run(t, append(tc.args, "--log", url)...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// The fork gone too, g is created again: old is its first generation's.
	del("g/fork-on-r0-" + old)
	mustRun(t, "agent", "run", "--log", url, "--session", "g", "--seed", "6")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"log", "read", "--stream", "g", "--offset", old}, "offset " + old + " is from an earlier generation of g: the stream was deleted and created again since (410 Gone); read the new generation from -1"},
		{[]string{"fork", "--stream", "g", "--offset", old, "--arm", "on"}, "(the stream was deleted and created again since that offset: use one of the new generation, which forklab log read --offsets lists)"},
	} {
		stdout, stderr, code := run(t, append(tc.args, "--log", url)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "older than the log retains") {
			t.Errorf("%v: exit %d, %q %q; want 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// A world (an agent) that declares no parameters says so, rather than
// "(its parameters: )".
func TestNoParametersDeclared(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"param", "x=1", `--param x=1: world bare has no parameter "x" (it declares no parameters)`},
		{"p-stall", "0.1", "--p-stall is not a parameter of world bare (it declares no parameters)"},
	} {
		fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
		wf := addWorldFlags(fs)
		if err := fs.Set(tc.flag, tc.value); err != nil {
			t.Fatal(err)
		}
		spec := sweep.DefaultSpec()
		if err := wf.applyDecl(&spec, world.Declaration{Name: "bare"}, true); err == nil || err.Error() != tc.want {
			t.Errorf("--%s %s: got %v, want %q", tc.flag, tc.value, err, tc.want)
		}
	}
	if _, err := (world.Declaration{Name: "bare"}).Resolve(map[string]any{"x": 1}); err == nil || err.Error() != `world bare has no parameter "x" (it declares no parameters)` {
		t.Errorf("Resolve: %v", err)
	}
}
