package fork_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// goldenSeed is testdata/seed/golden.json, written by gen_golden.py from the
// seed's reference core.
type goldenSeed struct {
	PerSeed map[string][]string `json:"per_seed"`
	Tables  []struct {
		Start, Seeds int
		ForkAt       int    `json:"fork_at"`
		Policy       string `json:"policy"`
		Table        struct {
			Total     map[string]int            `json:"total"`
			Net       int                       `json:"net"`
			BySameObs map[string]map[string]int `json:"by_same_obs"`
		} `json:"table"`
	} `json:"tables"`
}

func loadSeedGolden(t *testing.T) goldenSeed {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/seed/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenSeed
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.PerSeed) != 10 || len(g.Tables) < 10 {
		t.Fatalf("golden file incomplete: %d fork steps, %d tables", len(g.PerSeed), len(g.Tables))
	}
	return g
}

func seedLab() fork.Lab[counter.State] {
	return labOf(counter.Default(), fork.Model{})
}

func labOf(p counter.Params, m fork.Model) fork.Lab[counter.State] {
	l, err := fork.NewLab[counter.State](counter.World{P: p}, m)
	if err != nil {
		panic(err)
	}
	return l
}

// refLabel maps our labels to the reference core's words.
var refLabel = map[fork.Label]string{fork.Rescued: "rescue", fork.Harmed: "harm", fork.Unchanged: "unchanged"}

// pair is the reference core's pair(seed, fork_at) through the Lab, with the
// same_obs guard when guarded is set.
func pair(l fork.Lab[counter.State], seed uint64, forkAt int, guarded bool) (counter.State, bool, fork.Label) {
	s := l.World.Start(seed)
	l.Advance(&s, fork.PrefixKey(seed), forkAt, nil)
	feat := s.SameObs
	arm := fork.On
	if guarded {
		arm = fork.Policy
	}
	var final counter.State
	off, _ := l.Branch(&final, &s, seed, forkAt, fork.Off, 0, false)
	on, _ := l.Branch(&final, &s, seed, forkAt, arm, 0, feat)
	label, _ := fork.Classify(off, on)
	return l.World.Start(seed), feat, label
}

func TestPerSeedMatchesReferenceCore(t *testing.T) {
	g := loadSeedGolden(t)
	l := seedLab()
	for f := 1; f <= 10; f++ {
		for seed, want := range g.PerSeed[strconv.Itoa(f)] {
			task, feat, label := pair(l, uint64(seed), f, false)
			freeze := ""
			if task.FreezeAt != 0 {
				freeze = strconv.Itoa(int(task.FreezeAt))
			}
			got := fmt.Sprintf("%d,%s,%t,%s", task.Budget, freeze, feat, refLabel[label])
			if got != want {
				t.Fatalf("seed %d fork %d: got %s, reference core %s", seed, f, got, want)
			}
		}
	}
}

func TestTablesMatchReferenceCore(t *testing.T) {
	g := loadSeedGolden(t)
	l := seedLab()
	for _, tc := range g.Tables {
		name := fmt.Sprintf("seeds %d..%d fork %d policy %q", tc.Start, tc.Start+tc.Seeds-1, tc.ForkAt, tc.Policy)
		total := map[string]int{}
		by := map[string]map[string]int{}
		for seed := tc.Start; seed < tc.Start+tc.Seeds; seed++ {
			_, feat, label := pair(l, uint64(seed), tc.ForkAt, tc.Policy == "same_obs")
			total[refLabel[label]]++
			k := strconv.FormatBool(feat)
			if by[k] == nil {
				by[k] = map[string]int{}
			}
			by[k][refLabel[label]]++
		}
		if fmt.Sprint(total) != fmt.Sprint(tc.Table.Total) || fmt.Sprint(by) != fmt.Sprint(tc.Table.BySameObs) {
			t.Errorf("%s: got %v %v, reference core %v %v", name, total, by, tc.Table.Total, tc.Table.BySameObs)
		}
		if net := total["rescue"] - total["harm"]; net != tc.Table.Net {
			t.Errorf("%s: net %d, reference core %d", name, net, tc.Table.Net)
		}
	}
}

// The seed's table, pinned literally as well as through the golden file.
func TestSeedTable(t *testing.T) {
	l := seedLab()
	count := map[string]int{}
	for seed := uint64(0); seed < 300; seed++ {
		_, feat, label := pair(l, seed, 3, false)
		count[string(label)]++
		count[fmt.Sprintf("%t/%s", feat, label)]++
	}
	want := map[string]int{"rescued": 75, "harmed": 83, "unchanged": 142,
		"false/harmed": 83, "false/unchanged": 72, "true/rescued": 75, "true/unchanged": 70}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("got %v, want the seed's %v", count, want)
	}
}

func TestCheckpointRoundTripsByteForByte(t *testing.T) {
	l := seedLab()
	p := counter.Default().WorldParams()
	for seed := uint64(0); seed < 300; seed++ {
		c := l.Checkpoint(seed, 3, p)
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		d, err := fork.DecodeCheckpoint[counter.State](b, l.Decl)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b2, _ := d.Encode()
		if string(b) != string(b2) {
			t.Fatalf("seed %d: round trip changed the bytes:\n%s\n%s", seed, b, b2)
		}
		if err := fork.Verify(l, d); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// Forking the decoded copy gives the in-memory fork's outcomes.
		for _, arm := range []fork.Arm{fork.Off, fork.On} {
			var f1, f2 counter.State
			want, _ := l.Branch(&f1, &c.State, seed, 3, arm, 0, false)
			got, _ := l.Branch(&f2, &d.State, seed, 3, arm, 0, false)
			if got != want || f1 != f2 {
				t.Fatalf("seed %d arm %s: decoded fork %t, in-memory fork %t", seed, arm, got, want)
			}
		}
	}
}

func TestDecodeCheckpointRejectsBadInput(t *testing.T) {
	l := seedLab()
	good, _ := l.Checkpoint(5, 3, counter.Default().WorldParams()).Encode()
	edited := strings.Replace(string(good), `"obs":0`, `"obs":2`, 1)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"truncated", string(good[:len(good)/2]), "ends early"},
		{"malformed", `{"checkpoint_version":2,,}`, "malformed JSON at byte"},
		{"unknown field", strings.Replace(string(good), `"world"`, `"wurld"`, 1), "unknown field"},
		{"wrong type", strings.Replace(string(good), `"fork_step":3`, `"fork_step":"3"`, 1), `field "fork_step" has the wrong type`},
		{"version", strings.Replace(string(good), `"checkpoint_version":2`, `"checkpoint_version":7`, 1), "checkpoint_version 7"},
		{"world", strings.Replace(string(good), `"world":"counter"`, `"world":"maze"`, 1), `world "maze"`},
		{"world version", strings.Replace(string(good), `"world_version":"2"`, `"world_version":"1"`, 1), `world counter version "1", this forklab plays version "2"`},
		{"param", strings.Replace(string(good), `"p_stall":0`, `"p_stall":3`, 1), "p_stall must be a number in [0, 1], got 3"},
		{"unknown param", strings.Replace(string(good), `"p_stall":0`, `"p_stal":0`, 1), `no parameter "p_stal"`},
		{"trailing", string(good) + `{}`, "trailing data"},
		{"fork step", strings.Replace(string(good), `"fork_step":3`, `"fork_step":0`, 1), "fork_step 0 is below 1"},
	} {
		_, err := fork.DecodeCheckpoint[counter.State]([]byte(tc.in), l.Decl)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if edited == string(good) {
		t.Fatal("the edit did not apply")
	}
	c, err := fork.DecodeCheckpoint[counter.State]([]byte(edited), l.Decl)
	if err != nil {
		t.Fatal(err)
	}
	if err := fork.Verify(l, c); err == nil || !strings.Contains(err.Error(), "is not the one seed 5 reaches") {
		t.Fatalf("an edited state verified: %v", err)
	}
}

// The sweep's fast encoder writes exactly what Checkpoint.Encode writes,
// including for noisy models and imperfect worlds whose states use every
// field.
func TestEncoderMatchesEncode(t *testing.T) {
	p := counter.Default()
	p.PStall, p.PObsNoise, p.PRefreshFail = 0.2, 0.1, 0.3
	for _, tc := range []struct {
		p counter.Params
		m fork.Model
	}{{counter.Default(), fork.Model{}}, {p, fork.Model{Temperature: 0.25, NoTool: 0.5}}} {
		l := labOf(tc.p, tc.m)
		wp := tc.p.WorldParams()
		for _, fast := range []bool{false, true} {
			enc, err := fork.NewEncoder[counter.State](l.Decl, wp, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if fast {
				enc.StateJSON((*counter.State).AppendJSON)
			}
			for seed := uint64(0); seed < 500; seed++ {
				var hist []world.Action
				s := l.World.Start(seed)
				for f := 1; f <= 9; f++ {
					l.Advance(&s, fork.PrefixKey(seed), f, &hist)
					c := fork.Checkpoint[counter.State]{Version: fork.CheckpointVersion, World: l.Decl.Name, WorldVersion: l.Decl.Version,
						Params: wp, Model: tc.m, ForkStep: f, History: l.Turns(hist), State: s}
					want, _ := c.Encode()
					got, err := enc.Append(nil, f, hist, &s)
					if err != nil || string(got) != string(want) {
						t.Fatalf("seed %d fork %d: encoder wrote\n%s\nEncode wrote\n%s", seed, f, got, want)
					}
				}
			}
		}
	}
}

// An action the declaration does not name cannot be encoded.
func TestEncoderRejectsUnknownAction(t *testing.T) {
	l := seedLab()
	enc, err := fork.NewEncoder[counter.State](l.Decl, counter.Default().WorldParams(), fork.Model{})
	if err != nil {
		t.Fatal(err)
	}
	s := l.World.Start(1)
	if _, err := enc.Append(nil, 1, []world.Action{counter.Increment, 9}, &s); err == nil || !strings.Contains(err.Error(), "action 9 has no name") {
		t.Fatalf("got %v", err)
	}
}
