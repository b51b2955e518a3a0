package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/results"
)

// forklabBin is the forklab binary built once for the tests that run it as
// a separate process, with buildTags.
var (
	forklabBin string
	buildTags  []string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "forklab-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	forklabBin = filepath.Join(dir, "forklab")
	// -trimpath: the README test's copy of the repository builds with it
	// too, and so reuses these packages from the build cache.
	args := []string{"build", "-trimpath", "-o", forklabBin}
	if len(buildTags) > 0 {
		args = append(args, "-tags="+strings.Join(buildTags, ","))
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build forklab:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs forklab with args and returns stdout, stderr and the exit status.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runIn(t, "", args...)
}

// mustRefuse runs forklab with args and fails t unless it exits 2 with
// one line on stderr that holds want: how bad input is refused.
func mustRefuse(t *testing.T, want string, args ...string) {
	t.Helper()
	_, stderr, code := run(t, args...)
	if code != 2 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("forklab %s: exit %d, %q; want 2 and one line with %q", strings.Join(args, " "), code, stderr, want)
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := run(t, args...)
	if code != 0 {
		t.Fatalf("forklab %v: exit %d: %s", args, code, errs)
	}
	return out
}

func TestBadInputExitsTwoAndWritesNothingComplete(t *testing.T) {
	finished := t.TempDir()
	mustRun(t, "sweep", "--seeds", "0:10", "--out", finished, "-q")
	unfinished := t.TempDir()
	notADir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notADir, []byte("x"), 0o644)
	cp := "../../testdata/checkpoints/"
	for _, tc := range []struct {
		name string
		args []string
		want string
		out  string // a directory that must not end up with a manifest
		long bool   // the message may span lines (DuckDB's, with the position)
	}{
		{"unknown flag", []string{"sweep", "--seedz", "0:3"}, "unknown flag: --seedz", "", false},
		{"unknown command", []string{"swep"}, `unknown command "swep" for "forklab"; did you mean sweep?`, "", false},
		{"malformed seeds", []string{"sweep", "--seeds", "0-300", "--out", unfinished + "/a"}, "--seeds: seed range \"0-300\" is malformed", unfinished + "/a", false},
		{"empty seeds", []string{"sweep", "--seeds", "300:0", "--out", unfinished + "/b"}, "is empty", unfinished + "/b", false},
		{"fork step 0", []string{"sweep", "--fork-at", "0", "--out", unfinished + "/c"}, "fork step 0 is below 1", unfinished + "/c", false},
		{"fork past budget", []string{"sweep", "--fork-at", "12", "--out", unfinished + "/d"}, "--fork-at: step 12 is past the most steps a run can take (9): no run reaches it (fork steps are integers in [1, 9] here)", unfinished + "/d", false},
		{"finished sweep", []string{"sweep", "--seeds", "0:10", "--out", finished}, "holds a finished sweep (manifest.json); pass --overwrite", "", false},
		{"out is a file", []string{"sweep", "--out", notADir}, "exists and is not a directory", "", false},
		{"unwritable out", []string{"sweep", "--out", "/proc/forklab-test-out"}, "cannot be created", "", false},
		{"truncated checkpoint", []string{"fork", "--checkpoint", cp + "truncated.json", "--arm", "on"}, "JSON ends early", "", false},
		{"malformed checkpoint", []string{"fork", "--checkpoint", cp + "malformed.json", "--arm", "on"}, "malformed JSON at byte", "", false},
		{"unknown checkpoint field", []string{"fork", "--checkpoint", cp + "unknown-field.json", "--arm", "on"}, `unknown field "modle"`, "", false},
		{"edited checkpoint state", []string{"fork", "--checkpoint", cp + "edited-value.json", "--arm", "on"}, "its state is not the one seed 0 reaches at fork step 3", "", false},
		{"edited checkpoint steps", []string{"fork", "--checkpoint", cp + "edited-steps.json", "--arm", "on"}, "its state is not the one seed 0 reaches", "", false},
		{"edited checkpoint history", []string{"fork", "--checkpoint", cp + "edited-history.json", "--arm", "on"}, "its history has 2 turns, seed 0 takes 3", "", false},
		{"missing checkpoint", []string{"fork", "--checkpoint", cp + "nope.json", "--arm", "on"}, "no such file", "", false},
		{"unknown arm", []string{"fork", "--checkpoint", cp + "seed0-fork3.json", "--arm", "maybe"}, `--arm "maybe" is unknown`, "", false},
		{"report without manifest", []string{"report", unfinished}, "has no manifest.json", "", false},
		{"report of nothing", []string{"report", unfinished + "/nope"}, "does not exist", "", false},
		{"negative cap", []string{"policy", finished, "--max-harm", "-1"}, `invalid argument "-1" for "--max-harm" flag: must be an integer in [0, 9007199254740992]`, "", false},
		{"holdout 0", []string{"policy", finished, "--holdout", "0"}, `invalid argument "0" for "--holdout" flag: must be a number in (0, 1)`, "", false},
		{"holdout 1.2", []string{"policy", finished, "--holdout", "1.2"}, `invalid argument "1.2" for "--holdout" flag: must be a number in (0, 1)`, "", false},
		{"too few pairs", []string{"policy", finished}, "too few pairs to split", "", false},
		{"policy unknown feature", []string{"sweep", "--arms", "off,policy", "--policy", "../../testdata/policy/unknown-feature.json", "--out", unfinished + "/e"}, `unknown feature "sensor_stuck"`, unfinished + "/e", false},
		{"policy unknown op", []string{"sweep", "--arms", "off,policy", "--policy", "../../testdata/policy/unknown-op.json", "--out", unfinished + "/f"}, `unknown operator "~"`, unfinished + "/f", false},
		{"policy arm without rule", []string{"sweep", "--arms", "off,policy", "--out", unfinished + "/g"}, "the policy arm needs a guard rule", unfinished + "/g", false},
		{"arms without off", []string{"sweep", "--arms", "on,placebo", "--out", unfinished + "/h"}, "has no control: include off", unfinished + "/h", false},
		{"unknown arm in sweep", []string{"sweep", "--arms", "off,maybe", "--out", unfinished + "/i"}, `unknown arm "maybe"`, unfinished + "/i", false},
		{"replicas 0", []string{"sweep", "--replicas", "0", "--out", unfinished + "/j"}, `invalid argument "0" for "--replicas" flag: must be an integer in [1, 1000]`, unfinished + "/j", false},
		{"probability", []string{"sweep", "--p-stall", "1.5", "--out", unfinished + "/k"}, "--p-stall: p_stall must be a number in [0, 1], got 1.5", unfinished + "/k", false},
		// The tests' binary also has the test-only faulty world (tags_faultworld_test.go).
		{"unknown world", []string{"sweep", "--world", "chess", "--out", unfinished + "/n"}, `unknown world "chess" (known: counter, faulty, toolloop)`, unfinished + "/n", false},
		{"unknown param", []string{"sweep", "--param", "p_stal=0.1", "--out", unfinished + "/o"}, `world counter has no parameter "p_stal" (its parameters: target, base_budget, slack, freeze_at, p_stall, p_obs_noise, p_refresh_fail)`, unfinished + "/o", false},
		{"param of another world", []string{"sweep", "--world", "toolloop", "--p-stall", "0.1", "--out", unfinished + "/p"}, "--p-stall is not a parameter of world toolloop", unfinished + "/p", false},
		{"wrap-around", []string{"sweep", "--base-budget", "2147483648", "--out", unfinished + "/q"}, "base_budget must be an integer in [1, 1048576], got 2147483648", unfinished + "/q", false},
		{"policy of another world", []string{"sweep", "--arms", "off,policy", "--policy", "../../testdata/policy/other-world.json", "--out", unfinished + "/r"}, "the rule is for world toolloop, not counter", unfinished + "/r", false},
		{"policy v1", []string{"sweep", "--arms", "off,policy", "--policy", "../../testdata/policy/v1.json", "--out", unfinished + "/s"}, "policy_version is 1, this forklab reads 2", unfinished + "/s", false},
		{"checkpoint past the budget", []string{"checkpoint", "--seed", "0", "--fork-at", "100000"}, "step 100000 is past the most steps a run can take (9)", "", false},
		{"checkpoint of another version", []string{"fork", "--checkpoint", cp + "other-version.json", "--arm", "on"}, `world counter version "1", this forklab plays version "2"`, "", false},
		{"temperature", []string{"sweep", "--temperature", "-0.1", "--out", unfinished + "/l"}, `invalid argument "-0.1" for "--temperature" flag: must be a number in [0, 1]`, unfinished + "/l", false},
		{"spec unknown key", []string{"sweep", "--spec", "../../testdata/specs/unknown-key.yaml", "--out", unfinished + "/m"}, `unknown key "temprature"`, unfinished + "/m", false},
		{"bad sql", []string{"sql", finished, "SELEC 1"}, "syntax error at or near \"SELEC\"\n\nLINE 1: SELEC 1\n        ^", "", true},
		{"unknown table", []string{"sql", finished, "SELECT * FROM pears"}, "Table with name pears does not exist", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tc.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", stderr, tc.want)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 && !tc.long {
				t.Errorf("error is %d lines, want one: %q", n+1, stderr)
			}
			if stdout != "" {
				t.Errorf("printed %q on stdout", stdout)
			}
			if tc.out != "" {
				if _, err := os.Stat(filepath.Join(tc.out, "manifest.json")); err == nil {
					t.Errorf("%s has a manifest after a failed run", tc.out)
				}
			}
		})
	}
	// A Parquet file copied into a finished sweep would double its numbers:
	// report refuses the directory.
	doctored := t.TempDir()
	mustRun(t, "sweep", "--seeds", "0:10", "--out", doctored, "-q", "--overwrite")
	part := filepath.Join(doctored, "pairs", "config_id=0", "fork_step=3", "part-000000.parquet")
	b, _ := os.ReadFile(part)
	os.WriteFile(strings.Replace(part, "000000", "000001", 1), b, 0o644)
	if _, errs, code := run(t, "report", doctored); code != 4 || !strings.Contains(errs, "part-000001.parquet is not among its files") {
		t.Errorf("report of a doctored directory: exit %d, %q", code, errs)
	}
	// The refused sweep left the finished one intact.
	if !strings.Contains(mustRun(t, "report", finished), "10 pairs") {
		t.Error("the finished sweep was damaged by a refused rerun")
	}
}

type branchKey struct {
	Seed    uint64
	Arm     string
	Replica int
}

type branchOutcome struct {
	Success bool
	Steps   int64 // the branch's cost in steps, from the fork to its end
}

// Forking from a file, in another process, gives for every seed of a sweep
// the outcome the sweep's in-memory fork gave: the seed's table and a noisy
// sweep with every arm and several replicas.
func TestForkFromFileMatchesInMemoryFork(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		arms     []string
		replicas int
	}{
		{"seed", nil, []string{"off", "on"}, 1},
		{"noisy", []string{"--arms", "off,on,placebo,aa", "--replicas", "3", "--temperature", "0.2",
			"--p-stall", "0.1", "--p-obs-noise", "0.05", "--p-refresh-fail", "0.2"}, []string{"off", "on", "placebo", "aa"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			mustRun(t, append([]string{"sweep", "--seeds", "0:300", "--out", out, "-q", "--overwrite"}, tc.args...)...)
			db, err := results.Open(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			cps, err := db.Query(context.Background(), "SELECT checkpoint FROM checkpoints ORDER BY seed")
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, r := range cps.Rows {
				lines = append(lines, r[0].(string))
			}
			if len(lines) != 300 {
				t.Fatalf("%d checkpoints", len(lines))
			}
			file := filepath.Join(t.TempDir(), "checkpoints.jsonl")
			os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
			br, err := db.Query(context.Background(), "SELECT seed, arm, replica, success, cost_steps FROM branches")
			if err != nil {
				t.Fatal(err)
			}
			want := map[branchKey]branchOutcome{}
			for _, r := range br.Rows {
				want[branchKey{uint64(r[0].(int64)), r[1].(string), int(r[2].(int32))}] =
					branchOutcome{r[3].(bool), r[4].(int64)}
			}
			compared := 0
			for _, arm := range tc.arms {
				for rep := range tc.replicas {
					stdout := mustRun(t, "fork", "--checkpoint", file, "--arm", arm, "--replica", fmt.Sprint(rep), "--json")
					for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
						var o forkOutcome
						if err := json.Unmarshal([]byte(line), &o); err != nil {
							t.Fatal(err)
						}
						k := branchKey{o.Seed, string(o.Arm), o.Replica}
						if o.JSONCost == nil || o.JSONCost.Steps == nil || o.JSONCost.Tokens != nil {
							t.Fatalf("%+v: cost %s, want the counter's one field, steps", k, line)
						}
						steps, _ := o.JSONCost.Steps.Int64()
						got := branchOutcome{o.Success, steps}
						if w, ok := want[k]; !ok || w != got {
							t.Fatalf("%+v: fork from file %+v, sweep %+v", k, got, w)
						}
						compared++
					}
				}
			}
			if compared != len(want) || compared != 300*len(tc.arms)*tc.replicas {
				t.Fatalf("compared %d outcomes, sweep has %d", compared, len(want))
			}
		})
	}
}

// One checkpoint per file, one process per branch, as a user would do it.
func TestForkSingleCheckpointFile(t *testing.T) {
	stdout := mustRun(t, "fork", "--checkpoint", "../../testdata/checkpoints/seed0-fork3.json", "--arm", "on")
	if want := "seed 0 · fork step 3 · arm on · replica 0: success (intervened; 5 steps after the fork; final observation {\"obs\":6,\"steps\":8})\n"; stdout != want {
		t.Errorf("got %q, want %q", stdout, want)
	}
	stdout = mustRun(t, "fork", "--checkpoint", "../../testdata/checkpoints/seed0-fork3.json", "--arm", "off")
	if want := "seed 0 · fork step 3 · arm off · replica 0: failure (6 steps after the fork; final observation {\"obs\":1,\"steps\":9})\n"; stdout != want {
		t.Errorf("got %q, want %q", stdout, want)
	}
}

// A checkpoint of a run that ended before the fork step is the finished
// run, as in the sweep (its row over): forklab checkpoint says so on stderr,
// where it used to print it as if the run were open at the fork. Seed 1 at
// temperature 0.5 declares at step 1; testdata/checkpoints/seed1-fork2-over.json
// is its checkpoint at step 2, byte for byte. A run open at the fork gets
// no note.
func TestCheckpointOfAnEndedRun(t *testing.T) {
	want, err := os.ReadFile("../../testdata/checkpoints/seed1-fork2-over.json")
	if err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, "checkpoint", "--seed", "1", "--fork-at", "2", "--temperature", "0.5", "--no-tool", "0.1")
	note := "forklab: note: seed 1's run ended before fork step 2: the checkpoint is the finished run (a sweep's checkpoints table marks it over); a fork of it applies the arm's intervention, and charges it, to a run that has ended, so its pair is unchanged\n"
	if code != 0 || out != string(want) || errs != note {
		t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q", code, out, want, errs, note)
	}
	out, errs, code = run(t, "checkpoint", "--seed", "0", "--fork-at", "3")
	if code != 0 || errs != "" || !strings.Contains(out, `"fork_step":3`) {
		t.Errorf("seed 0 at step 3: exit %d, stderr %q", code, errs)
	}
}

// forklab sql sees the report's questions as views, as results.duckdb does.
func TestSQLSeesReportViews(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "sweep", "--out", dir, "-q", "--overwrite")
	got := mustRun(t, "sql", dir, "SELECT arm, rescued, harmed, net FROM summary", "--format", "csv")
	if got != "arm,rescued,harmed,net\non,75,83,-8\n" {
		t.Fatalf("summary view: %q", got)
	}
	got = mustRun(t, "sql", dir, "SELECT trigger FROM policy_search WHERE chosen", "--format", "csv")
	if got != "trigger\nsame_obs = true\n" {
		t.Fatalf("policy_search view: %q", got)
	}
}
