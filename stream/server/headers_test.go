package server_test

import (
	"net/http"
	"testing"
)

// TestIfNoneMatchList checks that If-None-Match is read as the list RFC 9110
// §13.1.2 makes it: a client (or a proxy merging requests) may send the tag
// on a second field line or after a comma, and the catch-up read must still
// answer 304 with no body. Only the first field line used to be read, so
// the second line's match was missed and the data sent again.
func TestIfNoneMatchList(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	url := svc.URL + "/v1/stream/inm"
	do(t, "PUT", url, map[string]string{"Content-Type": "text/plain"}, "hello")
	first := do(t, "GET", url, nil, "")
	tag := first.header.Get("ETag")
	if first.status != 200 || first.body != "hello" || tag == "" {
		t.Fatalf("GET: %d %q ETag %q, want 200 \"hello\" and an ETag", first.status, first.body, tag)
	}
	cases := []struct {
		name   string
		values []string
		status int
		body   string
	}{
		{"one line, the tag", []string{tag}, 304, ""},
		{"one line, another tag", []string{`"other"`}, 200, "hello"},
		{"tag on the second line", []string{`"other"`, tag}, 304, ""},
		{"tag after a comma", []string{`"other", ` + tag}, 304, ""},
		{"weak form on the second line", []string{`"x"`, "W/" + tag}, 304, ""},
		{"two lines, neither the tag", []string{`"x"`, `"y"`}, 200, "hello"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := doHeader(t, "GET", url, http.Header{"If-None-Match": c.values}, "")
			if r.status != c.status || r.body != c.body {
				t.Fatalf("If-None-Match %q: %d %q, want %d %q", c.values, r.status, r.body, c.status, c.body)
			}
			if r.header.Get("ETag") != tag {
				t.Fatalf("ETag %q, want %q", r.header.Get("ETag"), tag)
			}
		})
	}
}
