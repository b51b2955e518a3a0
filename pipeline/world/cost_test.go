package world

import "testing"

func TestCostArithmetic(t *testing.T) {
	a := Cost{Steps: 3, Tokens: 100, USD: 0.25, Seconds: 1.5}
	b := Cost{Steps: 5, Tokens: 40, USD: 0.5, Seconds: 0.5}
	if got, want := a.Add(b), (Cost{Steps: 8, Tokens: 140, USD: 0.75, Seconds: 2}); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	if got, want := a.Max(b), (Cost{Steps: 5, Tokens: 100, USD: 0.5, Seconds: 1.5}); got != want {
		t.Errorf("Max = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		field string
		want  float64
	}{{CostSteps, 3}, {CostTokens, 100}, {CostUSD, 0.25}, {CostSeconds, 1.5}, {"euros", 0}} {
		if got := a.Field(tc.field); got != tc.want {
			t.Errorf("Field(%q) = %v, want %v", tc.field, got, tc.want)
		}
	}
}
