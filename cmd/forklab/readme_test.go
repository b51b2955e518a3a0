package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README as a newcomer follows it (issue 12 I), then every page of
// docs/ (issue 26: depth moved there stays tested): TestREADME copies the
// repository as git has it (tracked files and new ones not ignored; no
// bin/, out/ or node_modules/), then runs every shell block of README.md,
// then of each docs/*.md in name order, as written, one bash session per
// section (## or ###) started at the copy's root, as a reader with a new
// terminal per section would. A block's commands run with set -o
// pipefail; any command that fails fails the test, naming it. A ```text
// block right after a shell block (blank lines between at most) is what
// that block prints: its lines must appear in the block's output (stdout
// and stderr, as a terminal shows them), in order, each exactly, where "…"
// stands for any text within a line and a line of "…" alone for lines left
// out.
//
// Markdown comments right before a block tell the test what a reader
// does that the text alone does not say, each with its reason:
//
//	<!-- readme-test: skip: REASON -->                 not run (a cluster, say)
//	<!-- readme-test: skip-line "PREFIX": REASON -->   the block's lines starting with PREFIX are not run
//	<!-- readme-test: every-section: REASON -->        also run at the start of every later section's shell, in its document
//	<!-- readme-test: interrupt-after 5s: REASON -->   a one-line block the reader stops with ^C; it must exit 0 or 130
//	<!-- readme-test: needs TOOL…: REASON -->          commands the block needs that Go does not bring
//
// A block that needs a missing tool is skipped and said so, unless
// FORKLAB_REQUIRE_TOOLS is set (.ci/run sets it). After a line that
// starts `forklab log serve` in the background the test waits for its
// "listening on" line, as a reader does before typing on; each section's
// background jobs are stopped (SIGTERM, then SIGKILL) when it ends. The
// session log's blocks use its default ports, 4437 and 9092: the test
// takes a lock so two runs of it on one machine take turns, and fails
// if anything else holds those ports. Log data goes to a temporary
// $XDG_DATA_HOME. At the end, every file the blocks wrote must be where
// git ignores it — bin/, out*/, tour/ (the scratch directory the README
// names), node_modules/ — so that a reader's walkthrough leaves the clone
// clean (issue 26: it left lab/, big/, cp.json, … in the root). -short
// skips the test.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the README's and docs/'s blocks are not run")
	}
	start := time.Now()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	type doc struct {
		name     string
		sections []*mdSection
	}
	var all []doc
	for _, path := range append([]string{"../../README.md"}, docs...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path, "../../")
		sections, err := parseDoc(name, string(text))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, doc{name, sections})
	}
	if len(all) < 10 {
		t.Fatalf("read only %d documents", len(all))
	}
	unlock := readmeLock(t)
	defer unlock()
	for _, port := range []string{"4437", "9092"} {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Fatalf("port %s is taken (%v): the README's session log uses it; stop whatever holds it", port, err)
		}
		l.Close()
	}
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "forklab")
	copied := copyRepo(t, "../..", repo)
	env := readmeEnv(tmp)
	requireTools := os.Getenv("FORKLAB_REQUIRE_TOOLS") != ""

	ran, skipped := 0, []string{}
	for _, d := range all {
		var preamble []string
		for _, sec := range d.sections {
			var blocks []*mdBlock
			for _, b := range sec.Blocks {
				if !b.shell() {
					continue
				}
				where := fmt.Sprintf("%s:%d (%s)", d.name, b.Line, sec.Title)
				if b.Skip != "" {
					skipped = append(skipped, fmt.Sprintf("%s: %s", where, b.Skip))
					continue
				}
				if missing := missingTools(b.Needs); len(missing) > 0 {
					msg := fmt.Sprintf("%s needs %s, not installed", where, strings.Join(missing, ", "))
					if requireTools {
						t.Errorf("%s and FORKLAB_REQUIRE_TOOLS is set", msg)
					} else {
						t.Logf("SKIPPED %s", msg)
						skipped = append(skipped, msg)
					}
					continue
				}
				for i, p := range b.SkipLines {
					skipped = append(skipped, fmt.Sprintf("%s, its line %q: %s", where, p, b.SkipLineWhy[i]))
				}
				blocks = append(blocks, b)
			}
			if len(blocks) == 0 {
				continue
			}
			began := time.Now()
			sh := startShell(t, repo, env, tmp)
			for _, p := range preamble {
				sh.source(t, "preamble", p, 30*time.Second)
			}
			for _, b := range blocks {
				out, errs := sh.source(t, fmt.Sprintf("b%d", b.Line), b.script(), 4*time.Minute)
				ran++
				if errs != "" {
					t.Errorf("%s:%d (%s): %s\n--- the block printed:\n%s", d.name, b.Line, sec.Title, strings.TrimSpace(errs), out)
					continue
				}
				if b.Output != nil {
					if msg := matchOutput(b.Output.Text, out); msg != "" {
						t.Errorf("%s:%d (%s): the output block at line %d does not match: %s\n--- the block printed:\n%s",
							d.name, b.Line, sec.Title, b.Output.Line, msg, out)
					}
				}
				if b.EverySection {
					preamble = append(preamble, b.Text)
				}
			}
			sh.stop(t)
			t.Logf("%-60s %d blocks in %s", d.name+" · "+sec.Title, len(blocks), time.Since(began).Round(100*time.Millisecond))
			if t.Failed() && os.Getenv("FORKLAB_README_KEEP_GOING") == "" {
				t.Fatalf("stopped after %s, section %q (FORKLAB_README_KEEP_GOING=1 runs the rest)", d.name, sec.Title)
			}
		}
	}
	for _, s := range skipped {
		t.Logf("not run: %s", s)
	}
	for _, f := range strayFiles(t, repo, copied) {
		t.Errorf("the blocks left %s, which git does not ignore: write it under tour/ (the scratch directory the README names)", f)
	}
	t.Logf("README and docs: %d shell blocks run in %s; %d not run", ran, time.Since(start).Round(time.Second), len(skipped))
}

// strayFiles lists the files under repo that the blocks wrote where git
// would see them: not one of the copied files, and not under bin/, out/,
// out-*/, tour/, a node_modules/ or a __pycache__/ (.gitignore: Python
// writes one beside the SDK's modules when an example agent imports them).
func strayFiles(t *testing.T, repo string, copied map[string]bool) []string {
	t.Helper()
	var stray []string
	err := filepath.WalkDir(repo, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		rel = filepath.ToSlash(rel)
		top, _, _ := strings.Cut(rel, "/")
		switch {
		case rel == ".":
			return nil
		case top == "bin" || top == "out" || strings.HasPrefix(top, "out-") || top == "tour" || e.Name() == "node_modules" || e.Name() == "__pycache__":
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case e.IsDir():
			return nil
		case !copied[rel]:
			stray = append(stray, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return stray
}

// mdSection is a ## or ### section of the README and its fenced blocks.
type mdSection struct {
	Title  string
	Blocks []*mdBlock
}

// mdBlock is a fenced code block: its language, the line of its opening
// fence, its text, the output block that follows it, and what the
// readme-test comments before it say.
type mdBlock struct {
	Lang, Text string
	Line       int
	Output     *mdBlock

	Skip            string   // the reason it is not run
	SkipLines       []string // prefixes of lines not run
	SkipLineWhy     []string // and why
	EverySection    bool
	InterruptAfter  time.Duration
	Needs           []string
	readmeDirective []string
}

func (b *mdBlock) shell() bool {
	switch b.Lang {
	case "sh", "bash", "shell":
		return true
	}
	return false
}

// serveRe finds a line that starts the session log in the background.
var serveRe = regexp.MustCompile(`^\S*forklab log serve\b.*&\s*(#.*)?$`)

// script is the block as the test runs it: lines skipped by skip-line
// become no-ops, a server started in the background is waited for, an
// interrupted command is stopped with SIGINT.
func (b *mdBlock) script() string {
	if b.InterruptAfter > 0 {
		cmd := strings.TrimSpace(b.Text)
		return fmt.Sprintf("if timeout --preserve-status -s INT %.3f %s\nthen :\nelse __readme_status=$?; [ $__readme_status = 130 ] || __readme_fail $__readme_status %s\nfi\n",
			b.InterruptAfter.Seconds(), cmd, shellQuote(cmd))
	}
	var s strings.Builder
	servers := 0
	for _, line := range strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n") {
		skip := false
		for _, p := range b.SkipLines {
			if strings.HasPrefix(line, p) {
				skip = true
			}
		}
		if skip {
			s.WriteString(": skipped by the README test\n")
			continue
		}
		s.WriteString(line + "\n")
		if serveRe.MatchString(line) {
			servers++
			fmt.Fprintf(&s, "__readme_wait_listening %d\n", servers)
		}
	}
	return s.String()
}

var (
	fenceRe     = regexp.MustCompile("^```\\s*([^`\\s]*)")
	headingRe   = regexp.MustCompile(`^(##|###) (.+)$`)
	directiveRe = regexp.MustCompile(`^<!-- readme-test: (.*) -->$`)
	skipLineRe  = regexp.MustCompile(`^skip-line "([^"]+)": (.+)$`)
	interruptRe = regexp.MustCompile(`^interrupt-after (\S+): (.+)$`)
	needsRe     = regexp.MustCompile(`^needs ([^:]+): (.+)$`)
)

// parseDoc splits a document (README.md, a page of docs/), named name in
// its errors, into sections and blocks and reads the readme-test comments.
// Every block must name its language, and every comment must come right
// before a shell block and give a reason.
func parseDoc(name, text string) ([]*mdSection, error) {
	sec := &mdSection{Title: "(top)"}
	sections := []*mdSection{sec}
	var pending []string // directives waiting for their block
	// last is the last block, while only blank lines and at most one
	// line of prose ending in ":" ("It prints:") followed it.
	var last *mdBlock
	intro := false
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			b := &mdBlock{Lang: m[1], Line: i + 1}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: the block is never closed", name, b.Line)
			}
			b.Text = strings.Join(body, "\n") + "\n"
			switch b.Lang {
			case "":
				return nil, fmt.Errorf("%s:%d: a block without a language: sh for commands, text for what they print", name, b.Line)
			case "sh", "bash", "shell", "text", "cron", "sql", "yaml", "json", "python", "js", "go", "dockerfile", "xml":
			default:
				return nil, fmt.Errorf("%s:%d: unknown block language %q", name, b.Line, b.Lang)
			}
			if err := b.apply(name, pending); err != nil {
				return nil, err
			}
			pending = nil
			intro = false
			if b.Lang == "text" && last != nil && last.shell() && last.Output == nil {
				last.Output = b
			} else {
				sec.Blocks = append(sec.Blocks, b)
			}
			last = b
			continue
		}
		if m := directiveRe.FindStringSubmatch(line); m != nil {
			pending = append(pending, m[1])
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "<!--") && strings.Contains(line, "readme-test") {
			return nil, fmt.Errorf("%s:%d: a readme-test comment must read <!-- readme-test: … --> on a line of its own", name, i+1)
		}
		if strings.TrimSpace(line) != "" {
			if len(pending) > 0 {
				return nil, fmt.Errorf("%s:%d: readme-test comment %q is not right before a block", name, i+1, pending[0])
			}
			if !intro && strings.HasSuffix(strings.TrimSpace(line), ":") && !strings.HasPrefix(line, "#") {
				intro = true
			} else {
				last = nil
			}
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			sec = &mdSection{Title: m[2]}
			sections = append(sections, sec)
		}
	}
	return sections, nil
}

// apply reads the readme-test comments before b.
func (b *mdBlock) apply(name string, directives []string) error {
	for _, d := range directives {
		if !b.shell() {
			return fmt.Errorf("%s:%d: readme-test comment %q on a %s block, not a shell block", name, b.Line, d, b.Lang)
		}
		b.readmeDirective = append(b.readmeDirective, d)
		switch {
		case strings.HasPrefix(d, "skip: "):
			b.Skip = strings.TrimSpace(strings.TrimPrefix(d, "skip: "))
		case skipLineRe.MatchString(d):
			p := skipLineRe.FindStringSubmatch(d)[1]
			if !strings.Contains("\n"+b.Text, "\n"+p) {
				return fmt.Errorf("%s:%d: skip-line %q: no line of the block starts so", name, b.Line, p)
			}
			b.SkipLines = append(b.SkipLines, p)
			b.SkipLineWhy = append(b.SkipLineWhy, skipLineRe.FindStringSubmatch(d)[2])
		case strings.HasPrefix(d, "every-section: "):
			b.EverySection = true
		case interruptRe.MatchString(d):
			dur, err := time.ParseDuration(interruptRe.FindStringSubmatch(d)[1])
			if err != nil || dur <= 0 {
				return fmt.Errorf("%s:%d: interrupt-after: bad duration in %q", name, b.Line, d)
			}
			if strings.Count(strings.TrimSpace(b.Text), "\n") > 0 {
				return fmt.Errorf("%s:%d: interrupt-after applies to a block of one command", name, b.Line)
			}
			b.InterruptAfter = dur
		case needsRe.MatchString(d):
			b.Needs = strings.Fields(needsRe.FindStringSubmatch(d)[1])
		default:
			return fmt.Errorf("%s:%d: readme-test comment %q: want skip, skip-line, every-section, interrupt-after or needs, each with its reason after a colon", name, b.Line, d)
		}
	}
	return nil
}

// matchOutput checks that the expected lines appear in got in order,
// "…" matching any text within a line; it returns what is missing.
func matchOutput(want, got string) string {
	var gl []string
	for _, l := range strings.Split(got, "\n") {
		gl = append(gl, strings.TrimRight(l, " \t\r"))
	}
	at := 0
	for _, w := range strings.Split(strings.TrimRight(want, "\n"), "\n") {
		w = strings.TrimRight(w, " \t")
		if w == "…" {
			continue
		}
		parts := strings.Split(w, "…")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		found := false
		for ; at < len(gl); at++ {
			if re.MatchString(gl[at]) {
				found, at = true, at+1
				break
			}
		}
		if !found {
			return fmt.Sprintf("no line %q (in order after the lines before it)", w)
		}
	}
	return ""
}

// missingTools lists the commands of names not on PATH.
func missingTools(names []string) []string {
	var missing []string
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

// readmeLock takes a machine-wide lock, so two runs of the test (two
// worktrees, say) do not fight over the log's ports; it waits up to ten
// minutes.
func readmeLock(t *testing.T) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "forklab-readme-test.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Close()
			t.Fatalf("another run of the README test held %s for ten minutes", f.Name())
		}
		time.Sleep(time.Second)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

// copyRepo copies the repository as git sees it — tracked files and new
// files git does not ignore, as they are now in the work tree — to dst,
// and returns the copied files' paths (slash-separated, relative).
func copyRepo(t *testing.T, src, dst string) map[string]bool {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = src
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	n := 0
	copied := map[string]bool{}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		copied[name] = true
		from := filepath.Join(src, name)
		info, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("copied only %d files of the repository", n)
	}
	return copied
}

// readmeEnv is the reader's environment: this one, with Go at
// /usr/local/go on the PATH (as the README assumes), log data in a
// temporary directory, and nothing of the test's own make or go
// invocation. GOFLAGS adds -trimpath so the copy's build reuses the
// packages this test's own build compiled (the build cache keys a
// package by its directory otherwise).
func readmeEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "XDG_DATA_HOME", "FORKLAB_TOKEN", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES",
			"OUT", "SEEDS", "FORK_AT", "PATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH=/usr/local/go/bin:"+os.Getenv("PATH"),
		"XDG_DATA_HOME="+filepath.Join(tmp, "xdg"),
		"GOFLAGS=-tags=duckdb_arrow -trimpath",
	)
}

// shell is one bash session, as a terminal is: blocks are sourced into it
// so variables, the directory and background jobs carry over.
type shell struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  *bufio.Reader // one line per sourced block: its name
	dir   string        // where the blocks' scripts and outputs go
	log   *bytes.Buffer
}

// readmePrologue sets the session up: pipefail, an ERR trap recording
// every failing command in the block's error file, and the helpers the
// test's rewrites of blocks call.
const readmePrologue = `set -o pipefail
__readme_fail() { echo "exit $1 at: $2" >> "$__README_ERR"; }
trap '__readme_fail $? "$BASH_COMMAND"' ERR
__readme_wait_listening() {
  local i
  for ((i = 0; i < 600; i++)); do
    [ "$(grep -c 'listening on' "$__README_OUT")" -ge "$1" ] && return 0
    sleep 0.1
  done
  echo "the server started in the background did not say it was listening within 60 s" >> "$__README_ERR"
}
`

func startShell(t *testing.T, repo string, env []string, tmp string) *shell {
	t.Helper()
	dir, err := os.MkdirTemp(tmp, "shell-")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = repo, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = []*os.File{w}
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sh := &shell{cmd: cmd, stdin: stdin, done: bufio.NewReader(r), dir: dir, log: log}
	if _, err := io.WriteString(stdin, readmePrologue); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.kill() })
	return sh
}

// source runs script in the session and returns what it printed and the
// commands that failed.
func (sh *shell) source(t *testing.T, name, script string, timeout time.Duration) (out, errs string) {
	t.Helper()
	path := filepath.Join(sh.dir, name)
	if err := os.WriteFile(path+".sh", []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(sh.stdin, "__README_OUT=%[1]s.out; __README_ERR=%[1]s.err; : > $__README_OUT; : > $__README_ERR\nsource %[1]s.sh < /dev/null > $__README_OUT 2>&1\necho %[2]s >&3\n", path, name)
	line := make(chan error, 1)
	go func() {
		l, err := sh.done.ReadString('\n')
		if err == nil && strings.TrimSpace(l) != name {
			err = fmt.Errorf("the shell said %q, not %q", l, name)
		}
		line <- err
	}()
	select {
	case err := <-line:
		if err != nil {
			b, _ := os.ReadFile(path + ".out")
			t.Fatalf("%s: the shell ended: %v\n%s%s", name, err, sh.log, b)
		}
	case <-time.After(timeout):
		sh.kill()
		b, _ := os.ReadFile(path + ".out")
		t.Fatalf("%s did not finish within %s; it printed:\n%s", name, timeout, b)
	}
	o, _ := os.ReadFile(path + ".out")
	e, _ := os.ReadFile(path + ".err")
	return string(o), string(e)
}

// stop ends the session and every job it left running: SIGTERM to the
// process group, then SIGKILL after ten seconds.
func (sh *shell) stop(t *testing.T) {
	t.Helper()
	sh.stdin.Close()
	syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGTERM)
	exited := make(chan struct{})
	go func() { sh.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
	}
	// Jobs outlive their shell: wait for the group to empty.
	for i := 0; i < 100 && syscall.Kill(-sh.cmd.Process.Pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	sh.kill()
}

func (sh *shell) kill() {
	if sh.cmd.Process != nil {
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// The README test's own rules, on small inputs: which block is whose
// output, what the comments do, what is refused, how lines match.
func TestREADMEParseAndMatch(t *testing.T) {
	sections, err := parseDoc("README.md", "# t\n\n## A\n\n```sh\necho hi\n```\n\nIt prints:\n\n```text\nhi\n```\n\n"+
		"## B\n\n<!-- readme-test: skip: no cluster here -->\n```sh\nkubectl apply\n```\n\n```text\nwhat it would print\n```\n\n"+
		"<!-- readme-test: skip-line \"make test\": recursion -->\n```sh\nmake sweep\nmake test\n```\n\nSome prose.\nMore prose:\n\n```text\nnot output\n```\n\n"+
		"<!-- readme-test: interrupt-after 2s: runs until ^C -->\n```sh\nforklab log sink --follow\n```\n\n```sh\nforklab log serve --kafka-port 9092 &\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(sections) != 3 || sections[1].Title != "A" || len(sections[1].Blocks) != 1 {
		t.Fatalf("sections %+v", sections)
	}
	if o := sections[1].Blocks[0].Output; o == nil || o.Text != "hi\n" {
		t.Errorf("the output after one line of prose ending in ':' is not attached: %+v", o)
	}
	b := sections[2].Blocks
	if len(b) != 5 || b[0].Skip != "no cluster here" || b[0].Output == nil {
		t.Fatalf("a skipped block and its output: %+v", b[0])
	}
	if b[1].script() != "make sweep\n: skipped by the README test\n" || b[2].Lang != "text" || b[1].Output != nil {
		t.Errorf("skip-line: %q; a text block after two lines of prose is output: %v", b[1].script(), b[1].Output != nil)
	}
	if s := b[3].script(); !strings.HasPrefix(s, "if timeout --preserve-status -s INT 2.000 forklab log sink --follow\n") {
		t.Errorf("interrupt-after: %q", s)
	}
	if s := b[4].script(); !strings.HasSuffix(s, "&\n__readme_wait_listening 1\n") {
		t.Errorf("a server in the background is not waited for: %q", s)
	}
	for _, bad := range []struct{ md, want string }{
		{"```\nls\n```\n", "a block without a language"},
		{"```sh\nls\n", "never closed"},
		{"<!-- readme-test: skip: x -->\n\nprose\n\n```sh\nls\n```\n", "not right before a block"},
		{"<!-- readme-test: skip: x -->\n```text\nls\n```\n", "on a text block"},
		{"<!-- readme-test: maybe: x -->\n```sh\nls\n```\n", "want skip, skip-line"},
		{"<!-- readme-test: skip-line \"rm\": x -->\n```sh\nls\n```\n", "no line of the block starts so"},
		{"<!-- readme-test: interrupt-after 2s: x -->\n```sh\nls\nls\n```\n", "a block of one command"},
		{"<!--readme-test: skip: x-->\n```sh\nls\n```\n", "on a line of its own"},
	} {
		if _, err := parseDoc("README.md", bad.md); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.md, err, bad.want)
		}
	}
	got := "noise\non vs off · fork step 3 · 300 pairs\n  rescued 75   harmed 83   net -8\nmore\nwrote lab in 129ms\n"
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{"on vs off · fork step 3 · 300 pairs\n  rescued 75   harmed 83   net -8\n", true},
		{"on vs off · fork step 3 · 300 pairs\n…\nwrote lab in …\n", true},
		{"  rescued 75   harmed 83   net -8  \n", true}, // trailing blanks do not count
		{"  rescued 75   harmed 83   net -9\n", false},
		{"  rescued 75\n", false},                                        // a line matches whole
		{"wrote lab in …\non vs off · fork step 3 · 300 pairs\n", false}, // in order
		{"wrote … in 129ms\n", true},
	} {
		if msg := matchOutput(tc.want, got); (msg == "") != tc.ok {
			t.Errorf("matchOutput(%q): %q, want ok=%v", tc.want, msg, tc.ok)
		}
	}
}

// Every link of the README and of docs/ leads somewhere (issue 26 moved
// depth from the README to docs/, and their links with it): a file or
// folder of the repository, resolved from the linking document, or a
// heading of the document it names (itself for "#anchor").
func TestREADMELinks(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	headingRe := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	anchorsOf := func(path string) map[string]bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		// Headings inside fenced blocks are not headings.
		text := regexp.MustCompile("(?ms)^```.*?^```").ReplaceAllString(string(b), "")
		anchors := map[string]bool{}
		for _, m := range headingRe.FindAllStringSubmatch(text, -1) {
			slug := strings.ToLower(strings.TrimSpace(m[1]))
			slug = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(slug, "")
			anchors["#"+strings.ReplaceAll(slug, " ", "-")] = true
		}
		return anchors
	}
	n := 0
	for _, doc := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(doc, "../../")
		for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %s: %v", name, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)["#"+anchor] {
				t.Errorf("%s: link %s: no such heading in %s", name, target, strings.TrimPrefix(file, "../../"))
			}
		}
	}
	if n < 80 {
		t.Fatalf("only %d links checked", n)
	}
}

// make sweep, the README's first command, prints one screen (issue 26:
// 111 lines, the rerun repeating the first report's Result word for word,
// terms never explained): the Makefile's own recipe, run with this test's
// binary, prints at most 40 lines of at most 80 characters — what each
// step wrote, a legend before the first headline, the headlines (the
// policy arm's with its in-sample line), the Result in words with the rule
// and the rerun, each paragraph once, and no table (they are in forklab report and the HTML pages).
func TestMakeSweepFitsOneScreen(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out := filepath.Join(t.TempDir(), "out")
	recipe := exec.Command("make", "-n", "-s", "sweep", "GO=true", "BIN="+forklabBin, "OUT="+out)
	recipe.Dir = "../.."
	recipe.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	script, err := recipe.Output()
	if err != nil {
		t.Fatalf("make -n sweep: %v", err)
	}
	// After the build: from the first sweep on.
	at := bytes.Index(script, []byte(forklabBin+" sweep"))
	if at < 0 {
		t.Fatalf("make -n sweep runs no sweep:\n%s", script)
	}
	script = script[bytes.LastIndexByte(script[:at], '\n')+1:]
	sh := exec.Command("bash", "-e", "-o", "pipefail")
	sh.Dir, sh.Stdin = "../..", bytes.NewReader(script)
	printed, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("make sweep's recipe: %v\n%s\n%s", err, script, printed)
	}
	text := strings.ReplaceAll(string(printed), out, "out")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > 40 {
		t.Errorf("make sweep prints %d lines, want at most 40:\n%s", len(lines), text)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("a line of %d characters, want at most 80: %q", n, l)
		}
	}
	for want, n := range map[string]int{
		"wrote out/report.html\n": 1, "wrote out/rerun/report.html\n": 1, "wrote out/policy.json: recover when same_obs = true\n": 1,
		"on vs off · fork step 3 · 300 pairs\n  rescued 75   harmed 83   unchanged 142   net -8\n":                                                                   1,
		"policy vs off · fork step 3 · 300 pairs\n  in-sample: the rule was searched on 210 of these 300 seeds\n  rescued 75   harmed 0   unchanged 225   net +75\n": 1,
		"RESULT\n": 1, "Rerun with recovery only where the guard rule fires": 1, "The guard chosen on 210 search pairs, recover only when same_obs = true": 1,
		"SLICES": 0, "POLICY SEARCH": 0, "QINI": 0, "p = <": 0, "flip rate": 0,
	} {
		if got := strings.Count(text, want); got != n {
			t.Errorf("make sweep prints %q %d times, want %d:\n%s", want, got, n, text)
		}
	}
	legend := strings.Index(text, "(sure things)")
	if legend < 0 || legend > strings.Index(text, "vs off ·") || !strings.Contains(text, "(lost causes)") {
		t.Errorf("no legend of sure things and lost causes before the first headline:\n%s", text)
	}
}

// strayFiles finds what the blocks wrote where git would see it, and
// nothing it should not (the README's walkthrough once left lab/, big/,
// cp.json, … in the clone's root).
func TestStrayFiles(t *testing.T) {
	repo := t.TempDir()
	for _, f := range []string{"README.md", "docs/lab.md", "cp.json", "lab/manifest.json", "docs/notes.txt",
		"tour/lab/manifest.json", "out/report.html", "out-noisy/x", "bin/forklab", "stream/replay/node_modules/k/i.js",
		"sdk/python/forklab_agent/__pycache__/agent.cpython-311.pyc"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(strayFiles(t, repo, map[string]bool{"README.md": true, "docs/lab.md": true}), " ")
	if want := "cp.json docs/notes.txt lab/manifest.json"; got != want {
		t.Errorf("stray files %q, want %q", got, want)
	}
}
