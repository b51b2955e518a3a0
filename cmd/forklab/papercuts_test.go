package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The paper cuts of issue 26 (testdata/cli/paper-cuts.txt), each a
// command run as a user types it: forklab worlds naming an intervention
// twice, no forklab version, cobra's "accepts 1 arg(s), received 0",
// "1 units", policy's --fork-step where every other command says
// --fork-at, commands that needed the log and did not say to start it
// (agent run retried a log nobody started for two minutes), and log serve
// starting a broker and creating its data directory on a taken port.
func TestPaperCuts(t *testing.T) {
	tmp := t.TempDir()
	dir, one := filepath.Join(tmp, "dir"), filepath.Join(tmp, "one")
	mustRun(t, "sweep", "-q", "--seeds", "0:300", "--out", dir)
	mustRun(t, "sweep", "-q", "--seeds", "0:1", "--out", one)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + down.Addr().String()
	down.Close() // nothing listens there now
	r := strings.NewReplacer("{dir}", dir, "{one}", one, "{tmp}", tmp, "{down}", downURL,
		"{busy}", busy.Addr().String(), "{busyport}", strconv.Itoa(busy.Addr().(*net.TCPAddr).Port))
	for _, c := range cliCases(t, "paper-cuts.txt", 4) {
		code, check, text, argText := c[0], c[1], r.Replace(c[2]), r.Replace(c[3])
		args, err := shellWords(argText)
		if err != nil {
			t.Fatal(err)
		}
		// Bounded, so that a command that retries or serves for ever
		// fails here instead of hanging the test (a log command that
		// fails fast ends in well under a second).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, forklabBin, args...)
		cmd.Dir = tmp
		out, err := cmd.CombinedOutput()
		cancel()
		got := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			got = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("forklab %s: %v", argText, err)
		}
		if strconv.Itoa(got) != code {
			t.Errorf("forklab %s: exit %d, want %s\n%s", argText, got, code, out)
		}
		switch check {
		case "has":
			if !strings.Contains(string(out), text) {
				t.Errorf("forklab %s printed\n%s\nwant it to hold %q", argText, out, text)
			}
		case "lacks":
			if strings.Contains(string(out), text) {
				t.Errorf("forklab %s printed\n%s\nwhich holds %q", argText, out, text)
			}
		case "absent":
			if _, err := os.Stat(text); err == nil {
				t.Errorf("forklab %s created %s", argText, text)
			}
		default:
			t.Fatalf("testdata/cli/paper-cuts.txt: unknown check %q", check)
		}
	}
}

// Every command answers wrong arguments in words with its usage line:
// too many to any command, none to a command that needs some; never
// cobra's "arg(s)" or "unknown command" for a command's own arguments.
func TestArgumentErrorsSayUsage(t *testing.T) {
	n := 0
	for _, sub := range userCommands(rootCmd) {
		if !sub.Runnable() || strings.Contains(sub.Use, "...") {
			continue // forklab worlds [NAME...] takes any number
		}
		path := strings.Fields(strings.TrimPrefix(sub.CommandPath(), "forklab "))
		tries := [][]string{append(append([]string{}, path...), "x1", "x2", "x3")}
		if required(sub) != "an argument" { // it takes DIR, or 'CMD ARGS'
			tries = append(tries, path)
		}
		for _, args := range tries {
			n++
			_, stderr, code := run(t, args...)
			if code != 2 || !strings.Contains(stderr, "usage: "+sub.UseLine()) || strings.Contains(stderr, "arg(s)") ||
				strings.Contains(stderr, "unknown command") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("forklab %s: exit %d, %q; want 2 and one line with %q", strings.Join(args, " "), code, stderr, "usage: "+sub.UseLine())
			}
		}
	}
	if n < 25 {
		t.Fatalf("tried only %d commands", n)
	}
}
