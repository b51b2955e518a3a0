package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's sink recipes, as a user types them: the log with a fixed
// Kafka port, a one-shot sink into a results directory (run twice: nothing
// the second time), forklab db and sql over the events, then a sink
// following the log that a query sees grow without forklab db again, and
// what the sink refuses.
func TestSinkRecipes(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	kl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kafka := kl.Addr().String()
	l.Close()
	kl.Close()
	serve := exec.Command(forklabBin, "log", "serve", "--addr", addr, "--data-dir", t.TempDir(), "--quiet",
		"--kafka-port", strings.TrimPrefix(kafka, "127.0.0.1:"))
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	url := "http://" + addr
	for i := 0; ; i++ {
		if res, err := http.Get(url + "/v1/stream/"); err == nil {
			res.Body.Close()
			break
		}
		if i > 600 {
			t.Fatal("log serve did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustRun(t, "agent", "run", "--log", url, "--session", "demo/s1", "--seed", "1")
	mustRun(t, "agent", "run", "--log", url, "--session", "demo/s2", "--seed", "2")

	dir := t.TempDir()
	mustRun(t, "sweep", "--seeds", "0:10", "--out", dir, "-q", "--overwrite")
	_, errs, code := run(t, "log", "sink", "--out", dir, "--brokers", kafka, "--prefix", "demo/")
	if code != 0 || !strings.Contains(errs, "34 events from 36 records in 1 file under "+filepath.Join(dir, "sink")) {
		t.Fatalf("nightly run: exit %d, %q", code, errs)
	}
	_, errs, code = run(t, "log", "sink", "--out", dir, "--brokers", kafka, "--prefix", "demo/")
	if code != 0 || !strings.Contains(errs, "nothing new: "+filepath.Join(dir, "sink")+" is up to date with forklab.streams (partition 0 at offset 36)") {
		t.Fatalf("second nightly run: exit %d, %q", code, errs)
	}
	mustRun(t, "db", dir)
	count := func() string {
		return strings.TrimSpace(mustRun(t, "sql", dir, "SELECT count(DISTINCT stream) || ' ' || count(*) FROM events", "--format", "csv"))
	}
	if got := count(); !strings.HasSuffix(got, "\n2 34") {
		t.Fatalf("events after the nightly run: %q", got)
	}

	// Follow: a new session shows in the events view as the sink rotates.
	follow := exec.Command(forklabBin, "log", "sink", "--out", dir, "--brokers", kafka, "--prefix", "demo/",
		"--follow", "--rotate-interval", "200ms")
	var ferr bytes.Buffer
	follow.Stderr = &ferr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "agent", "run", "--log", url, "--session", "demo/s3", "--seed", "3")
	for i := 0; !strings.HasSuffix(count(), "\n3 51"); i++ {
		if i > 100 {
			t.Fatalf("the followed session did not show: %q\n%s", count(), ferr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	follow.Process.Signal(syscall.SIGTERM)
	if err := follow.Wait(); err != nil {
		t.Fatalf("follow stopped with %v:\n%s", err, ferr.String())
	}

	// Refusals: exit 2, one line, nothing written.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", dir, "--prefix", "other/"}, `holds the streams under --prefix "demo/"; a sink directory keeps one selection: use another --out for --prefix "other/"`},
		{[]string{"--out", dir, "--rotate-records", "0"}, `invalid argument "0" for "--rotate-records" flag: must be an integer in [1, 10000000]`},
		{[]string{"--out", dir, "--follow", "--rotate-interval", "0s"}, `invalid argument "0s" for "--rotate-interval" flag: must be a duration in [1ms, 24h]`},
		{[]string{"--prefix", "demo/"}, "--out DIR is required"},
		{[]string{"--out", file}, "is a file; give a directory"},
		{[]string{"--out", dir, "--prefix", "demo/", "--topic", "nope"}, "has no topic nope"},
	} {
		_, errs, code := run(t, append([]string{"log", "sink", "--brokers", kafka}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("sink %v: exit %d, %q; want exit 2 with %q", tc.args, code, errs, tc.want)
		}
	}
	if got := count(); !strings.HasSuffix(got, "\n3 51") {
		t.Fatalf("a refused run changed the events: %q", got)
	}

	// The sink's files and log export's belong to the sweep of the
	// results directory they were written into: replaced, it drops them
	// (issue 12 E).
	mustRun(t, "log", "export", "--log", url, "--stream", "demo/s1", "--out", dir)
	if b, _ := os.ReadFile(filepath.Join(dir, ".forklab-derived")); string(b) != "sink\n" {
		t.Fatalf(".forklab-derived: %q", b)
	}
	mustRun(t, "sweep", "--seeds", "0:5", "--out", dir, "-q", "--overwrite")
	for _, gone := range []string{"sink", "events", ".forklab-derived"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s survived the overwrite of its sweep", gone)
		}
	}
}
