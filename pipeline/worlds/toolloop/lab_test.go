package toolloop_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// TestMain doubles as the other process of TestForkInAnotherProcess: with
// FORKLAB_TOOLLOOP_FORK set to a file of checkpoints (one JSON object a
// line) it decodes each and prints every branch's outcome (see branches).
func TestMain(m *testing.M) {
	if path := os.Getenv("FORKLAB_TOOLLOOP_FORK"); path != "" {
		if err := forkFile(path, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// models are the models the lab tests play: the greedy script, a noisy
// model, and one that departs on every turn (to a turn without a tool
// call, the only departure a one-tool model has).
var models = []fork.Model{{}, {Temperature: 0.2, NoTool: 0.5}, {Temperature: 1, NoTool: 0.5}}

// branches appends one line per arm and replica of the checkpoint c: the
// arm, replica, success, intervention and the final state's JSON.
func branches(lab fork.Lab[toolloop.State], c fork.Checkpoint[toolloop.State], out []byte) []byte {
	var final toolloop.State
	seed := lab.World.Seed(&c.State)
	for _, arm := range fork.Arms {
		for r := range 3 {
			ok, iv := lab.Branch(&final, &c.State, seed, c.ForkStep, arm, r, seed%2 == 0)
			out = fmt.Appendf(out, "%d %d %s %d %t %t ", seed, c.ForkStep, arm, r, ok, iv)
			out = append(final.AppendJSON(out), '\n')
		}
	}
	return out
}

// forkFile decodes the checkpoints in path, makes the lab each names (its
// parameters and model) and writes their branches to w.
func forkFile(path string, w *os.File) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var out []byte
	for sc.Scan() {
		c, err := fork.DecodeCheckpoint[toolloop.State](sc.Bytes(), toolloop.Declaration())
		if err != nil {
			return err
		}
		wd, err := toolloop.New(c.Params)
		if err != nil {
			return err
		}
		lab, err := fork.NewLab[toolloop.State](wd, c.Model)
		if err != nil {
			return err
		}
		if err := fork.Verify(lab, c); err != nil {
			return err
		}
		out = branches(lab, c, out)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// The same seed gives the same run: twice in memory, and from a checkpoint
// encoded to JSON and decoded in place of the state. The checkpoint
// round-trips byte for byte, and the sweep's fast encoder writes the same
// bytes as Encode.
func TestDeterminism(t *testing.T) {
	params := toolloop.Default().WorldParams()
	for _, m := range models {
		lab := newLab(t, toolloop.Default(), m)
		enc, err := fork.NewEncoder[toolloop.State](lab.Decl, params, m)
		if err != nil {
			t.Fatal(err)
		}
		enc.StateJSON((*toolloop.State).AppendJSON)
		var hist []world.Action
		for seed := range uint64(400) {
			for f := 1; f <= 8; f++ {
				c := lab.Checkpoint(seed, f, params)
				again := lab.Checkpoint(seed, f, params)
				if c.State != again.State || fmt.Sprint(c.History) != fmt.Sprint(again.History) {
					t.Fatalf("model %+v seed %d fork %d: two runs differ", m, seed, f)
				}
				b, err := c.Encode()
				if err != nil {
					t.Fatal(err)
				}
				d, err := fork.DecodeCheckpoint[toolloop.State](b, lab.Decl)
				if err != nil {
					t.Fatalf("seed %d fork %d: %v\n%s", seed, f, err, b)
				}
				b2, _ := d.Encode()
				if !bytes.Equal(b, b2) {
					t.Fatalf("seed %d fork %d: round trip changed the bytes\n%s\n%s", seed, f, b, b2)
				}
				s := lab.World.Start(seed)
				hist = hist[:0]
				lab.Advance(&s, fork.PrefixKey(seed), f, &hist)
				fast, err := enc.Append(nil, f, hist, &s)
				if err != nil || !bytes.Equal(fast, b) {
					t.Fatalf("seed %d fork %d: encoder wrote (%v)\n%s\nEncode wrote\n%s", seed, f, err, fast, b)
				}
				if got, want := branches(lab, d, nil), branches(lab, c, nil); !bytes.Equal(got, want) {
					t.Fatalf("seed %d fork %d: branches from the decoded checkpoint\n%s\nin memory\n%s", seed, f, got, want)
				}
			}
		}
	}
}

// A checkpoint written here and forked in another process (this test
// binary, run again) gives every arm and replica the same outcome and the
// same final state as a fork in memory.
func TestForkInAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.jsonl")
	var file, want []byte
	p := toolloop.Default()
	p.PFault = 0.7
	for _, m := range models {
		lab := newLab(t, p, m)
		for seed := range uint64(150) {
			for _, f := range []int{2, 5} {
				c := lab.Checkpoint(seed, f, p.WorldParams())
				b, err := c.Encode()
				if err != nil {
					t.Fatal(err)
				}
				file = append(append(file, b...), '\n')
				want = branches(lab, c, want)
			}
		}
	}
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FORKLAB_TOOLLOOP_FORK="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("the other process: %v: %s", err, stderr.String())
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d: other process\n%s\nin memory\n%s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("other process wrote %d lines, in memory %d", len(gl), len(wl))
	}
	if n := bytes.Count(want, []byte("\n")); n != 3*150*2*len(fork.Arms)*3 {
		t.Fatalf("%d branches compared", n)
	}
}

// Every arm and replica through fork.Lab: off and aa intervene never, on
// and placebo always, policy where its rule fires; the checkpoint state is
// never changed; a greedy model gives every replica the same branch, a
// noisy one does not.
func TestEveryArmAndReplica(t *testing.T) {
	for _, m := range models {
		lab := newLab(t, toolloop.Default(), m)
		differ := 0
		for seed := range uint64(1000) {
			s := lab.World.Start(seed)
			lab.Advance(&s, fork.PrefixKey(seed), 3, nil)
			before := s
			for _, arm := range fork.Arms {
				if err := lab.Supports(arm); err != nil {
					t.Fatal(err)
				}
				for _, fires := range []bool{false, true} {
					var first toolloop.State
					for r := range 4 {
						var final toolloop.State
						ok, iv := lab.Branch(&final, &s, seed, 3, arm, r, fires)
						wantIV := arm == fork.On || arm == fork.Placebo || (arm == fork.Policy && fires)
						if iv != wantIV {
							t.Fatalf("seed %d arm %s fires %t: intervened %t", seed, arm, fires, iv)
						}
						if ok != lab.World.Success(&final) || !lab.World.Over(&final) {
							t.Fatalf("seed %d arm %s: branch not finished or success misreported", seed, arm)
						}
						if wantIV && final.Steps < s.Steps+1 {
							t.Fatalf("seed %d arm %s: the intervention took no turn", seed, arm)
						}
						if s != before {
							t.Fatalf("seed %d arm %s: Branch changed the checkpoint state", seed, arm)
						}
						if r == 0 {
							first = final
						} else if final != first {
							if m.Temperature == 0 {
								t.Fatalf("seed %d arm %s: greedy replicas %d and 0 differ", seed, arm, r)
							}
							differ++
						}
					}
				}
			}
		}
		// (At temperature 1 every turn departs, and with one tool it departs
		// to a turn without a tool call, which needs no draw beyond the first.)
		if m.Temperature > 0 && m.Temperature < 1 && differ == 0 {
			t.Errorf("model %+v: no replica differed", m)
		}
	}
}

// Verify accepts real checkpoints and refuses edited ones.
func TestVerify(t *testing.T) {
	params := toolloop.Default().WorldParams()
	for _, m := range models {
		lab := newLab(t, toolloop.Default(), m)
		for seed := range uint64(300) {
			for _, f := range []int{1, 2, 4, 9} {
				if err := fork.Verify(lab, lab.Checkpoint(seed, f, params)); err != nil {
					t.Fatalf("model %+v seed %d fork %d: %v", m, seed, f, err)
				}
			}
		}
	}
	lab := newLab(t, toolloop.Default(), fork.Model{})
	// Seed 3 at fork step 4: a run still going.
	c := lab.Checkpoint(3, 4, params)
	good, _ := c.Encode()
	if lab.World.Over(&c.State) || len(c.History) != 4 {
		t.Fatalf("seed 3 fork 4 is over or short: %s", good)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"a fact made true", `"facts_true":` + strconv.Itoa(int(c.State.True)), `"facts_true":` + strconv.Itoa(int(c.State.True)+1), "its state is not the one seed 3 reaches"},
		{"tokens refunded", `"tokens":` + strconv.FormatInt(c.State.Tokens, 10), `"tokens":1`, "its state is not the one seed 3 reaches"},
		{"a fault removed", `"onset":` + strconv.Itoa(int(c.State.Onset)) + `,"stale_len":` + strconv.Itoa(int(c.State.StaleLen)),
			`"onset":0,"stale_len":0`, "its state is not the one seed 3 reaches"},
		{"another seed", `"state":{"seed":3,`, `"state":{"seed":4,`, "its state is not the one seed 4 reaches"},
		{"a turn renamed", `{"step":1,"action":"` + c.History[0].Action + `"}`, `{"step":1,"action":"ping"}`, "turn 1 of its history differs"},
		{"a later fork step", `"fork_step":4`, `"fork_step":5`, "its state is not the one seed 3 reaches at fork step 5"},
	} {
		edited := strings.Replace(string(good), tc.from, tc.to, 1)
		if edited == string(good) {
			if tc.name == "a fault removed" && c.State.Onset == 0 {
				edited = strings.Replace(string(good), `"onset":0,"stale_len":0`, `"onset":1,"stale_len":9`, 1)
			} else {
				t.Fatalf("%s: %q not in %s", tc.name, tc.from, good)
			}
		}
		d, err := fork.DecodeCheckpoint[toolloop.State]([]byte(edited), lab.Decl)
		if err != nil {
			t.Fatalf("%s: decode: %v", tc.name, err)
		}
		if err := fork.Verify(lab, d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify said %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"an unknown outcome", `"last":"` + c.State.Last.String() + `"`, `"last":"stale"`, `unknown outcome "stale"`},
		{"an unknown state field", `"correct":false`, `"correct":false,"oracle":true`, `unknown field "oracle"`},
		{"another world version", `"world_version":"2"`, `"world_version":"0"`, `world toolloop version "0"`},
		{"a parameter out of range", `"p_fault":0.4`, `"p_fault":4`, "p_fault must be a number in [0, 1], got 4"},
	} {
		edited := strings.Replace(string(good), tc.from, tc.to, 1)
		if edited == string(good) {
			t.Fatalf("%s: %q not in %s", tc.name, tc.from, good)
		}
		_, err := fork.DecodeCheckpoint[toolloop.State]([]byte(edited), lab.Decl)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decode said %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// labelCounts forks seeds [0, n) at forkAt into off and arm and counts the
// labels, and the harms on clean runs.
func labelCounts(t testing.TB, lab fork.Lab[toolloop.State], n, forkAt int, arm fork.Arm) map[string]int {
	c := map[string]int{}
	for _, r := range pairs(t, lab, n, forkAt, arm) {
		c[string(r.label)]++
		if r.label == fork.Harmed && !r.fault {
			c["clean_harmed"]++
		}
	}
	return c
}

// The placebo is not the recovery: same cost, no information. On the
// default world at fork step 2 it keeps a small fraction of on's rescues
// (the interruption: a broken run of repeats, a turn of a stale stretch
// passing) and harms about as often (the cost).
func TestPlaceboIsNotOn(t *testing.T) {
	lab := newLab(t, toolloop.Default(), fork.Model{})
	differ := 0
	var a, b toolloop.State
	for seed := range uint64(2000) {
		s := lab.World.Start(seed)
		lab.Advance(&s, fork.PrefixKey(seed), 2, nil)
		on, _ := lab.Branch(&a, &s, seed, 2, fork.On, 0, false)
		pl, _ := lab.Branch(&b, &s, seed, 2, fork.Placebo, 0, false)
		if a.Tokens-s.Tokens <= 0 || b.Steps == s.Steps {
			t.Fatalf("seed %d: an intervention cost nothing", seed)
		}
		// The intervention's own turn costs the same on both arms.
		var x, y toolloop.State = s, s
		lab.World.Step(&x, toolloop.Verify)
		lab.World.Step(&y, toolloop.Ping)
		if lab.World.Cost(&x) != lab.World.Cost(&y) {
			t.Fatalf("seed %d: verify cost %+v, ping %+v", seed, lab.World.Cost(&x), lab.World.Cost(&y))
		}
		if on != pl {
			differ++
		}
	}
	if differ < 200 {
		t.Fatalf("on and placebo differ on %d of 2,000 seeds", differ)
	}
	on, pl := labelCounts(t, lab, 20000, 2, fork.On), labelCounts(t, lab, 20000, 2, fork.Placebo)
	if pl["rescued"]*10 > on["rescued"] || pl["harmed"] < on["harmed"]/2 {
		t.Fatalf("on %v, placebo %v: want the placebo to keep under a tenth of on's rescues and harm at least half as often", on, pl)
	}
}

// A/A: off against itself. With the greedy model no pair ever flips; with
// a noisy one pairs flip both ways at a measurable rate, the noise floor a
// rescue count must beat.
func TestAA(t *testing.T) {
	greedy := labelCounts(t, newLab(t, toolloop.Default(), fork.Model{}), 20000, 2, fork.AA)
	if greedy["unchanged"] != 20000 {
		t.Fatalf("greedy A/A: %v", greedy)
	}
	noisy := labelCounts(t, newLab(t, toolloop.Default(), fork.Model{Temperature: 0.1, NoTool: 0.5}), 20000, 2, fork.AA)
	flips := noisy["rescued"] + noisy["harmed"]
	if flips < 400 || flips > 2000 || noisy["rescued"] < flips/3 || noisy["harmed"] < flips/3 {
		t.Fatalf("noisy A/A at temperature 0.1: %v: want 2%%-10%% of pairs to flip, in both directions", noisy)
	}
}

// The lab's hot path allocates nothing per step: playing a seed to its
// fork and finishing every arm, with states reused.
func TestNoAllocationPerSeed(t *testing.T) {
	for _, m := range models {
		lab := newLab(t, toolloop.Default(), m)
		var s, final toolloop.State
		hist := make([]world.Action, 0, 64)
		feats := make([]world.Value, 0, 16)
		seed := uint64(0)
		allocs := testing.AllocsPerRun(2000, func() {
			seed++
			s = lab.World.Start(seed)
			hist = hist[:0]
			lab.Advance(&s, fork.PrefixKey(seed), 2, &hist)
			feats = lab.World.Features(&s, feats[:0])
			feats = lab.World.Hidden(&s, feats)
			feats = lab.World.Task(&s, feats)
			for _, arm := range fork.Arms {
				lab.Branch(&final, &s, seed, 2, arm, 1, true)
			}
		})
		if allocs != 0 {
			t.Errorf("model %+v: %v allocations per seed", m, allocs)
		}
	}
}

// Under a noisy model the world behaves as a sloppier agent would: more
// turns without a tool call, more tokens spent, fewer successes, the more
// so the higher the temperature; and a replica plays the same every time
// (that replicas differ from each other is TestEveryArmAndReplica's).
func TestNoise(t *testing.T) {
	type stats struct {
		success        int
		tokens, noTool int64
	}
	var prev *stats
	for _, temp := range []float64{0, 0.05, 0.2, 0.5} {
		lab := newLab(t, toolloop.Default(), fork.Model{Temperature: temp, NoTool: 0.5})
		st := &stats{}
		var final toolloop.State
		for seed := range uint64(4000) {
			s := lab.World.Start(seed)
			lab.Advance(&s, fork.PrefixKey(seed), 2, nil)
			ok, _ := lab.Branch(&final, &s, seed, 2, fork.Off, 0, false)
			if ok {
				st.success++
			}
			st.tokens += final.Tokens
			st.noTool += int64(final.NoTools)
			again := final
			if ok2, _ := lab.Branch(&final, &s, seed, 2, fork.Off, 0, false); ok2 != ok || final != again {
				t.Fatalf("temperature %v seed %d: the same replica played twice differs", temp, seed)
			}
		}
		t.Logf("temperature %v: %d of 4,000 succeed, %.0f tokens and %.2f turns without a tool call a run",
			temp, st.success, float64(st.tokens)/4000, float64(st.noTool)/4000)
		if prev != nil && !(st.success < prev.success && st.tokens > prev.tokens && st.noTool > prev.noTool) {
			t.Errorf("temperature %v: %+v, no worse than the lower temperature's %+v", temp, *st, *prev)
		}
		prev = st
	}
}

// The score is the graded form of success: within the declared [0, 1],
// exactly 1 on a success (the declared threshold derives success from
// it), partial credit on a wrong or short answer, and the same on every
// arm of a run that answered before the fork (the intervention then
// changes its facts, not the answer it gave). Greedy and noisy models,
// fork steps 1 to 6.
func TestScoreIsGradedSuccess(t *testing.T) {
	d := toolloop.Declaration()
	if d.Score == nil || d.Score.Threshold == nil || *d.Score.Threshold != 1 {
		t.Fatalf("declaration score %+v: want [0, 1] with threshold 1", d.Score)
	}
	partial, overSeen := 0, 0
	for _, m := range []fork.Model{{}, {Temperature: 0.2, NoTool: 0.5}} {
		lab := newLab(t, toolloop.Default(), m)
		w := lab.World.(toolloop.World)
		var final toolloop.State
		for seed := range uint64(1500) {
			for _, at := range []int{1, 3, 6} {
				s := lab.World.Start(seed)
				lab.Advance(&s, fork.PrefixKey(seed), at, nil)
				over := lab.World.Over(&s)
				first := -1.0
				for _, arm := range []fork.Arm{fork.Off, fork.On, fork.Placebo} {
					ok, _ := lab.Branch(&final, &s, seed, at, arm, 0, false)
					x := w.Score(&final)
					if err := d.Score.Check(x); err != nil {
						t.Fatalf("seed %d fork %d %s: %v", seed, at, arm, err)
					}
					if derived, _ := d.Score.Success(x); derived != ok {
						t.Fatalf("seed %d fork %d %s: success %v but score %v", seed, at, arm, ok, x)
					}
					if x > 0 && x < 1 {
						partial++
					}
					if over && first >= 0 && x != first {
						t.Fatalf("seed %d fork %d: over at the fork, but %s scores %v, off %v", seed, at, arm, x, first)
					}
					if first < 0 {
						first = x
					}
				}
				if over && s.Answered {
					overSeen++
				}
			}
		}
	}
	if partial < 1000 || overSeen < 50 {
		t.Errorf("only %d partial scores and %d runs answered before the fork: the test does not reach what it checks", partial, overSeen)
	}
}
