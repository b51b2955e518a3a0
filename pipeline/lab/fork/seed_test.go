package fork_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
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
	return fork.Lab[counter.State]{World: counter.World{P: counter.Default()}}
}

// refLabel maps our labels to the reference core's words.
var refLabel = map[fork.Label]string{fork.Rescued: "rescue", fork.Harmed: "harm", fork.Unchanged: "unchanged"}

// pair is the reference core's pair(seed, fork_at) through the Lab, with the
// same_obs guard when guarded is set.
func pair(l fork.Lab[counter.State], seed uint64, forkAt int, guarded bool) (counter.State, bool, fork.Label) {
	s := l.Advance(l.World.Start(seed), fork.PrefixKey(seed), forkAt, nil)
	feat := l.World.Features(s).SameObs
	arm := fork.On
	if guarded {
		arm = fork.Policy
	}
	_, off, _ := l.Branch(s, seed, forkAt, fork.Off, 0, false)
	_, on, _ := l.Branch(s, seed, forkAt, arm, 0, feat)
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
	for seed := uint64(0); seed < 300; seed++ {
		var hist []fork.Turn
		s := l.Advance(l.World.Start(seed), fork.PrefixKey(seed), 3, &hist)
		c := fork.Checkpoint[counter.State, counter.Params]{Version: fork.CheckpointVersion, World: counter.Name,
			Params: counter.Default(), ForkStep: 3, History: hist, State: s}
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		d, err := fork.DecodeCheckpoint[counter.State, counter.Params](b, counter.Name)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b2, _ := d.Encode()
		if string(b) != string(b2) {
			t.Fatalf("seed %d: round trip changed the bytes:\n%s\n%s", seed, b, b2)
		}
		// Forking the decoded copy twice gives the in-memory fork's outcomes.
		for _, arm := range []fork.Arm{fork.Off, fork.On} {
			_, want, _ := l.Branch(s, seed, 3, arm, 0, false)
			_, got, _ := l.Branch(d.State, seed, 3, arm, 0, false)
			if got != want {
				t.Fatalf("seed %d arm %s: decoded fork %t, in-memory fork %t", seed, arm, got, want)
			}
		}
	}
}

func TestDecodeCheckpointRejectsBadInput(t *testing.T) {
	l := seedLab()
	s := l.Advance(l.World.Start(5), fork.PrefixKey(5), 3, nil)
	good, _ := fork.Checkpoint[counter.State, counter.Params]{Version: 1, World: counter.Name, Params: counter.Default(), ForkStep: 3, State: s}.Encode()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"truncated", string(good[:len(good)/2]), "ends early"},
		{"malformed", `{"checkpoint_version":1,,}`, "malformed JSON at byte"},
		{"unknown field", strings.Replace(string(good), `"world"`, `"wurld"`, 1), "unknown field"},
		{"wrong type", strings.Replace(string(good), `"fork_step":3`, `"fork_step":"3"`, 1), `field "fork_step" has the wrong type`},
		{"version", strings.Replace(string(good), `"checkpoint_version":1`, `"checkpoint_version":7`, 1), "checkpoint_version 7"},
		{"world", strings.Replace(string(good), `"world":"counter"`, `"world":"maze"`, 1), `world "maze"`},
		{"trailing", string(good) + `{}`, "trailing data"},
		{"fork step", strings.Replace(string(good), `"fork_step":3`, `"fork_step":0`, 1), "fork_step 0 is below 1"},
	} {
		_, err := fork.DecodeCheckpoint[counter.State, counter.Params]([]byte(tc.in), counter.Name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
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
		l := fork.Lab[counter.State]{World: counter.World{P: tc.p}, Model: tc.m}
		enc, err := fork.NewEncoder[counter.State](counter.Name, tc.p, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(0); seed < 500; seed++ {
			var hist []fork.Turn
			s := l.World.Start(seed)
			for f := 1; f <= 9; f++ {
				s = l.Advance(s, fork.PrefixKey(seed), f, &hist)
				c := fork.Checkpoint[counter.State, counter.Params]{Version: fork.CheckpointVersion, World: counter.Name,
					Params: tc.p, Model: tc.m, ForkStep: f, History: hist, State: s}
				want, _ := c.Encode()
				got, err := enc.Append(nil, f, hist, s)
				if err != nil || string(got) != string(want) {
					t.Fatalf("seed %d fork %d: encoder wrote\n%s\nEncode wrote\n%s", seed, f, got, want)
				}
			}
		}
	}
}
