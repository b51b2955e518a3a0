package stats

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// golden is testdata/stats/golden.json, from testdata/stats/gen.py.
type golden struct {
	Z95     float64     `json:"z95"`
	McNemar [][]float64 `json:"mcnemar"`
	// McNemarLarge are counts too large for exact integer sums, from ln n!
	// to 50 decimal digits.
	McNemarLarge [][]float64 `json:"mcnemar_large"`
	Wilson       [][]float64 `json:"wilson"`
	Newcombe     [][]float64 `json:"newcombe"`
	CP           [][]float64 `json:"clopper_pearson_upper"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/stats/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.McNemar) < 8 || len(g.McNemarLarge) < 5 || len(g.Newcombe) < 8 || len(g.CP) < 6 || len(g.Wilson) < 5 {
		t.Fatal("golden file incomplete")
	}
	return g
}

const tol = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

func TestAgainstReferenceValues(t *testing.T) {
	g := loadGolden(t)
	if !near(Z95, g.Z95) {
		t.Errorf("Z95 = %.17g, want 1.959963984540054", Z95)
	}
	for _, r := range g.McNemar {
		if got := McNemarExact(int64(r[0]), int64(r[1])); !near(got, r[2]) {
			t.Errorf("McNemarExact(%v, %v) = %.17g, want %.17g", r[0], r[1], got, r[2])
		}
	}
	for _, r := range g.McNemarLarge {
		if got := McNemarExact(int64(r[0]), int64(r[1])); relErr(got, r[2]) > 1e-12 {
			t.Errorf("McNemarExact(%v, %v) = %.17g, want %.17g", r[0], r[1], got, r[2])
		}
	}
	// gen.py's method for large counts agrees with exact integer sums.
	if r := g.McNemarLarge[0]; relErr(refMcNemar(int64(r[0]), int64(r[1])), r[2]) > 1e-14 {
		t.Errorf("golden mcnemar_large %v: exact sum %.17g", r, refMcNemar(int64(r[0]), int64(r[1])))
	}
	for _, r := range g.Wilson {
		got := Wilson(int64(r[0]), int64(r[1]), Z95)
		if !near(got.Lo, r[2]) || !near(got.Hi, r[3]) {
			t.Errorf("Wilson(%v, %v) = %v, want [%v, %v]", r[0], r[1], got, r[2], r[3])
		}
	}
	for _, r := range g.Newcombe {
		got := NewcombePaired(int64(r[0]), int64(r[1]), int64(r[2]), int64(r[3]), Z95)
		if !near(got.Lo, r[4]) || !near(got.Hi, r[5]) {
			t.Errorf("NewcombePaired(%v) = %v, want [%v, %v]", r[:4], got, r[4], r[5])
		}
	}
	for _, r := range g.CP {
		if got := ClopperPearsonUpper(int64(r[0]), int64(r[1]), 0.95); !near(got, r[2]) {
			t.Errorf("ClopperPearsonUpper(%v, %v) = %.17g, want %.17g", r[0], r[1], got, r[2])
		}
	}
}

// Values printed in the sources, pinned literally.
func TestPublishedValues(t *testing.T) {
	if p := McNemarExact(75, 83); p != 0.5777428358653729 && !near(p, 0.5777428358653729) {
		t.Errorf("McNemar 75/83 = %.16f, want 0.5777428358653729 (issue 3)", p)
	}
	// Fagerland, Lydersen and Laake (2017), Table 8.x: Cavo et al. (2012).
	iv := NewcombePaired(59, 6, 16, 80, Z95)
	if math.Round(iv.Lo*1e4) != -1186 || math.Round(iv.Hi*1e4) != -46 {
		t.Errorf("Newcombe (59, 6, 16, 80) = %v, want [-0.1186, -0.0046]", iv)
	}
	// 1 − 0.05^(1/150) = 0.0197734381645084457586… (50 digits, Python's
	// decimal module).
	if got := ClopperPearsonUpper(0, 150, 0.95); math.Abs(got-0.019773438164508446) > 1e-17 {
		t.Errorf("zero harms in 150: %.17g, want 0.019773438164508446", got)
	}
}
