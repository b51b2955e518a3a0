package world

import (
	"strings"
	"testing"
)

// max_len is the most values a list parameter may hold, its default
// included: a default longer than max_len is refused (0, or no max_len,
// means 2^20); min and max bound each value of a list. docs/agent-protocol.md
// states these rules (a tester could not tell what max_len meant).
func TestListParamMaxLen(t *testing.T) {
	for _, tc := range []struct {
		p    Param
		want string // "" when the parameter is valid
	}{
		{Param{Name: "k", Kind: ParamIntList, Default: []any{int64(2), int64(5)}, MaxLen: 1},
			"parameter k: its default: k must be a list of 1 to 1 values, each an integer, got 2 values"},
		{Param{Name: "k", Kind: ParamIntList, Default: []any{int64(2), int64(5)}, MaxLen: 2}, ""},
		{Param{Name: "k", Kind: ParamIntList, Default: []any{int64(2)}}, ""},
		{Param{Name: "k", Kind: ParamIntList, Default: []any{}, MaxLen: 2},
			"parameter k: its default: k must be a list of 1 to 2 values, each an integer, got 0 values"},
		{Param{Name: "k", Kind: ParamIntList, Default: []any{int64(2), int64(9)}, Min: Bound(1), Max: Bound(5)},
			"parameter k: its default: k must be a list of 1 to 1048576 values, each an integer in [1, 5], got 9"},
		{Param{Name: "f", Kind: ParamFloatList, Default: []any{0.5, 1.5}, Max: Bound(1), MaxLen: 4},
			"parameter f: its default: f must be a list of 1 to 4 values, each a number <= 1, got 1.5"},
	} {
		err := tc.p.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc.p, err, tc.want)
		}
	}
}
