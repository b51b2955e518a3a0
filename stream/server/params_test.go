package server

import (
	"net/http"
	"testing"
	"time"
)

// TestCheckRepeated: each single-valued header an operation reads, sent
// twice, is refused, naming it, rather than read as its first value;
// headers the operation does not read, and list headers, may repeat.
func TestCheckRepeated(t *testing.T) {
	cases := []struct {
		op     string
		keys   []string
		key    string
		values []string
		want   string // the error, "" for none
	}{
		{"append", appendHeaders, "Producer-Epoch", []string{"0", "5"}, "header Producer-Epoch is repeated (2 values); send it once"},
		{"append", appendHeaders, "Producer-Id", []string{"p", "p"}, "header Producer-Id is repeated (2 values); send it once"},
		{"append", appendHeaders, "Producer-Seq", []string{"0", "1", "2"}, "header Producer-Seq is repeated (3 values); send it once"},
		{"append", appendHeaders, "Stream-Seq", []string{"a", "b"}, "header Stream-Seq is repeated (2 values); send it once"},
		{"append", appendHeaders, "Stream-Closed", []string{"false", "true"}, "header Stream-Closed is repeated (2 values); send it once"},
		{"append", appendHeaders, "Content-Type", []string{"text/plain", "application/json"}, ""}, // judged only with a body
		{"append", appendHeaders, "Stream-Ttl", []string{"1", "2"}, ""},                           // an append does not read it
		{"append body", ctHeaders, "Content-Type", []string{"text/plain", "application/json"}, "header Content-Type is repeated (2 values); send it once"},
		{"create", createHeaders, "Content-Type", []string{"text/plain", "text/plain"}, "header Content-Type is repeated (2 values); send it once"},
		{"create", createHeaders, "Stream-Ttl", []string{"1", "2"}, "header Stream-Ttl is repeated (2 values); send it once"},
		{"create", createHeaders, "Stream-Expires-At", []string{"a", "b"}, "header Stream-Expires-At is repeated (2 values); send it once"},
		{"create", createHeaders, "Stream-Closed", []string{"true", "true"}, "header Stream-Closed is repeated (2 values); send it once"},
		{"create", createHeaders, "Stream-Forked-From", []string{"a", "b"}, "header Stream-Forked-From is repeated (2 values); send it once"},
		{"create", createHeaders, "Stream-Fork-Offset", []string{"a", "b"}, "header Stream-Fork-Offset is repeated (2 values); send it once"},
		{"create", createHeaders, "Stream-Fork-Sub-Offset", []string{"1", "2"}, "header Stream-Fork-Sub-Offset is repeated (2 values); send it once"},
		{"create", createHeaders, "Producer-Id", []string{"p", "q"}, ""},
		{"head", headHeaders, "Producer-Id", []string{"p", "q"}, "header Producer-Id is repeated (2 values); send it once"},
		{"auth", authHeaders, "Authorization", []string{"Bearer a", "Bearer b"}, "header Authorization is repeated (2 values); send it once"},
		{"create", createHeaders, "Producer-Epoch", []string{"5"}, ""},
		{"read", nil, "If-None-Match", []string{`"a"`, `"b"`}, ""}, // a list (RFC 9110 §13.1.2)
		{"append", appendHeaders, "X-Anything", []string{"1", "2"}, ""},
	}
	for _, c := range cases {
		t.Run(c.op+" "+c.key, func(t *testing.T) {
			h := http.Header{"Content-Length": {"1"}, c.key: c.values}
			err := checkRepeated(h, c.keys)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Fatalf("checkRepeated(%s: %q) = %q, want %q", c.key, c.values, got, c.want)
			}
		})
	}
}

// TestParseRFC3339: Stream-Expires-At takes every RFC 3339 timestamp,
// including the lower-case "t" and "z" its §5.6 allows (refused with 400
// before), and nothing else.
func TestParseRFC3339(t *testing.T) {
	at := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time // zero: refused
	}{
		{"2099-01-01T00:00:00Z", at},
		{"2099-01-01t00:00:00z", at},
		{"2099-01-01t00:00:00Z", at},
		{"2099-01-01T00:00:00z", at},
		{"2099-01-01T01:00:00+01:00", at},
		{"2099-01-01t01:00:00+01:00", at},
		{"2099-01-01T00:00:00.5Z", at.Add(500 * time.Millisecond)},
		{"2099-01-01 00:00:00Z", time.Time{}},
		{"2099-01-01T00:00:00", time.Time{}},
		{"2099-1-1T00:00:00Z", time.Time{}},
		{"z", time.Time{}},
		{"", time.Time{}},
	}
	for _, c := range cases {
		got, err := parseRFC3339(c.in)
		if c.want.IsZero() {
			if err == nil {
				t.Errorf("parseRFC3339(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseRFC3339(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
