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
		{`{"a\u0062":1,"ab":2}`, `key "ab" appears twice (JSON keeps the last without a word: remove one)`}, // the same key, written otherwise
		{`{"x":"{\"a\":1,\"a\":2}","y":[{"a":1},{"a":1}]}`, ``},                                             // keys inside a string are no keys
		{`{"a":{"b":1},"c":{"b":2,"d":{"b":3}},"b":4}`, ``},
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

// The fast path never misses a key written twice: every prefix of every
// case, and objects of more than 64 keys, agree with the token-by-token
// check.
func TestFastPathAgrees(t *testing.T) {
	docs := []string{`{"seeds":"0:10","seeds":"0:20"}`, `{"agent":{"command":"x","timeout":"1s","timeout":"2s"}}`,
		`{"grid":{"p_stall":[0.1,{"a":1,"a":2}]}}`, `{"a\u0062":1,"ab":2}`, `[{"k":1},{"k":2}]`, `{"a":"}","a":1}`, `{"a":"\"","b":{"a":1},"a":2}`}
	var big []byte
	big = append(big, '{')
	for i := range 70 {
		if i > 0 {
			big = append(big, ',')
		}
		big = append(big, []byte(`"k`+string(rune('A'+i%26))+string(rune('a'+i/26))+`":1`)...)
	}
	docs = append(docs, string(append(big, `,"kAa":2}`...)), string(append(big, '}')))
	for _, d := range docs {
		for n := 0; n <= len(d); n++ {
			b := []byte(d[:n])
			if a, c := Check(b), check(b); (a == nil) != (c == nil) {
				t.Errorf("%s: fast path %v, token by token %v", b, a, c)
			}
		}
	}
}
