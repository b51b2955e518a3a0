package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// checkRow returns the detail of check's row in agent check's table.
func checkRow(out, check string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, check+"  ") {
			return l
		}
	}
	return ""
}

// pidless drops the "(pid N)" of process names, which differ between runs.
var pidRE = regexp.MustCompile(`\(pid \d+\)`)

func pidless(s string) string { return pidRE.ReplaceAllString(s, "(pid N)") }

// sweepErrors runs a one-seed sweep of agent, no retries, and returns the
// error text of its pairs (CSV quotes undone).
func sweepErrors(t *testing.T, agent string, extra ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "x")
	_, errs, code := run(t, append([]string{"sweep", "--agent", agent, "--seeds", "0:1", "--retries", "0", "--out", out, "-q"}, extra...)...)
	if code != 5 {
		t.Fatalf("sweep of %s: exit %d, want 5 (every pair an error): %s", agent, code, errs)
	}
	rows := mustRun(t, "sql", out, "SELECT DISTINCT error FROM pairs WHERE status = 'error'", "--format", "csv")
	return strings.ReplaceAll(rows, `""`, `"`)
}

// agent check validates every reply with the code the sweep uses (issue
// 11 QA, items 1 and 13): an agent whose replies carry a wrong id, that
// writes a notification or a line that is not JSON fails the check with
// the very message a sweep writes in its error rows — the wrong id naming
// the id expected, the notification called one, the line quoted.
func TestAgentCheckRefusesWhatTheSweepRefuses(t *testing.T) {
	for _, tc := range []struct{ flags, want string }{
		{"--wrong-id --no-batch", `agent process 1 (pid N) wrote a malformed start reply: id 102 is not one of the request's (expected id 2)`},
		{"--notification", `agent process 1 (pid N) wrote a malformed start reply: a notification (no id) where a reply was expected: "{\"jsonrpc\":\"2.0\",\"method\":\"progress\",\"params\":{\"seed\":0}}"; forklab-agent/1 has no notifications: write logs to stderr`},
		{"--garbage 0", `agent process 1 (pid N) wrote a malformed start reply: the line is not JSON: "Traceback (most recent call last): seed 0"`},
	} {
		agent := faultyAgent(t, tc.flags)
		out, errs, code := run(t, "agent", "check", agent)
		row := pidless(checkRow(out, "declared values"))
		// The message, then where the agent's stderr is (its last line, or
		// its log file), as for any failure of the process.
		if code != 1 || !strings.Contains(row, "FAIL") || !strings.Contains(row, "seed 0: "+tc.want+"; ") {
			t.Errorf("%s: agent check exit %d, row %q, want FAIL with %q, then the stderr hint\n%s", tc.flags, code, row, tc.want, errs)
		}
		if got := pidless(sweepErrors(t, agent)); !strings.Contains(got, "start: "+tc.want) {
			t.Errorf("%s: the sweep's error rows\n%s\nlack %q", tc.flags, got, tc.want)
		}
	}
}

// Items 7 and 13: a nondeterministic agent's outcomes are shown with the
// declared cost fields as JSON (not a Go struct with undeclared fields);
// an agent that lingers after shutdown fails the check after the 5 s the
// protocol gives, not 30.
func TestAgentCheckMessages(t *testing.T) {
	out, _, code := run(t, "agent", "check", faultyAgent(t, "--coin"))
	row := checkRow(out, "same request, same outcome")
	if code != 1 || !regexp.MustCompile(`FAIL +seed \d+ fork step \d arm \w+ replica \d: success (true|false), cost \{"steps":\d+\}, then success (true|false), cost \{"steps":\d+\}: the same checkpoint`).MatchString(row) ||
		strings.Contains(row, "Steps:") || strings.Contains(row, "Tokens") {
		t.Errorf("coin flips: exit %d, row %q", code, row)
	}
	out, _, code = run(t, "agent", "check", faultyAgent(t, "--linger"))
	if row := checkRow(out, "shutdown"); code != 1 || !strings.Contains(row, "FAIL    answered, but had not exited 5s after shutdown and the end of its stdin") {
		t.Errorf("lingering agent: exit %d, row %q", code, row)
	}
}

// Item 8: a process that declares another world than the first is not
// dropped silently. The sweep stops with status 2 naming the field that
// differs; agent check's fresh process fails the same way.
func TestAgentInconsistentDeclaration(t *testing.T) {
	dir := t.TempDir()
	_, errs, code := run(t, "sweep", "--agent", faultyAgent(t, "--flaky-decl "+filepath.Join(dir, "n1")), "--parallel", "2",
		"--seeds", "0:200", "--out", filepath.Join(dir, "x"), "-q")
	want := `declared otherwise than agent process 1 (pid N): world.version: "1" vs "1.1"; every process of an agent must declare the same world, protocol version and capabilities`
	if code != 2 || !strings.Contains(pidless(errs), "agent process 2 (pid N) "+want) {
		t.Errorf("sweep: exit %d, want 2 naming %q:\n%s", code, want, errs)
	}
	out, _, code := run(t, "agent", "check", faultyAgent(t, "--flaky-decl "+filepath.Join(dir, "n2")))
	if row := checkRow(out, "fresh-process fork"); code != 1 || !strings.Contains(row, `FAIL    a second process declared otherwise than the first: world.version: "1" vs "1.1"`) {
		t.Errorf("check: exit %d, row %q", code, row)
	}
}

// Item 15: the pid in an error row is the agent's own — the shell execs a
// simple command line — and a compound line says whose pid it gives.
func TestAgentPidIsTheAgents(t *testing.T) {
	rows := sweepErrors(t, faultyAgent(t, "--crash 0"))
	m := regexp.MustCompile(`agent process 1 \(pid (\d+)\) exited with status 1 during start; its stderr ends "faulty_agent: crashing on seed 0 \(pid (\d+)\)"`).FindStringSubmatch(rows)
	if m == nil || m[1] != m[2] {
		t.Errorf("the error row's pid is not the agent's: %s", rows)
	}
	rows = sweepErrors(t, "cd . && "+faultyAgent(t, "--crash 0"))
	m = regexp.MustCompile(`agent process 1 \(pid (\d+) of /bin/sh running it\) exited with status 1 during start; its stderr ends "faulty_agent: crashing on seed 0 \(pid (\d+)\)"`).FindStringSubmatch(rows)
	if m == nil || m[1] == m[2] {
		t.Errorf("a compound line's error row: %s", rows)
	}
}

// Item 12: a sweep starts --parallel processes, no probe: the process that
// told forklab the declaration serves the sweep, and its stderr lands in
// agent-1.log after the header that names it.
func TestAgentNoProbeProcess(t *testing.T) {
	dir := t.TempDir()
	count, out := filepath.Join(dir, "count"), filepath.Join(dir, "x")
	mustRun(t, "sweep", "--agent", faultyAgent(t, "--count "+count), "--parallel", "1", "--seeds", "0:100", "--out", out, "-q")
	b, _ := os.ReadFile(count)
	if n := strings.Count(string(b), "initialize -\n"); n != 1 {
		t.Errorf("%d initialize requests for --parallel 1, want 1", n)
	}
	log, _ := os.ReadFile(filepath.Join(out, "agent-logs", "agent-1.log"))
	if !regexp.MustCompile(`^--- forklab: agent process 1 \(pid \d+\) started \S+: `).Match(log) || strings.Count(string(log), "--- forklab:") != 1 {
		t.Errorf("agent-1.log:\n%s", log)
	}
}

// Item 2: a checkpoint whose run is over is branched like any other, as
// the seed's reference core does: every branch reports the run's final
// success, the intervention is applied and charged (on: intervened, one
// step), the pair is unchanged — the counter's numbers, through the
// protocol. An agent whose branches of an over run disagree is refused.
func TestAgentOverCheckpoints(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x")
	mustRun(t, "sweep", "--agent", seedCore(t), "--seeds", "0:300", "--fork-at", "9", "--arms", "off,on,aa", "--out", out, "-q")
	got := mustRun(t, "sql", out, `SELECT c.over, b.arm, b.intervened, b.cost_steps, count(*) FROM branches b JOIN checkpoints c USING (config_id, seed, fork_step) GROUP BY ALL ORDER BY ALL`, "--format", "csv")
	if !strings.HasSuffix(got, "true,aa,false,0,300\ntrue,off,false,0,300\ntrue,on,true,1,300\n") {
		t.Errorf("branches of over runs:\n%s", got)
	}
	if got := mustRun(t, "sql", out, "SELECT label, count(*) FROM pairs GROUP BY ALL", "--format", "csv"); !strings.HasSuffix(got, "unchanged,600\n") {
		t.Errorf("pairs of over runs:\n%s", got)
	}
	rows := sweepErrors(t, faultyAgent(t, "--over-flip"), "--fork-at", "9")
	if !strings.Contains(rows, `success is false: the run was over at the checkpoint (start said "over": true), so every branch must report its final outcome`) {
		t.Errorf("an over run whose arms disagree: %s", rows)
	}
}

// Item 3: --param writes a list as 2,5 or [2,5] in every subcommand, with
// the same result.
func TestParamListSyntax(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mustRun(t, "sweep", "--seeds", "0:200", "--param", "slack=0,2", "--param", "freeze_at=none,1", "--out", a, "-q")
	mustRun(t, "sweep", "--seeds", "0:200", "--param", "slack=[0,2]", "--param", "freeze_at=[none, 1]", "--out", b, "-q")
	sameParquet(t, "2,5 against [2,5]", parquetFiles(t, a), parquetFiles(t, b))
	for _, p := range []string{"slack=0,2", "slack=[0,2]"} {
		if out, errs, code := run(t, "agent", "check", forklabBin+" agent serve --world counter", "--seeds", "0:4", "--param", p); code != 0 || strings.Contains(out, "FAIL") {
			t.Errorf("agent check --param %s: exit %d\n%s%s", p, code, out, errs)
		}
	}
	// A --param that does not fit the declaration is the user's input, not
	// the agent's fault: exit 2 with the error, the row naming it too
	// (agent check used to exit 1, "1 of 12 checks failed").
	for _, c := range cliCases(t, "agent-check-params.txt", 2) {
		p, want := c[0], c[1]
		out, errs, code := run(t, "agent", "check", forklabBin+" agent serve --world counter", "--seeds", "0:4", "--param", p)
		if row := checkRow(out, "declared values"); code != 2 || !strings.Contains(errs, want) || !strings.Contains(row, want) || strings.Contains(errs, "checks failed") {
			t.Errorf("--param %s: exit %d, row %q, stderr %q; want exit 2 and %q", p, code, row, errs, want)
		}
	}
}

// Item 16: the Node example reads and writes seeds above 2^53 exactly (the
// protocol document's recipe): agent check passes at the top of the seed
// range, and seed 2^53+1's checkpoint holds 2^53+1, a task of its own.
func TestAgentToolbotBigSeeds(t *testing.T) {
	bot := nodeBin(t) + " " + repoFile(t, "examples/agents/toolbot.mjs")
	if out, errs, code := run(t, "agent", "check", bot, "--seeds", "9223372036854775800:9223372036854775807"); code != 0 || strings.Contains(out, "FAIL") {
		t.Errorf("agent check near 2^63: exit %d\n%s%s", code, out, errs)
	}
	out := filepath.Join(t.TempDir(), "x")
	mustRun(t, "sweep", "--agent", bot, "--seeds", "9007199254740992:9007199254740994", "--fork-at", "1", "--out", out, "-q")
	got := mustRun(t, "sql", out, `SELECT seed, json_extract_string(checkpoint, '$.seed') AS cp FROM checkpoints ORDER BY seed`, "--format", "csv")
	if !strings.Contains(got, "9007199254740992,9007199254740992\n9007199254740993,9007199254740993\n") {
		t.Errorf("checkpoints of seeds 2^53 and 2^53+1:\n%s", got)
	}
}

// Item 4: a sweep stopped at --max-cost and resumed with the same budget
// asks nothing new and says the same, deterministic figure every time: the
// cost of the seeds finished so far.
func TestAgentMaxCostResumeMessage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x")
	args := []string{"sweep", "--agent", seedCore(t), "--parallel", "2", "--seeds", "0:1000", "--max-cost", "steps=50", "--unit-seeds", "250", "--out", out, "-q"}
	_, first, code := run(t, args...)
	if code != 6 || !strings.Contains(first, "sweep stopped at --max-cost steps=50 (steps ") {
		t.Fatalf("first run: exit %d: %s", code, first)
	}
	var msgs []string
	for range 3 {
		_, errs, code := run(t, append(args, "--resume")...)
		if code != 6 || !strings.Contains(errs, "all in earlier runs: nothing new was asked of the agent") {
			t.Fatalf("resume: exit %d: %s", code, errs)
		}
		msgs = append(msgs, errs)
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Errorf("identical resumes say different things:\n%s\n%s\n%s", msgs[0], msgs[1], msgs[2])
	}
	// The first run's figure is what the seeds it finished cost: the resumes
	// replay them and report the same.
	figure := regexp.MustCompile(`\(steps (\d+) ≥ 50\)`)
	if a, b := figure.FindStringSubmatch(first), figure.FindStringSubmatch(msgs[0]); a == nil || b == nil || a[1] != b[1] {
		t.Errorf("first run %q, resumed %q", first, msgs[0])
	}
}

// The sweep tells what the user should know of an agent, one stderr line
// each: where its stderr goes while the sweep runs (the staging directory)
// and where once published; that a nondeterministic world swept with one
// replica counts its noise, or with an even number counts each tie as a
// failure; that batches fell back to single lines.
func TestAgentSweepWarnings(t *testing.T) {
	quirky := pythonBin(t) + " " + repoFile(t, "pipeline/lab/agentproc/testdata/quirky.py")
	for _, tc := range []struct {
		name          string
		flags         []string
		want, wantNot []string
	}{
		{"nondeterministic with one replica", []string{"--agent-env", "QUIRK_NONDET=1"},
			[]string{"forklab: warning: world quirky declares itself nondeterministic, but --replicas 1 labels each pair from one branch per arm, so its noise counts as rescues and harms: sweep with --replicas 5 (or more, odd)"},
			[]string{"batch"}},
		{"nondeterministic with three replicas", []string{"--agent-env", "QUIRK_NONDET=1", "--replicas", "3"}, nil,
			[]string{"warning"}},
		{"nondeterministic with four replicas", []string{"--agent-env", "QUIRK_NONDET=1", "--replicas", "4"},
			[]string{"forklab: warning: world quirky declares itself nondeterministic, and --replicas 4 is even: a side succeeds by a strict majority, so a tie (2 of 4) counts as a failure of its arm: sweep with an odd number of replicas (5)"},
			[]string{"--replicas 1"}},
		{"batches refused", []string{"--agent-env", "QUIRK_BATCH=8", "--agent-env", "QUIRK_BATCH_NULL=1"},
			[]string{"forklab: warning: a batch of 4 start requests failed as a whole: agent process 1 (pid N) refused a batch of 4 start requests (one error response, id null): cannot read batches (code -32600); its requests were sent again one per line (each try counts against --retries); check the agent's batches with forklab agent check '" + quirky + "'"},
			[]string{"nondeterministic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "x")
			_, errs, code := run(t, append([]string{"sweep", "--agent", quirky, "--seeds", "0:4", "--fork-at", "1", "--out", out}, tc.flags...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			errs = pidless(errs)
			logs := "its stderr goes to " + filepath.Join(dir, ".x.forklab-staging", "agent-logs") + " (" + filepath.Join(out, "agent-logs") + " once the sweep is published)"
			for _, w := range append(tc.want, logs) {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(errs, w) {
					t.Errorf("stderr holds %q:\n%s", w, errs)
				}
			}
			// The report read later says what the sweep warned of the
			// replicas, under its header, in text and HTML.
			brief := mustRun(t, "report", "--brief", out)
			html := filepath.Join(dir, "r.html")
			mustRun(t, "report", out, "--html", html)
			page, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			warned := ""
			for _, w := range tc.want {
				if strings.Contains(w, "nondeterministic") {
					warned = strings.TrimPrefix(w, "forklab: warning: ")
				}
			}
			header, _, _ := strings.Cut(brief, "\n\n")
			switch {
			case warned != "" && !strings.Contains(header, "\nWARNING: "+warned):
				t.Errorf("report header lacks WARNING: %q:\n%s", warned, header)
			case warned != "" && !strings.Contains(string(page), `role="alert"><strong>WARNING: `+warned):
				t.Errorf("HTML report lacks the warning %q", warned)
			case warned == "" && (strings.Contains(brief, "WARNING") || strings.Contains(string(page), "WARNING")):
				t.Errorf("report warns:\n%s", brief)
			}
		})
	}
}

// Issue 22 item 5: an agent broken on every request stops the sweep early
// with exit 7, quoting its cause — the line it wrote on stdout, or the end
// of its stderr when it crashed on import — and nothing published; fixed,
// the same sweep with --resume finishes as one that never failed.
func TestAgentFailFast(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x")
	all := make([]string, 50)
	for i := range all {
		all[i] = fmt.Sprint(i)
	}
	args := []string{"--seeds", "0:3000", "--fork-at", "2", "--out", out, "-q"}
	_, errs, code := run(t, append([]string{"sweep", "--agent", faultyAgent(t, "--garbage "+strings.Join(all, ","))}, args...)...)
	if code != 7 || !strings.Contains(errs, "forklab: sweep stopped early: the agent is failing: ") ||
		!strings.Contains(errs, `wrote a malformed start reply: the line is not JSON: "Traceback (most recent call last): seed `) ||
		!strings.Contains(errs, "run the same sweep again with --resume") {
		t.Fatalf("a sweep of an agent that prints on stdout: exit %d, stderr %q; want 7 quoting the line", code, errs)
	}
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		t.Fatal("a sweep stopped early published its results")
	}
	crash := filepath.Join(dir, "crash.py")
	if err := os.WriteFile(crash, []byte("import langgraph_is_not_installed_here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = run(t, append([]string{"sweep", "--agent", pythonBin(t) + " " + crash}, args...)...)
	if code != 7 || !strings.Contains(errs, "the agent is failing: its first process failed before it declared its world") ||
		!strings.Contains(errs, `exited with status 1 during initialize; its stderr ends "ModuleNotFoundError: No module named 'langgraph_is_not_installed_here'"`) {
		t.Fatalf("a sweep of an agent that crashes on import: exit %d, stderr %q; want 7 quoting its stderr", code, errs)
	}
	mustRun(t, append([]string{"sweep", "--agent", seedCore(t), "--resume"}, args...)...)
	whole := filepath.Join(dir, "whole")
	mustRun(t, "sweep", "--agent", seedCore(t), "--seeds", "0:3000", "--fork-at", "2", "--out", whole, "-q")
	sameParquet(t, "resumed after failing fast against never failed", parquetFiles(t, out), parquetFiles(t, whole))
}
