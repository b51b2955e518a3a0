package kafkalog

import "testing"

// earliest at each of its bounds (issue 25 H: the clamp of an incomplete
// index under retention was run by no test). For a stream whose index is
// complete it is right after the last record retention dropped, or the
// beginning when none was; for one whose index is incomplete (its create
// trimmed away), the log start offset, clamped to the stream's tail when
// retention went past every record the stream has.
func TestEarliestAtItsBounds(t *testing.T) {
	entries := []entry{{koff: 10, cut: -1}, {koff: 12, cut: -1}, {koff: 15, cut: -1}}
	v := view{entries: entries, tail: 16, createKoff: 9}
	complete := &stream{}
	trimmed := &stream{meta: meta{trimmed: true}}
	for _, tc := range []struct {
		s    *stream
		ls   int64
		want int64
	}{
		{complete, 0, -1},  // nothing dropped
		{complete, 10, -1}, // the log starts at the first record: nothing dropped
		{complete, 11, 11}, // the first record dropped: right after it
		{complete, 12, 11}, // still only the first
		{complete, 13, 13}, // the second too
		{complete, 16, 16}, // every record dropped: the tail
		{trimmed, 12, 12},  // below the tail: the log start offset
		{trimmed, 16, 16},  // at the tail
		{trimmed, 17, 16},  // past it: clamped to the tail
		{trimmed, 40, 16},
	} {
		if got := tc.s.earliest(v, tc.ls); got != tc.want {
			t.Errorf("earliest (trimmed %t) with log start %d = %d, want %d", tc.s.meta.trimmed, tc.ls, got, tc.want)
		}
	}
}
