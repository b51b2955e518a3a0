package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// log read --follow --offset now, stopped before anything was appended,
// saved "now" in --offset-file: the help's resume recipe (--offset "$(cat
// next)") then started from the tail of that later moment and skipped what
// was appended in between. It now saves the tail "now" stood for, and the
// resumed read returns exactly the messages appended while it was stopped.
func TestLogReadNowSavesARealOffset(t *testing.T) {
	url := startLogServe(t)
	post := func(seq, body string) {
		req, _ := http.NewRequest("POST", url+"/v1/stream/s", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Producer-Id", "s")
		req.Header.Set("Producer-Epoch", "0")
		req.Header.Set("Producer-Seq", seq)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("append %s: %v %v", body, err, res)
		}
		res.Body.Close()
	}
	req, _ := http.NewRequest("PUT", url+"/v1/stream/s", nil)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 201 {
		t.Fatalf("create: %v %v", err, res)
	}
	post("0", `{"n":0}`)
	next := filepath.Join(t.TempDir(), "next")
	cmd := exec.Command(forklabBin, "log", "read", "--log", url, "--stream", "s", "--follow", "--offset", "now", "--offset-file", next)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // long-polling at the tail
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stopped follower: %v: %s", err, stderr.String())
	}
	saved, err := os.ReadFile(next)
	if err != nil {
		t.Fatal(err)
	}
	offset := strings.TrimSpace(string(saved))
	if offset == "now" || !strings.HasPrefix(offset, "0000000000000000_") {
		t.Fatalf("--offset-file holds %q, want the tail's offset", offset)
	}
	post("1", `{"n":1}`) // appended while the follower is stopped
	got := mustRun(t, "log", "read", "--log", url, "--stream", "s", "--offset", offset)
	if got != "{\"n\":1}\n" {
		t.Errorf("resumed from %s: %q, want the one message appended meanwhile", offset, got)
	}
}
