package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
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
			// RFC 9110 §15.4.5: a 304 carries the 200's Cache-Control.
			if got, want := r.header.Get("Cache-Control"), first.header.Get("Cache-Control"); got != want || want == "" {
				t.Fatalf("Cache-Control %q, want the 200's, %q", got, want)
			}
		})
	}
}

// TestRepeatedIgnoredHeaders: a repeated header the operation does not read
// refuses nothing. A close-only append with two Content-Types (a library's
// default and the caller's) still closes (§5.2: an empty body's
// Content-Type is never a reason to refuse), and a read with a stray
// repeated Stream-TTL still reads.
func TestRepeatedIgnoredHeaders(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	url := svc.URL + "/v1/stream/rep"
	do(t, "PUT", url, map[string]string{"Content-Type": "text/plain"}, "a")
	r := doHeader(t, "GET", url, http.Header{"Stream-Ttl": {"1", "2"}}, "")
	if r.status != 200 || r.body != "a" {
		t.Fatalf("GET with a repeated Stream-TTL: %d %q, want 200 \"a\"", r.status, r.body)
	}
	r = doHeader(t, "POST", url, http.Header{"Content-Type": {"application/octet-stream", "text/plain"}, "Stream-Closed": {"true"}}, "")
	if r.status != 204 || r.header.Get("Stream-Closed") != "true" {
		t.Fatalf("close-only with two Content-Types: %d %q, want 204 with Stream-Closed: true", r.status, r.body)
	}
	// With a body, two Content-Types are malformed, as a missing one is.
	r = doHeader(t, "POST", url, http.Header{"Content-Type": {"text/plain", "text/plain"}}, "b")
	if r.status != 400 {
		t.Fatalf("append with two Content-Types: %d, want 400", r.status)
	}
}

// TestRepeatedAuthorization: with tokens on, two Authorization lines are
// refused (400) whichever comes first, and write nothing; the first used
// to decide alone, so a valid token followed by another passed.
func TestRepeatedAuthorization(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	os.WriteFile(tf, []byte("read-write "+rwToken+"\nread "+readToken+"\n"), 0o600)
	svc := start(t, filepath.Join(dir, "data"), func(c *service.Config) { c.TokenFile = tf })
	defer stop(svc)
	u := svc.URL + "/v1/stream/twoauth"
	for _, auth := range [][]string{
		{"Bearer " + rwToken, "Bearer " + readToken},
		{"Bearer " + readToken, "Bearer " + rwToken},
		{"Bearer " + rwToken, "Bearer " + rwToken},
	} {
		r := doHeader(t, "PUT", u, http.Header{"Authorization": auth, "Content-Type": {"text/plain"}}, "x")
		if r.status != 400 {
			t.Fatalf("PUT with Authorization %q: %d %q, want 400", auth, r.status, r.body)
		}
	}
	if r := do(t, "HEAD", u, map[string]string{"Authorization": "Bearer " + readToken}, ""); r.status != 404 {
		t.Fatalf("HEAD after the refused creates: %d, want 404", r.status)
	}
}

// TestExposeHeaders: a browser may read a response header that is not
// CORS-safelisted only when Access-Control-Expose-Headers names it, so the
// list on every response names every header the server answers with:
// Retry-After (a 503 when Kafka is unavailable or an append timed out, a
// 429) was missing, and so were WWW-Authenticate (401, 403) and Allow (405).
func TestExposeHeaders(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	r := do(t, "HEAD", svc.URL+"/v1/stream/none", nil, "")
	if r.status != 404 {
		t.Fatalf("HEAD: %d, want 404", r.status)
	}
	exposed := map[string]bool{}
	for _, h := range strings.Split(r.header.Get("Access-Control-Expose-Headers"), ",") {
		exposed[http.CanonicalHeaderKey(strings.TrimSpace(h))] = true
	}
	for _, h := range []string{"Retry-After", "WWW-Authenticate", "Allow", "Location", "ETag", "Content-Type",
		"Stream-Next-Offset", "Stream-Up-To-Date", "Stream-Closed", "Stream-Cursor", "Stream-TTL", "Stream-Expires-At",
		"Producer-Epoch", "Producer-Seq", "Producer-Expected-Seq", "Producer-Received-Seq", "Stream-Sse-Data-Encoding",
		"Forklab-Kafka-Topic", "Forklab-Kafka-Partition", "Forklab-Earliest-Offset", "Forklab-Gone-Reason"} {
		if !exposed[http.CanonicalHeaderKey(h)] {
			t.Errorf("Access-Control-Expose-Headers does not name %s: %q", h, r.header.Get("Access-Control-Expose-Headers"))
		}
	}
}

// TestCatchUpCacheControl: a catch-up read with data, or at a closed
// stream's end, is the same answer for ever and may be cached privately
// (§10.1); an empty read at an open stream's tail changes with the next
// append or close and is never cached (it used to be cacheable for 60 s,
// stale for 300 more: a catch-up poller in a browser saw neither new data
// nor the close). Text and JSON ([] when empty) alike.
func TestCatchUpCacheControl(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	const cacheable = "private, max-age=60, stale-while-revalidate=300"
	for _, c := range []struct{ ct, first, empty string }{
		{"text/plain", "a", ""},
		{"application/json", `{"a":1}`, "[]"},
	} {
		t.Run(c.ct, func(t *testing.T) {
			url := svc.URL + "/v1/stream/cc-" + strings.ReplaceAll(c.ct, "/", "-")
			tail := do(t, "PUT", url, map[string]string{"Content-Type": c.ct}, c.first).header.Get("Stream-Next-Offset")
			check := func(what, offset string, status int, body, cc, closed string) {
				t.Helper()
				r := do(t, "GET", url+"?offset="+offset, nil, "")
				if r.status != status || r.body != body || r.header.Get("Cache-Control") != cc ||
					r.header.Get("Stream-Closed") != closed || r.header.Get("ETag") == "" {
					t.Fatalf("%s: %d %q Cache-Control %q Stream-Closed %q ETag %q; want %d %q %q %q and an ETag",
						what, r.status, r.body, r.header.Get("Cache-Control"), r.header.Get("Stream-Closed"), r.header.Get("ETag"),
						status, body, cc, closed)
				}
			}
			want := c.first
			if c.empty == "[]" {
				want = "[" + c.first + "]"
			}
			check("data", "-1", 200, want, cacheable, "")
			check("open tail", tail, 200, c.empty, "no-store", "")
			do(t, "POST", url, map[string]string{"Stream-Closed": "true"}, "")
			check("closed end", tail, 200, c.empty, cacheable, "true")
		})
	}
}

// TestContentEncoding: a body with a content coding is refused, 415 with
// Accept-Encoding: identity (RFC 9110 §15.5.16), and nothing is written; it
// was stored compressed and read back as garbage. identity is accepted,
// and a close (no body) is never refused for its Content-Encoding.
func TestContentEncoding(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	url := svc.URL + "/v1/stream/ce"
	tp := map[string]string{"Content-Type": "text/plain"}
	do(t, "PUT", url, tp, "a")
	r := do(t, "POST", url, map[string]string{"Content-Type": "text/plain", "Content-Encoding": "gzip"}, "\x1f\x8b")
	if r.status != 415 || r.header.Get("Accept-Encoding") != "identity" {
		t.Fatalf("gzip append: %d Accept-Encoding %q, want 415 identity", r.status, r.header.Get("Accept-Encoding"))
	}
	if r := do(t, "POST", url, map[string]string{"Content-Type": "text/plain", "Content-Encoding": "identity"}, "b"); r.status != 204 {
		t.Fatalf("identity append: %d %q, want 204", r.status, r.body)
	}
	if r := do(t, "POST", url, map[string]string{"Content-Encoding": "gzip", "Stream-Closed": "true"}, ""); r.status != 204 || r.header.Get("Stream-Closed") != "true" {
		t.Fatalf("close with Content-Encoding: %d %q, want 204 closed", r.status, r.body)
	}
	if r := do(t, "GET", url, nil, ""); r.body != "ab" {
		t.Fatalf("stream reads %q, want \"ab\"", r.body)
	}
}

// TestClientGoneNotLogged: a reader that leaves while its read waits on
// Kafka (values not cached, as after a restart) is not a server failure:
// nothing is logged. Every departing catch-up or SSE reader used to log
// "server: kafka.(*Client).Fetch: context canceled".
func TestClientGoneNotLogged(t *testing.T) {
	dir := t.TempDir()
	svc := start(t, dir, nil)
	do(t, "PUT", svc.URL+"/v1/stream/gone", map[string]string{"Content-Type": "text/plain"}, "cold")
	stop(svc)
	svc = start(t, dir, nil) // the read cache starts empty
	defer stop(svc)
	var logged []string
	var mu sync.Mutex
	h, err := server.New(server.Config{Log: svc.Log, Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(f, a...))
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"?offset=-1", "?offset=-1&live=sse"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/stream/gone"+q, nil).WithContext(ctx))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/stream/gone", nil))
	mu.Lock()
	defer mu.Unlock()
	if rec.Code != 200 || rec.Body.String() != "cold" || len(logged) != 0 {
		t.Fatalf("read: %d %q; logged %q; want 200 \"cold\" and nothing logged", rec.Code, rec.Body.String(), logged)
	}
}
