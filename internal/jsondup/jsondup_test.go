package jsondup

import "testing"

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"seeds":"0:10","seeds":"0:20"}`, `key "seeds" appears twice (JSON keeps the last without a word: remove one)`},
		{`{"agent":{"command":"x","timeout":"1s","timeout":"2s"}}`, `key "agent.timeout" appears twice (JSON keeps the last without a word: remove one)`},
		{`{"grid":{"p_stall":[0.1,{"a":1,"a":2}]}}`, `key "grid.p_stall[1].a" appears twice (JSON keeps the last without a word: remove one)`},
		{`{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]}`, ``},
		{`{"a":"a","b":["a","a"],"c":"a"}`, ``},
		{`[{"k":1},{"k":2}]`, ``},
		{`{"a":1,`, ``}, // malformed: the decoder's to report
		{`3`, ``},
	} {
		err := Check([]byte(tc.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Check(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
