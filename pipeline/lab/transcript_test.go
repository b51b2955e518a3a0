package lab

import (
	"encoding/json"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
)

// AppendCost writes the fields a cost model reports, in their order, as
// encoding/json writes the numbers, and nothing else.
func TestAppendCost(t *testing.T) {
	c := world.Cost{Steps: 3, Tokens: 1200, USD: 0.0000125, Seconds: 1e21}
	for _, tc := range []struct {
		reported [4]bool
		want     string
	}{
		{[4]bool{true, false, false, false}, `{"steps":3}`},
		{[4]bool{true, true, false, false}, `{"steps":3,"tokens":1200}`},
		{[4]bool{true, false, true, true}, `{"steps":3,"usd":0.0000125,"seconds":1e+21}`},
		{[4]bool{}, `{}`},
	} {
		got := string(AppendCost([]byte("x"), c, tc.reported))
		if got != "x"+tc.want {
			t.Errorf("%v: %s, want %s", tc.reported, got[1:], tc.want)
		}
		var back map[string]float64
		if err := json.Unmarshal([]byte(got[1:]), &back); err != nil {
			t.Errorf("%s: %v", got[1:], err)
		}
	}
}
