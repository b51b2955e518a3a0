package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// browserReq sends a request as a browser page would: with an Origin
// (none when origin is "") and a Host of its choosing ("" keeps the URL's).
func browserReq(t *testing.T, method, url, host, origin string, h map[string]string, body string) resp {
	t.Helper()
	hh := http.Header{}
	for k, v := range h {
		hh.Set(k, v)
	}
	if origin != "" {
		hh.Set("Origin", origin)
	}
	if host != "" {
		hh.Set("Host", host)
	}
	return doHeader(t, method, url, hh, body)
}

// TestBrowserBoundary: on loopback without tokens, a page from another
// origin can neither preflight nor send a simple request (a text/plain
// POST needs no preflight, so refusing only in OPTIONS would not stop
// it), and a DNS-rebinding page, whose requests name its own host, is
// refused; loopback origins and hosts are served, with the origin echoed
// and Vary: Origin. The curl commands were answered
// Access-Control-Allow-Origin: * with DELETE allowed, and a DELETE with
// Host: evil.example:4437 deleted the stream.
func TestBrowserBoundary(t *testing.T) {
	svc := start(t, t.TempDir(), nil)
	defer stop(svc)
	u := svc.URL + "/v1/stream/x"
	port := svc.URL[strings.LastIndex(svc.URL, ":")+1:]
	tp := map[string]string{"Content-Type": "text/plain"}
	if r := do(t, "PUT", u, tp, "a"); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	preflight := map[string]string{"Access-Control-Request-Method": "DELETE"}
	refused := []struct {
		name, method, host, origin string
		h                          map[string]string
		want                       string // in the reason
	}{
		{"preflight from another origin (the issue's curl)", "OPTIONS", "", "http://evil.example", preflight, "--cors-origin http://evil.example"},
		{"simple POST from another origin", "POST", "", "http://evil.example", tp, "Origin"},
		{"read from another origin", "GET", "", "https://evil.example", nil, "Origin"},
		{"DELETE from another origin", "DELETE", "", "http://evil.example:4437", nil, "Origin"},
		{"the conformance suite's origin, not named", "OPTIONS", "", "https://example.com", preflight, "Origin"},
		{"a sandboxed frame or a file: page", "POST", "", "null", tp, "Origin"},
		{"a name that only starts like loopback", "GET", "", "http://localhost.evil.example", nil, "Origin"},
		{"an address that only starts like loopback", "GET", "", "http://127.0.0.1.nip.io", nil, "Origin"},
		{"not an http origin", "GET", "", "file://localhost", nil, "Origin"},
		{"DNS rebinding: DELETE (the issue's curl)", "DELETE", "evil.example:" + port, "", nil, "DNS rebinding"},
		{"DNS rebinding: POST", "POST", "evil.example:" + port, "http://evil.example:" + port, tp, "Host"},
		{"DNS rebinding: read", "GET", "evil.example", "", nil, "Host"},
		{"a name that only starts like loopback, as Host", "GET", "localhost.evil.example:" + port, "", nil, "Host"},
		{"a public address as Host", "GET", "192.0.2.1:" + port, "", nil, "Host"},
	}
	for _, c := range refused {
		r := browserReq(t, c.method, u, c.host, c.origin, c.h, "b")
		if r.status != 403 || !strings.Contains(r.body, c.want) {
			t.Errorf("%s: %d %q, want 403 naming %q", c.name, r.status, r.body, c.want)
		}
		for _, h := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("%s: %s: %q on a refusal", c.name, h, v)
			}
		}
	}
	if r := do(t, "GET", u, nil, ""); r.status != 200 || r.body != "a" {
		t.Fatalf("after the refusals: %d %q, want 200 \"a\": a refused request changed the stream", r.status, r.body)
	}

	served := []struct {
		name, method, host, origin string
		h                          map[string]string
		status                     int
	}{
		{"no Origin (curl, the Go client)", "GET", "", "", nil, 200},
		{"a dev server on localhost", "OPTIONS", "", "http://localhost:5173", preflight, 204},
		{"a dev server on localhost: append", "POST", "", "http://localhost:5173", tp, 204},
		{"127.0.0.1 with a port", "GET", "", "http://127.0.0.1:3000", nil, 200},
		{"IPv6 loopback", "GET", "", "http://[::1]:8080", nil, 200},
		{"a name under .localhost (RFC 6761)", "GET", "", "https://app.localhost", nil, 200},
		{"Host localhost", "GET", "localhost:" + port, "", nil, 200},
		{"Host 127.0.0.2 (all of 127/8 is loopback)", "GET", "127.0.0.2:" + port, "", nil, 200},
		{"Host [::1]", "GET", "[::1]:" + port, "", nil, 200},
		{"Host without port", "GET", "localhost", "", nil, 200},
		{"Host localhost. (fully qualified)", "GET", "localhost.:" + port, "", nil, 200},
	}
	for _, c := range served {
		r := browserReq(t, c.method, u, c.host, c.origin, c.h, "c")
		if r.status != c.status {
			t.Errorf("%s: %d %q, want %d", c.name, r.status, r.body, c.status)
			continue
		}
		if got := r.header.Get("Access-Control-Allow-Origin"); got != c.origin {
			t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", c.name, got, c.origin)
		}
		if got := r.header.Get("Vary"); got != "Origin" {
			t.Errorf("%s: Vary %q, want Origin (the answer depends on it)", c.name, got)
		}
	}
	if r := browserReq(t, "OPTIONS", u, "", "http://localhost:5173", preflight, ""); !strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "DELETE") {
		t.Errorf("preflight from localhost: Access-Control-Allow-Methods %q, want DELETE in it", r.header.Get("Access-Control-Allow-Methods"))
	}
	// Two Origin lines are no browser's: refused.
	req, _ := http.NewRequest("GET", u, nil)
	req.Header["Origin"] = []string{"http://localhost:5173", "http://evil.example"}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Errorf("two Origin lines: %d, want 403", res.StatusCode)
	}
}

// TestCORSOrigin: --cors-origin names the origins allowed besides the
// loopback ones (the conformance suite's preflight comes from
// https://example.com); "*" allows every one, as before; with tokens the
// Host check is off (a page has no token to send) and the Origin rule
// stays.
func TestCORSOrigin(t *testing.T) {
	preflight := map[string]string{"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "if-none-match"}
	t.Run("named", func(t *testing.T) {
		svc := start(t, t.TempDir(), func(c *service.Config) {
			c.Server.CORSOrigins = []string{"HTTPS://Example.com:443", "http://notebook.example:8888"}
		})
		defer stop(svc)
		u := svc.URL + "/v1/stream/x"
		for origin, status := range map[string]int{"https://example.com": 204, "http://notebook.example:8888": 204,
			"http://notebook.example": 403, "https://example.com:8443": 403, "http://example.com": 403, "http://localhost:1234": 204} {
			r := browserReq(t, "OPTIONS", u, "", origin, preflight, "")
			if r.status != status {
				t.Errorf("preflight from %s: %d %q, want %d", origin, r.status, r.body, status)
				continue
			}
			if status == 204 && (r.header.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(strings.ToLower(r.header.Get("Access-Control-Allow-Headers")), "if-none-match")) {
				t.Errorf("preflight from %s: allow-origin %q allow-headers %q", origin, r.header.Get("Access-Control-Allow-Origin"), r.header.Get("Access-Control-Allow-Headers"))
			}
		}
	})
	t.Run("any", func(t *testing.T) {
		svc := start(t, t.TempDir(), func(c *service.Config) { c.Server.CORSOrigins = []string{"*"} })
		defer stop(svc)
		r := browserReq(t, "OPTIONS", svc.URL+"/v1/stream/x", "", "http://evil.example", preflight, "")
		if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("--cors-origin '*': %d allow-origin %q, want 204 and *", r.status, r.header.Get("Access-Control-Allow-Origin"))
		}
		// The Host check does not depend on the origins.
		if r := browserReq(t, "GET", svc.URL+"/v1/stream/x", "evil.example", "", nil, ""); r.status != 403 {
			t.Errorf("--cors-origin '*', Host evil.example: %d, want 403", r.status)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		dir := t.TempDir()
		tf := filepath.Join(dir, "tokens")
		os.WriteFile(tf, []byte("read-write "+rwToken+"\n"), 0o600)
		svc := start(t, filepath.Join(dir, "data"), func(c *service.Config) { c.TokenFile = tf })
		defer stop(svc)
		auth := map[string]string{"Authorization": "Bearer " + rwToken, "Content-Type": "text/plain"}
		if r := browserReq(t, "PUT", svc.URL+"/v1/stream/x", "log.example:443", "", auth, "a"); r.status != 201 {
			t.Errorf("with tokens, Host log.example: %d %q, want 201", r.status, r.body)
		}
		if r := browserReq(t, "POST", svc.URL+"/v1/stream/x", "", "http://evil.example", auth, "b"); r.status != 403 {
			t.Errorf("with tokens, Origin evil.example: %d %q, want 403", r.status, r.body)
		}
	})
	t.Run("refused values", func(t *testing.T) {
		for _, o := range []string{"example.com", "https://example.com/app", "ftp://example.com", "https://", "https://user@example.com", "https://example.com?x=1"} {
			if _, err := service.Start(t.Context(), service.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Server: server.Config{CORSOrigins: []string{o}}}); err == nil || !strings.Contains(err.Error(), "--cors-origin") {
				t.Errorf("--cors-origin %q: %v, want a --cors-origin error", o, err)
			}
		}
	})
}

// TestParseOrigin: the form a browser sends, whatever the form given.
func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://Example.COM": "https://example.com", "https://example.com:443": "https://example.com",
		"http://example.com:80/": "http://example.com", "http://example.com:8080": "http://example.com:8080",
		"http://[::1]:3000": "http://[::1]:3000", "*": "*", "null": "null",
	} {
		if got, err := server.ParseOrigin(in); err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestLoopbackName: names and addresses of the loopback interface, and
// look-alikes that are not.
func TestLoopbackName(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "localhost.": true, "app.localhost": true, "127.0.0.1": true,
		"127.1.2.3": true, "::1": true, "::ffff:127.0.0.1": true,
		"": false, "localhost.evil.example": false, "evillocalhost": false, "127.0.0.1.nip.io": false,
		"0.0.0.0": false, "192.0.2.1": false, "::": false, "[::1]": false,
	} {
		if got := server.LoopbackName(host); got != want {
			t.Errorf("LoopbackName(%q) = %v, want %v", host, got, want)
		}
	}
}
