package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// exitKind is a kind of failure docs/exit-status.md gives one status.
type exitKind string

const (
	kindUsage   exitKind = "usage error"     // 2: a flag or argument that is wrong as typed
	kindMissing exitKind = "missing input"   // 2: a file, directory, world or stream that is not there
	kindDamaged exitKind = "damaged input"   // 2, or 4 for a results directory that does not match its manifest
	kindRuntime exitKind = "runtime failure" // 1: the input is fine, the run could not be done
)

// One exit-status policy, applied by every subcommand (issue 12 I,
// docs/exit-status.md): for each runnable command, a usage error, missing
// input, damaged input and a runtime failure each end with their status and
// a line of standard error "forklab: <why>". A command where a kind
// cannot happen says why in notApplicable; a new subcommand without either
// fails the test.
func TestExitStatusPolicy(t *testing.T) {
	finished := t.TempDir()
	mustRun(t, "sweep", "--seeds", "0:10", "--out", finished, "-q", "--overwrite")
	damaged := t.TempDir()
	mustRun(t, "sweep", "--seeds", "0:10", "--out", damaged, "-q", "--overwrite")
	if err := os.Truncate(filepath.Join(damaged, "pairs", "config_id=0", "fork_step=3", "part-000000.parquet"), 100); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	truncated := write("truncated.json", `{"checkpoint_version":2,"world":"coun`)
	garbageSpec := write("garbage.yaml", "seeds: [0, 10\nfork_at: {")
	badTokens := write("tokens.txt", "bogus line here\n")
	aFile := write("a-file", "x")
	missing := filepath.Join(files, "no-such")
	// A port something else holds, for the servers' runtime failure.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the parallel subtests, unlike a defer
	busyPort := busy.Addr().(*net.TCPAddr).Port
	busyAddr := busy.Addr().String()
	// A log with a stream that holds no session events.
	url := startLogServe(t)
	for _, r := range []struct{ method, body string }{{"PUT", ""}, {"POST", `{"type":"bogus"}`}} {
		req, _ := http.NewRequest(r.method, url+"/v1/stream/junk", strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode >= 300 {
			t.Fatalf("%s junk: %v %v", r.method, res, err)
		}
		res.Body.Close()
	}
	// And a text stream: not session events at all.
	if req, _ := http.NewRequest("PUT", url+"/v1/stream/plain", strings.NewReader("hello")); true {
		req.Header.Set("Content-Type", "text/plain")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 201 {
			t.Fatalf("PUT plain: %v %v", res, err)
		}
		res.Body.Close()
	}
	const down = "http://127.0.0.1:1" // nothing listens there
	const noKafka = "127.0.0.1:1"

	type tc struct {
		path string // the command path after "forklab"
		kind exitKind
		args []string
		code int
		want string // in stderr: what names the fault (a flag, a file), not the whole wording
	}
	cases := []tc{
		{"agent check", kindUsage, []string{"agent", "check", " "}, 2, "the agent command is empty"},
		{"agent check", kindMissing, []string{"agent", "check", "no-such-agent-command"}, 1, "1 of 12 checks failed"},
		{"agent check", kindDamaged, []string{"agent", "check", "echo not json"}, 1, "checks failed"},
		{"agent run", kindMissing, []string{"agent", "run", "--log", url, "--session", "no-such-session"}, 2, "session no-such-session does not exist; start it with --seed N"},
		{"agent run", kindDamaged, []string{"agent", "run", "--log", url, "--session", "junk"}, 2, `junk: cannot fold session: message 0: not a session event: unknown type "bogus"`},
		{"agent run", kindRuntime, []string{"agent", "run", "--log", down, "--session", "s", "--seed", "1", "--retry-for", "1s"}, 1, "the session log did not answer for 1s"},
		{"agent serve", kindMissing, []string{"agent", "serve", "--world", "chess"}, 2, `unknown world "chess"`},
		{"chaos", kindUsage, []string{"chaos", "--sessions", "0"}, 2, "--sessions"},
		{"chaos", kindMissing, []string{"chaos", "--world", "chess"}, 2, `unknown world "chess"`},
		{"checkpoint", kindUsage, []string{"checkpoint", "--seed", "0", "--fork-at", "0"}, 2, "[1, 1048576]"},
		{"checkpoint", kindMissing, []string{"checkpoint", "--seed", "0", "--world", "chess"}, 2, `unknown world "chess"`},
		{"db", kindMissing, []string{"db", missing}, 2, "does not exist or is not a directory"},
		{"db", kindDamaged, []string{"db", damaged}, 4, "does not match its manifest: pairs/config_id=0/fork_step=3/part-000000.parquet has 100 bytes"},
		{"fork", kindMissing, []string{"fork", "--checkpoint", missing, "--arm", "on"}, 2, "no such file or directory"},
		{"fork", kindMissing, []string{"fork", "--log", url, "--stream", "no-such-stream", "--offset", "now", "--arm", "on"}, 2, "404"},
		{"fork", kindDamaged, []string{"fork", "--checkpoint", truncated, "--arm", "on"}, 2, "JSON ends early"},
		{"fork", kindDamaged, []string{"fork", "--log", url, "--stream", "junk", "--offset", "now", "--arm", "on"}, 2, "cannot fold session"},
		{"fork", kindUsage, []string{"fork", "--log", url, "--stream", "junk", "--offset", "now", "--arm", "on", "--agent", forklabBin + " agent serve --world counter"}, 2, "agent world counter does not declare the fold capability"},
		{"fork", kindRuntime, []string{"fork", "--log", down, "--stream", "s", "--offset", "now", "--arm", "on", "--retry-for", "1s"}, 1, "the session log did not answer for 1s"},
		{"kafka serve", kindUsage, []string{"kafka", "serve", "--nodes", "0"}, 2, "--nodes"},
		{"kafka serve", kindRuntime, []string{"kafka", "serve", "--nodes", "1", "--ports", strconv.Itoa(busyPort)}, 1, "address already in use"},
		{"log bench", kindUsage, []string{"log", "bench", "--target", "bad"}, 2, `--target "bad": want NAME=http://host:port`},
		{"log bench", kindRuntime, []string{"log", "bench", "--target", "x=" + down, "--duration", "1s"}, 1, "connection refused"},
		{"log export", kindMissing, []string{"log", "export", "--log", url, "--stream", "no-such-stream", "--out", t.TempDir()}, 2, "stream no-such-stream does not exist (404)"},
		{"log export", kindDamaged, []string{"log", "export", "--log", url, "--stream", "plain", "--out", t.TempDir()}, 2, "stream plain is text/plain, not a JSON stream: its records are not session events; read it with forklab log read"},
		{"log export", kindRuntime, []string{"log", "export", "--log", down, "--stream", "s", "--out", t.TempDir()}, 1, "connection refused"},
		{"log read", kindMissing, []string{"log", "read", "--log", url, "--stream", "no-such-stream"}, 2, "stream no-such-stream does not exist (404)"},
		{"log read", kindDamaged, []string{"log", "read", "--log", url, "--stream", "junk", "--offset", "garbage"}, 2, `offset "garbage": malformed offset`},
		{"log read", kindRuntime, []string{"log", "read", "--log", down, "--stream", "s"}, 1, "connection refused"},
		{"log serve", kindMissing, []string{"log", "serve", "--token-file", missing, "--data-dir", t.TempDir()}, 2, "--token-file: open"},
		{"log serve", kindDamaged, []string{"log", "serve", "--token-file", badTokens, "--data-dir", t.TempDir()}, 2, `want "SCOPE TOKEN"`},
		{"log serve", kindRuntime, []string{"log", "serve", "--addr", busyAddr, "--data-dir", t.TempDir()}, 1, "address already in use"},
		{"log sink", kindUsage, []string{"log", "sink", "--out", aFile}, 2, "is a file; give a directory"},
		{"log sink", kindRuntime, []string{"log", "sink", "--out", t.TempDir(), "--brokers", noKafka, "--dial-timeout", "1s"}, 1, "Kafka at 127.0.0.1:1 did not answer within 1s (last: kafka.(*Client).Metadata: dial tcp 127.0.0.1:1: connect: connection refused)"},
		{"gate", kindUsage, []string{"gate", finished, "--max-harm-rate", "2"}, 2, "--max-harm-rate"},
		{"gate", kindUsage, []string{"gate", finished}, 2, "no condition for arm on"},
		{"gate", kindMissing, []string{"gate", missing, "--max-harm-rate", "0.1"}, 2, "does not exist or is not a directory"},
		{"gate", kindMissing, []string{"gate", finished, "--spec", missing + ".yaml"}, 2, "no such file or directory"},
		{"gate", kindDamaged, []string{"gate", damaged, "--max-harm-rate", "0.1"}, 4, "does not match its manifest"},
		{"gate", kindDamaged, []string{"gate", finished, "--spec", garbageSpec}, 2, "spec"},
		{"policy", kindMissing, []string{"policy", missing}, 2, "does not exist or is not a directory"},
		{"policy", kindDamaged, []string{"policy", damaged}, 4, "does not match its manifest"},
		{"report", kindMissing, []string{"report", missing}, 2, "does not exist or is not a directory"},
		{"report", kindDamaged, []string{"report", damaged}, 4, "does not match its manifest"},
		{"show", kindUsage, []string{"show", finished, "--seed", "10"}, 2, "seed 10 is not in the sweep: its seeds are 0:10"},
		{"show", kindMissing, []string{"show", missing, "--seed", "0"}, 2, "does not exist or is not a directory"},
		{"show", kindDamaged, []string{"show", damaged, "--seed", "0"}, 4, "does not match its manifest"},
		{"sql", kindUsage, []string{"sql", finished, "SELEC 1"}, 2, "^"},
		{"sql", kindMissing, []string{"sql", missing, "SELECT 1"}, 2, "does not exist or is not a directory"},
		{"sql", kindDamaged, []string{"sql", damaged, "SELECT 1"}, 4, "does not match its manifest"},
		{"sweep", kindUsage, []string{"sweep", "--seeds", "0-300", "--out", t.TempDir()}, 2, "--seeds: seed range \"0-300\" is malformed"},
		{"sweep", kindMissing, []string{"sweep", "--spec", missing + ".yaml", "--out", t.TempDir()}, 2, "no such file or directory"},
		{"sweep", kindDamaged, []string{"sweep", "--spec", garbageSpec, "--out", t.TempDir()}, 2, "spec"},
		{"sweep", kindRuntime, []string{"sweep", "--from-log", down, "--retry-for", "1s", "--out", filepath.Join(t.TempDir(), "o")}, 1, "the session log did not answer for 1s"},
		{"sweep", kindRuntime, []string{"sweep", "--distributed", "--brokers", noKafka, "--dial-timeout", "1s", "--out", filepath.Join(t.TempDir(), "o")}, 1, "connection refused"},
		{"sweep", kindMissing, []string{"sweep", "--runs", missing + ".jsonl", "--out", t.TempDir()}, 2, "no such file or directory"},
		{"sweep", kindDamaged, []string{"sweep", "--runs", "../../testdata/runs/bad/duplicate-run-id.jsonl", "--out", t.TempDir()}, 2, `run_id "r0" is that of line 1 too`},
		{"sweep", kindDamaged, []string{"sweep", "--runs", url + "/v1/stream/junk", "--out", t.TempDir()}, 2, "stream junk: is not a session"},
		{"sweep", kindRuntime, []string{"sweep", "--runs", down + "/v1/stream/prod/", "--out", filepath.Join(t.TempDir(), "o")}, 1, "the session log did not answer"},
		{"sweep finalize", kindMissing, []string{"sweep", "finalize", missing}, 2, "nothing to finalize"},
		{"sweep finalize", kindDamaged, []string{"sweep", "finalize", damaged}, 2, "nothing to finalize"},
		{"verify", kindMissing, []string{"verify", missing}, 2, "does not exist or is not a directory"},
		{"verify", kindDamaged, []string{"verify", damaged}, 4, "does not match its manifest"},
		{"worker", kindUsage, []string{"worker", "--parallel", "-1", "--brokers", noKafka}, 2, "--parallel"},
		{"worker", kindRuntime, []string{"worker", "--brokers", noKafka, "--dial-timeout", "1s"}, 1, "connection refused"},
		{"worlds", kindMissing, []string{"worlds", "chess"}, 2, `unknown world "chess"`},
	}
	notApplicable := map[string]map[exitKind]string{
		"agent check":    {kindRuntime: "the agent is the input it checks: anything the agent does wrong is a failed check (1)"},
		"agent serve":    {kindDamaged: "a malformed request is answered with its JSON-RPC error, and the server goes on", kindRuntime: "it serves stdin and stdout; nothing else to fail"},
		"chaos":          {kindDamaged: "it reads no input", kindRuntime: "its failed checks are its verdict (1), covered by the chaos tests"},
		"checkpoint":     {kindDamaged: "it reads no input", kindRuntime: "it writes only to stdout"},
		"db":             {kindUsage: "only the generated unknown-flag case: DIR is its only input", kindRuntime: "as root in the tests, no directory is unwritable"},
		"fork":           {kindUsage: "only the generated unknown-flag case"},
		"kafka serve":    {kindMissing: "it reads no input but its flags", kindDamaged: "it reads no input but its flags"},
		"log bench":      {kindMissing: "it reads no input but its flags", kindDamaged: "it reads no input but its flags"},
		"log export":     {kindUsage: "only the generated unknown-flag case"},
		"log read":       {kindUsage: "only the generated unknown-flag case"},
		"log serve":      {kindUsage: "only the generated unknown-flag case"},
		"log sink":       {kindMissing: "an --out that does not exist is created", kindDamaged: "its state is checked by the sink's own tests (pipeline/sessions/sink)"},
		"gate":           {kindRuntime: "it reads a local directory (its --junit file is written as every output is; a condition that fails is 1 too, by design: docs/gate.md)"},
		"policy":         {kindUsage: "only the generated unknown-flag case; the bad-input test has its range checks", kindRuntime: "it reads a local directory; nothing else to fail"},
		"report":         {kindUsage: "only the generated unknown-flag case", kindRuntime: "it reads a local directory; nothing else to fail"},
		"show":           {kindRuntime: "it reads a local directory; nothing else to fail"},
		"sql":            {kindRuntime: "it reads a local directory; nothing else to fail"},
		"sweep":          {},
		"sweep finalize": {kindUsage: "only the generated unknown-flag case", kindRuntime: "it renames within a local directory; nothing else to fail"},
		"verify":         {kindUsage: "only the generated unknown-flag case", kindRuntime: "it reads a local directory; nothing else to fail"},
		"worker":         {kindMissing: "it reads no input but its flags", kindDamaged: "a unit's damaged record is the scale-out tests' (pipeline/lab/scaleout)"},
		"worlds":         {kindUsage: "only the generated unknown-flag case", kindDamaged: "it reads no input", kindRuntime: "it writes only to stdout"},
		"agent run":      {kindUsage: "only the generated unknown-flag case"},
		"version":        {kindMissing: "it reads no input", kindDamaged: "it reads no input", kindRuntime: "it writes only to stdout"},
	}

	// Every runnable command: the usage error every command shares, and
	// each kind covered by a case or said not to apply.
	paths := []string{}
	for _, sub := range userCommands(rootCmd) {
		if sub.Runnable() {
			paths = append(paths, strings.TrimPrefix(sub.CommandPath(), "forklab "))
		}
	}
	if len(paths) < 20 {
		t.Fatalf("walked only %d commands: %v", len(paths), paths)
	}
	for _, p := range paths {
		cases = append(cases, tc{p, kindUsage, append(strings.Fields(p), "--no-such-flag"), 2,
			"unknown flag: --no-such-flag (see 'forklab " + p + " --help')"})
		for _, k := range []exitKind{kindMissing, kindDamaged, kindRuntime} {
			covered := notApplicable[p][k] != ""
			for _, c := range cases {
				covered = covered || c.path == p && c.kind == k
			}
			if !covered {
				t.Errorf("forklab %s: no %s case and no reason it cannot happen", p, k)
			}
		}
	}
	for _, c := range cases {
		t.Run(c.path+"/"+string(c.kind)+"/"+c.want, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := run(t, c.args...)
			if code != c.code || !strings.Contains("\n"+stderr, "\nforklab: ") || !strings.Contains(stderr, c.want) {
				t.Errorf("forklab %s: exit %d, want %d (%s), and a line \"forklab: …\" with %q; stderr:\n%s",
					strings.Join(c.args, " "), code, c.code, c.kind, c.want, stderr)
			}
		})
	}
}
