package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The first build needs a C compiler (DuckDB links through cgo; issue 26:
// with none, go build failed two minutes in with "cgo: C compiler …
// not found"): .ci/run installs gcc from Debian when it is missing, and
// make build says what is missing before it starts.
func TestCIInstallsWhatIsMissing(t *testing.T) {
	stubs := t.TempDir()
	stub := func(name string) {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"chromium", "kcat", "jq", "python3"} {
		stub(n)
	}
	packages := func(env ...string) string {
		t.Helper()
		cmd := exec.Command("/bin/bash", "../../.ci/debian-packages")
		cmd.Env = append([]string{"PATH=" + stubs}, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf(".ci/debian-packages: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := packages(); got != "gcc" {
		t.Errorf("without a C compiler .ci/debian-packages says %q, want gcc", got)
	}
	stub("gcc")
	if got := packages(); got != "" {
		t.Errorf("with every tool .ci/debian-packages says %q, want nothing", got)
	}
	if got := packages("CC=/nonexistent/gcc"); got != "gcc" {
		t.Errorf("with CC naming no compiler .ci/debian-packages says %q, want gcc", got)
	}
	if err := os.Remove(filepath.Join(stubs, "kcat")); err != nil {
		t.Fatal(err)
	}
	if got := packages(); got != "kcat" {
		t.Errorf("without kcat .ci/debian-packages says %q, want kcat", got)
	}
	run, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(run), "packages=$(.ci/debian-packages)") || !strings.Contains(string(run), "apt-get install -y $packages") {
		t.Error(".ci/run no longer installs what .ci/debian-packages prints")
	}
}

// make build without a C compiler stops at once and names what to
// install, instead of failing minutes into the build.
func TestMakeBuildNeedsCCompiler(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := filepath.Join(t.TempDir(), "forklab")
	cmd := exec.Command("make", "-s", "build", "BIN="+bin)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CC=/nonexistent/gcc", "MAKEFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs a C compiler, but '/nonexistent/gcc' is not on PATH: install gcc (Debian: apt-get install gcc) or set CC") {
		t.Errorf("make build with CC=/nonexistent/gcc: %v\n%s", err, out)
	}
	if _, err := os.Stat(bin); err == nil {
		t.Error("make build without a C compiler built a binary")
	}
}
