package htmlreport

import (
	"math"
	"testing"

	"gonum.org/v1/plot"
)

// An axis's ticks are few and finite whatever range it is given: a log
// axis from 0 (log10(0) = −Inf) or a linear one to ±Inf looped forever,
// appending ticks, and an HTML report was killed at 24 GB (CI, stop 27:
// forklab report --html of a nondeterministic agent's sweep).
func TestTicksBounded(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		name     string
		ticker   plot.Ticker
		min, max float64
		want     int // ticks, or -1 for "at most 2·maxTicks+1"
	}{
		{"log from zero", logTicks{label: numLabel}, 0, 10, 11},
		{"log from negative", logTicks{label: numLabel}, -1, 1, 9},
		{"log to infinity", logTicks{label: numLabel}, 1, inf, 0},
		{"linear from −Inf", niceTicks{label: numLabel}, -inf, 1, 0},
		{"linear to +Inf", niceTicks{label: numLabel}, 0, inf, 0},
		{"linear NaN", niceTicks{label: numLabel}, nan, 1, 0},
		{"reversed", niceTicks{label: numLabel}, 2, 1, 0},
		{"empty range", niceTicks{label: numLabel}, 3, 3, 1},
		{"tiny step", niceTicks{label: numLabel, step: 1e-12}, 0, 1, -1},
		{"huge values", niceTicks{label: numLabel}, 1e300, 1.0000001e300, -1},
		{"plain", niceTicks{label: numLabel}, 0, 100, 11},
	} {
		got := tc.ticker.Ticks(tc.min, tc.max)
		switch {
		case tc.want >= 0 && len(got) != tc.want:
			t.Errorf("%s: %d ticks %v, want %d", tc.name, len(got), got, tc.want)
		case tc.want < 0 && (len(got) == 0 || len(got) > 2*maxTicks+1):
			t.Errorf("%s: %d ticks", tc.name, len(got))
		}
	}
}
