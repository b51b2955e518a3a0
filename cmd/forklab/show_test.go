package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// forklab show refuses a pair the sweep does not hold, and an output it
// must not write, with one line naming what is wrong and exit 2, writing
// nothing (testdata/cli/show-bad-input.txt).
func TestShowBadInput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:30", "--fork-at", "2,3", "--arms", "off,on,placebo", "--out", dir, "-q")
	outDir := t.TempDir()
	existing := filepath.Join(outDir, "existing.html")
	os.WriteFile(existing, []byte("mine"), 0o644)
	before, beforeOut := tree(t, dir), tree(t, outDir)
	for _, c := range cliCases(t, "show-bad-input.txt", 3) {
		r := strings.NewReplacer("DIR", dir, "OUT", outDir, "EXISTING", existing)
		args := append([]string{"show", dir}, strings.Fields(r.Replace(c[0]))...)
		want := r.Replace(c[2])
		_, stderr, code := run(t, args...)
		if strconv.Itoa(code) != c[1] || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("forklab %s: exit %d, %q; want %s and one line with %q", strings.Join(args, " "), code, stderr, c[1], want)
		}
		if after := tree(t, dir); !slices.Equal(before, after) {
			t.Fatalf("forklab %s changed %s:\n%v\nnow\n%v", strings.Join(args, " "), dir, before, after)
		}
		if after := tree(t, outDir); !slices.Equal(beforeOut, after) {
			t.Fatalf("forklab %s wrote into %s: %v", strings.Join(args, " "), outDir, after)
		}
	}
}

// forklab show prints the golden view of seed 5 (rescued) of the seed's
// experiment, by --seed or --run-id, the sweep's only fork step and arm
// filled in; --html writes the same pair as a page, registered as derived
// from the sweep when it lies in its directory.
func TestShowPrintsThePair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", dir, "-q")
	want, err := os.ReadFile("../../testdata/show/counter-seed5.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--seed", "5"}, {"--run-id", "5", "--fork-step", "3", "--arm", "on"}} {
		if got := mustRun(t, append([]string{"show", dir}, args...)...); got != string(want) {
			t.Errorf("forklab show %s %v:\n%s\nwant:\n%s", dir, args, got, want)
		}
	}
	page := filepath.Join(dir, "seed5.html")
	out, stderr, code := run(t, "show", dir, "--seed", "5", "--html", page)
	if code != 0 || out != string(want) || !strings.Contains(stderr, "wrote "+page) {
		t.Fatalf("show --html: exit %d, stderr %q", code, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, s := range []string{"<title>forklab show · seed 5 · fork step 3 · on vs off · replica 0</title>", "rescued (persuadable): off failed, on succeeded",
		`<tr class="pv-part" title="the branches part here"><td>4</td>`, `<span class="pv-action">refresh</span> <span class="pv-iv">intervention</span>`,
		"<td>failed · cost steps 5</td><td>succeeded · cost steps 5</td>"} {
		if !strings.Contains(html, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	if strings.Contains(html, "http") || strings.Contains(html, "<script") {
		t.Errorf("the page is not self-contained")
	}
	if d, _ := os.ReadFile(filepath.Join(dir, ".forklab-derived")); !strings.Contains(string(d), "seed5.html") {
		t.Errorf(".forklab-derived does not list seed5.html: %q", d)
	}
	// Again without --overwrite: refused, the page kept.
	mustRefuse(t, "already exists; pass --overwrite", "show", dir, "--seed", "5", "--html", page)
}

// An agent's transcripts are what forklab show prints (the counter served
// over forklab-agent/1 with agent serve --transcripts: the golden view,
// read from the table, not replayed); an agent that sends none gets its
// outcomes and a note saying why there are no steps.
func TestShowAgentTranscripts(t *testing.T) {
	want, err := os.ReadFile("../../testdata/show/counter-seed5.txt")
	if err != nil {
		t.Fatal(err)
	}
	replayed := "Steps replayed from the checkpoint: the sweep kept no transcripts (forklab sweep --transcripts keeps them), and a built-in world replays its branches exactly.\n"
	if !strings.Contains(string(want), replayed) {
		t.Fatalf("the golden view does not say it was replayed")
	}
	kept := filepath.Join(t.TempDir(), "kept")
	mustRun(t, "sweep", "--agent", forklabBin+" agent serve --world counter --transcripts", "--seeds", "0:20", "--out", kept, "-q")
	if got := mustRun(t, "show", kept, "--seed", "5"); got != strings.Replace(string(want), replayed, "", 1) {
		t.Errorf("forklab show of an agent's transcripts:\n%s\nwant the golden view, read:\n%s", got, want)
	}
	none := filepath.Join(t.TempDir(), "none")
	mustRun(t, "sweep", "--agent", forklabBin+" agent serve --world counter", "--seeds", "0:20", "--out", none, "-q")
	got := mustRun(t, "show", none, "--seed", "5")
	for _, s := range []string{"pair: rescued (persuadable): off failed, on succeeded", "  end   failed · cost steps 5  succeeded · cost steps 5",
		"the agent sent no transcript of the off and on branches; forklab cannot play an external agent's branch again by itself"} {
		if !strings.Contains(got, s) {
			t.Errorf("forklab show of an agent without transcripts lacks %q:\n%s", s, got)
		}
	}
}

// sweep --transcripts keeps a built-in world's steps, which forklab show
// then reads rather than replays (the same view), and it is refused where
// it means nothing: with --from-log, whose sessions hold every
// step, and with an agent, whose transcripts are kept whenever it sends them.
func TestSweepTranscripts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--transcripts", "--out", dir, "-q")
	want, err := os.ReadFile("../../testdata/show/counter-seed5.txt")
	if err != nil {
		t.Fatal(err)
	}
	replayed := "Steps replayed from the checkpoint: the sweep kept no transcripts (forklab sweep --transcripts keeps them), and a built-in world replays its branches exactly.\n"
	if got := mustRun(t, "show", dir, "--seed", "5"); got != strings.Replace(string(want), replayed, "", 1) {
		t.Errorf("show of a sweep with transcripts:\n%s", got)
	}
	if got := mustRun(t, "sql", dir, "SELECT count(*) AS n FROM branches WHERE transcript IS NOT NULL", "--format", "csv"); got != "n\n600\n" {
		t.Errorf("branches with a transcript: %q", got)
	}
	mustRefuse(t, "--transcripts (spec key transcripts) and --from-log exclude each other", "sweep", "--transcripts", "--from-log", "http://127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "o"))
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	os.WriteFile(spec, []byte("seeds: 0:10\ntranscripts: true\n"), 0o644)
	mustRefuse(t, "--transcripts (spec key transcripts) and --from-log exclude each other", "sweep", "--spec", spec, "--from-log", "http://127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "o"))
	mustRefuse(t, "transcripts: records a built-in world's steps; an external agent's transcripts are kept whenever it sends them",
		"sweep", "--transcripts", "--agent", forklabBin+" agent serve --world counter", "--out", filepath.Join(t.TempDir(), "o"))
}

// forklab show DIR --run-id ID shows a recorded run's pair (issue 24 item
// 1, issue 23): the 300 recorded checkpoints of seeds 0..299 give run r5
// the view seed 5 has in the seed sweep, under the run's name; a thread of
// an agent's store, without a seed, is found by its id; a run the sweep
// lacks, and --seed on a recorded population, are exit 2 naming what to
// give. The HTML report of a recorded sweep links each slice's example
// pairs to views it holds.
func TestShowRecordedRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	mustRun(t, "sweep", "--runs", goldenRuns, "--out", dir, "-q")
	want, err := os.ReadFile("../../testdata/show/counter-seed5.txt")
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(want), "\n")
	first = strings.Replace(first, "seed 5 ·", "run r5 (seed 5) ·", 1)
	if got := mustRun(t, "show", dir, "--run-id", "r5", "--fork-step", "3", "--arm", "on"); got != first+"\n"+rest {
		t.Errorf("forklab show --run-id r5:\n%s\nwant:\n%s", got, first+"\n"+rest)
	}
	for _, c := range []struct{ args, want string }{
		{"--run-id nope", `run id "nope" is not in the sweep: its runs are the 300 recorded runs of`},
		{"--run-id 5", `run id "5" is not in the sweep`},
		{"--seed 5", "the sweep's runs are recorded (300 runs of"},
	} {
		_, stderr, code := run(t, append([]string{"show", dir}, strings.Fields(c.args)...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("forklab show %s: exit %d, %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	page := filepath.Join(t.TempDir(), "report.html")
	mustRun(t, "report", dir, "--html", page)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	links := regexp.MustCompile(`href="#(pair-[^"]+)"`).FindAllStringSubmatch(html, -1)
	if len(links) < 4 {
		t.Fatalf("the report links %d example pairs, want several", len(links))
	}
	for _, l := range links {
		if !strings.Contains(html, `id="`+l[1]+`"`) {
			t.Errorf("the report links #%s and holds no view of that id", l[1])
		}
	}

	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	threads := filepath.Join(t.TempDir(), "threads")
	mustRun(t, "sweep", "--agent", "python3 ../../testdata/agents/recorded_agent.py", "--runs", "agent:", "--fork-at", "2", "--out", threads, "-q")
	got := mustRun(t, "show", threads, "--run-id", "thread-a")
	if !strings.HasPrefix(got, "run thread-a · fork step 2 · on vs off · replica 0\n") || !strings.Contains(got, "pair: rescued") {
		t.Errorf("forklab show --run-id thread-a:\n%s", got)
	}
}
