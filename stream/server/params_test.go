package server

import (
	"net/http"
	"testing"
)

// TestCheckRepeated: every single-valued protocol header sent twice is
// refused, naming it, rather than read as its first value; list headers
// and headers the server does not read may repeat.
func TestCheckRepeated(t *testing.T) {
	cases := []struct {
		key    string
		values []string
		want   string // the error, "" for none
	}{
		{"Producer-Epoch", []string{"0", "5"}, "header Producer-Epoch is repeated (2 values); send it once"},
		{"Producer-Id", []string{"p", "p"}, "header Producer-Id is repeated (2 values); send it once"},
		{"Producer-Seq", []string{"0", "1", "2"}, "header Producer-Seq is repeated (3 values); send it once"},
		{"Content-Type", []string{"text/plain", "application/json"}, "header Content-Type is repeated (2 values); send it once"},
		{"Authorization", []string{"Bearer a", "Bearer b"}, "header Authorization is repeated (2 values); send it once"},
		{"Stream-Ttl", []string{"1", "2"}, "header Stream-Ttl is repeated (2 values); send it once"},
		{"Stream-Expires-At", []string{"a", "b"}, "header Stream-Expires-At is repeated (2 values); send it once"},
		{"Stream-Seq", []string{"a", "b"}, "header Stream-Seq is repeated (2 values); send it once"},
		{"Stream-Closed", []string{"false", "true"}, "header Stream-Closed is repeated (2 values); send it once"},
		{"Stream-Forked-From", []string{"a", "b"}, "header Stream-Forked-From is repeated (2 values); send it once"},
		{"Stream-Fork-Offset", []string{"a", "b"}, "header Stream-Fork-Offset is repeated (2 values); send it once"},
		{"Stream-Fork-Sub-Offset", []string{"1", "2"}, "header Stream-Fork-Sub-Offset is repeated (2 values); send it once"},
		{"Producer-Epoch", []string{"5"}, ""},
		{"If-None-Match", []string{`"a"`, `"b"`}, ""}, // a list (RFC 9110 §13.1.2)
		{"Accept", []string{"text/plain", "*/*"}, ""},
		{"X-Anything", []string{"1", "2"}, ""},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			h := http.Header{"Content-Length": {"1"}, c.key: c.values}
			err := checkRepeated(h)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Fatalf("checkRepeated(%s: %q) = %q, want %q", c.key, c.values, got, c.want)
			}
		})
	}
	// The map holds canonical keys: the server canonicalises what it reads.
	for k := range singleHeaders {
		if k != http.CanonicalHeaderKey(k) {
			t.Errorf("singleHeaders key %q is not canonical (%q)", k, http.CanonicalHeaderKey(k))
		}
	}
}
