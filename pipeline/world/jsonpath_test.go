package world

import (
	"strings"
	"testing"
)

// A volatile path names places in start's result: keys by name or *,
// indices by number or [*]; it matches a place of exactly its length.
func TestJSONPath(t *testing.T) {
	steps := func(s string) []PathStep {
		p, err := ParseJSONPath(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		pattern, place string
		match          bool
	}{
		{"forks[*].checkpoint.ts", "forks[3].checkpoint.ts", true},
		{"forks[*].checkpoint.ts", "forks[3].checkpoint.ts.x", false},
		{"forks[*].checkpoint.ts", "forks[3].checkpoint", false},
		{"forks[1].checkpoint.ts", "forks[0].checkpoint.ts", false},
		{"forks[*].checkpoint.*.id", "forks[0].checkpoint.config.id", true},
		{"forks[*].checkpoint.channel_values.messages[*].kwargs.id", "forks[0].checkpoint.channel_values.messages[12].kwargs.id", true},
		{"task.run-id", "task.run-id", true},
		{"forks[*]", "forks.x", false},
	} {
		if got := JSONPath(steps(tc.pattern)).Match(steps(tc.place)); got != tc.match {
			t.Errorf("%s matches %s: %t, want %t", tc.pattern, tc.place, got, tc.match)
		}
		if got := PathText(steps(tc.place)); got != tc.place {
			t.Errorf("PathText(%s) = %s", tc.place, got)
		}
	}
	d := Declaration{Name: "w", Version: "1", Features: []Field{{Name: "f", Kind: Bool}}, Cost: CostModel{Fields: []string{CostSteps}}}
	for _, tc := range []struct{ volatile, want string }{
		{"forks[x].ts", `world w: volatile[0]: "forks[x].ts" is not a path: keys joined by '.', array indices [N] or [*], * for any key`},
		{"forks..ts", `"forks..ts" is not a path`},
		{"checkpoint.ts", `world w: volatile[0] "checkpoint.ts": a path into start's result begins with task or forks (did you mean forks[*].checkpoint.ts?)`},
		{"*.ts", `begins with task or forks`},
	} {
		d.Volatile = []string{tc.volatile}
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("volatile %q: %v, want %q", tc.volatile, err, tc.want)
		}
	}
	d.Volatile = []string{"forks[*].checkpoint.ts", "task.id"}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
}
