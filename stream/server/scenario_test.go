package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/service"
)

// A scenario is a sequence of HTTP requests against a fresh service, each
// with the exact answer it must get. Values a response returns (offsets)
// are saved under a name and used in later requests as ${name}, or
// ${name|transform}: lowerLast changes the last character (as a reader who
// edits an offset by hand), lowerPos the last digit of the Kafka-offset
// field, raisePos the same digit upwards, bare the first 33 characters.
// The files are testdata/stream/scenarios/*.json.
type scenario struct {
	Name  string `json:"name"`
	Steps []step `json:"steps"`
}

type step struct {
	Note    string            `json:"note"`
	Method  string            `json:"method"`
	Path    string            `json:"path"` // under /v1/stream/
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// Save maps a name to the response header whose value it keeps.
	Save map[string]string `json:"save"`
	// The expected answer: status, exact header values ("" = absent),
	// exact body or a substring of it.
	Status       int               `json:"status"`
	Want         map[string]string `json:"want"`
	WantBody     *string           `json:"wantBody"`
	BodyContains string            `json:"bodyContains"`
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?:\|([a-zA-Z]+))?\}`)

// expand replaces ${name} and ${name|transform} in s.
func expand(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		g := varRef.FindStringSubmatch(m)
		v, ok := vars[g[1]]
		if !ok {
			t.Fatalf("%s is not saved yet", m)
		}
		bump := func(i, d int) string {
			b := []byte(v)
			c := b[i]
			switch {
			case d < 0 && c != '0':
				b[i] = c - 1
			case d > 0 && c != '9' && c != 'f':
				b[i] = c + 1
			default:
				b[i] = c - byte(d)
			}
			return string(b)
		}
		switch g[2] {
		case "":
			return v
		case "lowerLast":
			return bump(len(v)-1, -1)
		case "lowerPos":
			return bump(32, -1)
		case "raisePos":
			return bump(32, +1)
		case "bare":
			return v[:33]
		}
		t.Fatalf("unknown transform in %s", m)
		return ""
	})
}

// TestScenarios runs every scenario file.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../../testdata/stream/scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	svc := start(t, t.TempDir(), func(c *service.Config) { c.Server.SSEMaxDuration = time.Second })
	defer stop(svc)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var scs []scenario
		if err := json.Unmarshal(raw, &scs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, sc := range scs {
			t.Run(strings.TrimSuffix(filepath.Base(f), ".json")+"/"+sc.Name, func(t *testing.T) {
				runScenario(t, svc, sc)
			})
		}
	}
}

func runScenario(t *testing.T, svc *service.Service, sc scenario) {
	// Stream names are unique per scenario: ${run} is its prefix.
	vars := map[string]string{"run": strings.NewReplacer(" ", "-", "/", "-").Replace(sc.Name)}
	for i, st := range sc.Steps {
		h := map[string]string{}
		for k, v := range st.Headers {
			h[k] = expand(t, v, vars)
		}
		url := svc.URL + "/v1/stream/" + expand(t, st.Path, vars)
		r := do(t, st.Method, url, h, expand(t, st.Body, vars))
		where := func() string {
			return fmt.Sprintf("%s %s (step %d: %s)", st.Method, expand(t, st.Path, vars), i+1, st.Note)
		}
		if r.status != st.Status {
			t.Fatalf("%s: status %d, want %d; body %q", where(), r.status, st.Status, r.body)
		}
		for k, want := range st.Want {
			want = expand(t, want, vars)
			if got := r.header.Get(k); got != want {
				t.Fatalf("%s: %s = %q, want %q", where(), k, got, want)
			}
			if want == "" && len(r.header.Values(k)) > 0 {
				t.Fatalf("%s: %s present (%q), want absent", where(), k, r.header.Values(k))
			}
		}
		if st.WantBody != nil && r.body != expand(t, *st.WantBody, vars) {
			t.Fatalf("%s: body %q, want %q", where(), r.body, expand(t, *st.WantBody, vars))
		}
		if st.BodyContains != "" && !strings.Contains(r.body, expand(t, st.BodyContains, vars)) {
			t.Fatalf("%s: body %q, want it to contain %q", where(), r.body, st.BodyContains)
		}
		for name, header := range st.Save {
			v := r.header.Get(header)
			if v == "" {
				t.Fatalf("%s: no %s to save as %s", where(), header, name)
			}
			vars[name] = v
		}
	}
}
