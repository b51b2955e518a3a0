package plural

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Count(1, "unit"), "1 unit"},
		{Count(0, "unit"), "0 units"},
		{Count(3, "unit"), "3 units"},
		{Count(int64(-1), "step"), "-1 step"},
		{Count(int64(-2), "step"), "-2 steps"},
		{Count(uint64(1), "seed"), "1 seed"},
		{Of(1, "process", "processes"), "1 process"},
		{Of(2, "process", "processes"), "2 processes"},
		{Word(1, "is", "are"), "is"},
		{Word(4, "is", "are"), "are"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
