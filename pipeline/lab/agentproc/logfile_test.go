package agentproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/caplog"
)

// An agent writing to its stderr without pause (issue 25 F: 2.8 GB in
// agent-1.log in 25 s) fills its log only up to the cap: the file is
// rotated at LogMaxMB MiB and LogBackups rotated files are kept, so 36 MiB
// written leave at most 30 MiB, the newest lines in agent-1.log.
func TestAgentLogIsCappedAndRotated(t *testing.T) {
	def, inst, _ := openQuirky(t, map[string]string{"QUIRK_STDERR_MB": "12"}, 0, nil)
	dir := def.pool.cfg.LogDir
	starts(t, def, inst, 0, 1, 2)
	def.Close()
	var files []os.DirEntry
	deadline := time.Now().Add(10 * time.Second)
	for {
		files, _ = os.ReadDir(dir)
		// lumberjack removes the oldest backup in a goroutine of its own.
		if len(files) <= LogBackups+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(files) != LogBackups+1 {
		t.Fatalf("%s holds %d files, want agent-1.log and %d rotated ones: %v", dir, len(files), LogBackups, files)
	}
	var total int64
	for _, f := range files {
		fi, _ := f.Info()
		if fi.Size() > LogMaxMB<<20 {
			t.Errorf("%s: %d bytes, over the cap of %d MiB", f.Name(), fi.Size(), LogMaxMB)
		}
		if f.Name() != "agent-1.log" && !(strings.HasPrefix(f.Name(), "agent-1-") && strings.HasSuffix(f.Name(), ".log")) {
			t.Errorf("unexpected file %s", f.Name())
		}
		total += fi.Size()
	}
	if total > caplog.MaxBytes {
		t.Fatalf("the logs take %d bytes, over %d", total, caplog.MaxBytes)
	}
	b, err := os.ReadFile(filepath.Join(dir, "agent-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	last := b[bytes.LastIndexByte(b[:len(b)-1], '\n')+1:]
	if !bytes.HasPrefix(last, []byte("spew 2 ")) {
		t.Fatalf("agent-1.log ends with %.40q, want the last line written (seed 2's)", last)
	}
}

// A sweep's agent processes start before it knows its directory; with
// HoldStderr what they write meanwhile stays off forklab's own stderr
// (issue 25 F: an agent's lines reached it despite -q) and goes to
// agent-1.log once SetLogDir names it: all of it up to HeldBytes, the
// latest HeldBytes after a line saying how much came before.
func TestHeldStderrGoesToTheLogFile(t *testing.T) {
	text := "init line " + strings.Repeat("x", 80)
	for _, lines := range []int{200, 2000} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		saved := os.Stderr
		os.Stderr = w
		def, err := Open(context.Background(), Config{HoldStderr: true, Command: quirky(t, map[string]string{
			"QUIRK_INIT_STDERR": text, "QUIRK_INIT_STDERR_LINES": fmt.Sprint(lines)})})
		if err != nil {
			os.Stderr = saved
			t.Fatal(err)
		}
		logs := t.TempDir()
		def.SetLogDir(logs)
		def.Close()
		os.Stderr = saved
		w.Close()
		var got bytes.Buffer
		got.ReadFrom(r)
		if got.Len() != 0 {
			t.Fatalf("%d lines: forklab's stderr got %.80q…", lines, got.String())
		}
		b, err := os.ReadFile(filepath.Join(logs, "agent-1.log"))
		if err != nil {
			t.Fatal(err)
		}
		header, rest, _ := bytes.Cut(b, []byte("\n"))
		var pid int
		if _, err := fmt.Sscanf(string(header), "--- forklab: agent process 1 (pid %d)", &pid); err != nil {
			t.Fatalf("%d lines: agent-1.log begins %q", lines, header)
		}
		// What quirky.py writes: its pid, then the lines.
		var all strings.Builder
		fmt.Fprintf(&all, "quirky: pid %d\n", pid)
		for i := range lines {
			fmt.Fprintf(&all, "%s %d\n", text, i)
		}
		want := all.String()
		if dropped := all.Len() - HeldBytes; dropped > 0 {
			want = fmt.Sprintf("--- forklab: the first %d bytes it wrote, before its log file was known, were dropped; the last %d follow\n", dropped, HeldBytes) + want[dropped:]
		}
		if string(rest) != want {
			t.Errorf("%d lines: agent-1.log after its header holds %d bytes (%.120q…), want %d (%.120q…)", lines, len(rest), rest, len(want), want)
		}
	}
}
