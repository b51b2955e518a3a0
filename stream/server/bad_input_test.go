package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/forklab/forklab/stream/service"
)

// badCase is one row of testdata/stream/bad-input.json.
type badCase struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`    // under /v1/stream/
	PathRaw string            `json:"pathRaw"` // the whole path
	Headers map[string]string `json:"headers"`
	// Repeated headers are sent as several field lines each, in the
	// letter case given (net/http sends a key as written).
	Repeated   map[string][]string `json:"repeated"`
	Body       string              `json:"body"`
	BodyRepeat int                 `json:"bodyRepeat"` // body of this many 'x'
	Status     int                 `json:"status"`
}

// TestBadInput sends every malformed request of the table and checks the
// protocol's status code, a short plain-text reason, and that nothing was
// written to Kafka and no stream changed.
func TestBadInput(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/stream/bad-input.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []badCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	svc := start(t, t.TempDir(), func(c *service.Config) { c.Server.MaxBodyBytes = 1024 })
	defer stop(svc)
	base := svc.URL + "/v1/stream/"
	do(t, "PUT", base+"bad", map[string]string{"Content-Type": "text/plain"}, "")
	do(t, "POST", base+"bad", map[string]string{"Content-Type": "text/plain", "Stream-Seq": "0005"}, "seed")
	do(t, "PUT", base+"badjson", map[string]string{"Content-Type": "application/json"}, "[1]")
	do(t, "PUT", base+"closedjson", map[string]string{"Content-Type": "application/json", "Stream-Closed": "true"}, "[1]")
	head := do(t, "HEAD", base+"bad", nil, "")
	hw := highWatermark(t, svc)

	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			url := base + c.Path
			if c.PathRaw != "" {
				url = svc.URL + c.PathRaw
			}
			body := c.Body
			if c.BodyRepeat > 0 {
				body = strings.Repeat("x", c.BodyRepeat)
			}
			h := http.Header{}
			for k, v := range c.Headers {
				h[http.CanonicalHeaderKey(k)] = []string{v}
			}
			for k, v := range c.Repeated {
				h[k] = v
			}
			r := doHeader(t, c.Method, url, h, body)
			if r.status != c.Status {
				t.Fatalf("status %d, want %d (body %q)", r.status, c.Status, r.body)
			}
			if c.Method != "HEAD" {
				if !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
					t.Errorf("Content-Type %q, want text/plain", r.header.Get("Content-Type"))
				}
				reason := strings.TrimSpace(r.body)
				if reason == "" || strings.Contains(reason, "\n") || len(reason) > 300 {
					t.Errorf("reason %q: want one short line", r.body)
				}
			}
			if got := highWatermark(t, svc); got != hw {
				t.Fatalf("Kafka high watermark moved from %d to %d: the bad request wrote", hw, got)
			}
		})
	}
	if got := do(t, "GET", base+"bad", nil, ""); got.body != "seed" {
		t.Fatalf("stream bad = %q, want \"seed\"", got.body)
	}
	if got := do(t, "GET", base+"badjson", nil, ""); got.body != "[1]" {
		t.Fatalf("stream badjson = %q, want [1]", got.body)
	}
	if got := do(t, "HEAD", base+"bad", nil, ""); got.header.Get("Stream-Next-Offset") != head.header.Get("Stream-Next-Offset") {
		t.Fatalf("tail moved from %s to %s", head.header.Get("Stream-Next-Offset"), got.header.Get("Stream-Next-Offset"))
	}
	for _, n := range []string{"big", "newjson", "ttl", "fork", "etc/passwd"} {
		if r := do(t, "HEAD", base+n, nil, ""); r.status != 404 {
			t.Errorf("stream %q exists after bad requests (HEAD %d)", n, r.status)
		}
	}
}
