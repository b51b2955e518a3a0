package agentproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxLine is the longest line an agent may write: a reply longer than this
// is a protocol error.
const MaxLine = 64 << 20

// ErrAgent marks a failure of the agent process or of its reply (it
// crashed, hung, wrote something that is not a reply, or a malformed one),
// as opposed to an error reply it chose to send.
var ErrAgent = errors.New("agent failed")

// ShutdownGrace is how long an agent process has, after forklab's shutdown
// request and the end of its stdin, to exit before its process group is
// killed (docs/agent-protocol.md, "shutdown"). forklab agent check waits
// as long.
const ShutdownGrace = 5 * time.Second

// conn is one agent process and the pipes to it. Requests are sent one
// line at a time: a conn is used by one goroutine at a time.
type conn struct {
	cmd     *exec.Cmd
	stdin   *os.File
	lines   chan lineOrErr
	exited  chan struct{} // closed once the process has been waited for
	waitErr error
	nextID  int64
	// label ("agent process 2"), pid and shellLine name the process in
	// messages (who); execd is set once /bin/sh is known to have replaced
	// itself with the agent.
	label     string
	pid       int
	shellLine string
	execd     atomic.Bool
	// stderr relays the process's standard error to its log and keeps
	// its last line for error messages.
	stderr *relay
	buf    bytes.Buffer
}

type lineOrErr struct {
	line []byte
	err  error
}

// Command is how to start an agent: a shell command line run with
// /bin/sh -c, with extra environment variables.
type Command struct {
	Line string
	Env  map[string]string
	// Dir is the working directory ("" for forklab's own).
	Dir string
}

// shellWords are the words that begin a shell construct rather than a
// command: a line beginning with one is not exec'd.
var shellWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"case": true, "esac": true, "while": true, "until": true, "for": true, "in": true,
	"function": true, "select": true, "time": true, "!": true, "{": true, "}": true, "[[": true,
	"exec": true, "exit": true, ".": true, "source": true, "eval": true,
}

// assignment matches a leading environment assignment of a simple
// command, FOO=bar followed by blanks, whose value holds no quotes.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=[^\s'"$]*[ \t]+`)

// execLine turns a command line that is one simple command — no ;, &, |,
// parentheses, backquotes, $( or newline; a program, not a shell word,
// after any leading VAR=value assignments — into "exec" of it, so that
// /bin/sh replaces itself with the agent: the agent is then forklab's
// direct child and the pid in messages is the agent's. Any other line is
// returned as it is, and false: the shell stays the parent.
func execLine(line string) (string, bool) {
	if strings.ContainsAny(line, ";&|()`\n\\") || strings.Contains(line, "$(") {
		return line, false
	}
	rest := strings.TrimLeft(line, " \t")
	prefix := line[:len(line)-len(rest)]
	for {
		m := assignment.FindString(rest)
		if m == "" {
			break
		}
		prefix, rest = prefix+m, rest[len(m):]
	}
	word := rest
	if i := strings.IndexAny(word, " \t"); i >= 0 {
		word = word[:i]
	}
	if q := word; len(q) >= 2 && (q[0] == '"' || q[0] == '\'') {
		end := strings.IndexByte(rest[1:], q[0])
		if end < 0 {
			return line, false
		}
		word = rest[1 : 1+end]
	}
	if word == "" || shellWords[word] || strings.ContainsAny(word, "$=") {
		return line, false
	}
	if !strings.Contains(word, "/") {
		if _, err := exec.LookPath(word); err != nil {
			return line, false // a shell builtin, function or alias; or a typo the shell will report
		}
	}
	return prefix + "exec " + rest, true
}

// start starts the agent process. Its standard error goes through a relay
// to log (nil: until the relay is pointed at a file, forklab's own
// standard error, or, with hold, memory: the latest HeldBytes, written
// to the file once there is one). The process gets its own process group,
// so that killing it kills whatever the shell line started.
func start(c Command, name string, log *logTarget, hold bool) (*conn, error) {
	if strings.TrimSpace(c.Line) == "" {
		return nil, errors.New("the agent command is empty")
	}
	var logf *logFile
	if log != nil {
		f, err := log.open()
		if err != nil {
			return nil, err
		}
		logf = f
	}
	line, direct := execLine(c.Line)
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = c.Dir
	cmd.Env = os.Environ()
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own process group, so that a kill reaches whatever the shell
	// line started; and killed if forklab dies (SIGKILL included), so that
	// a hung agent does not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pipes of our own: stdin's writes can time out (an agent that stops
	// reading must not block forklab on a full pipe), and stderr goes
	// through the relay.
	pr, in, err := os.Pipe()
	if err != nil {
		if logf != nil {
			logf.Close()
		}
		return nil, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		pr.Close()
		in.Close()
		if logf != nil {
			logf.Close()
		}
		return nil, err
	}
	// stdout is a pipe of our own, not cmd.StdoutPipe: Wait closes the
	// read end of that one as soon as the process exits, which loses the
	// last lines not read yet (a shutdown reply written just before exit).
	out, ow, err := os.Pipe()
	if err != nil {
		pr.Close()
		in.Close()
		er.Close()
		ew.Close()
		if logf != nil {
			logf.Close()
		}
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, ow, ew
	err = cmd.Start()
	if err != nil {
		err = fmt.Errorf("start %q: %w", c.Line, err)
	}
	pr.Close()
	ew.Close()
	ow.Close()
	if err != nil {
		in.Close()
		er.Close()
		out.Close()
		if logf != nil {
			logf.Close()
		}
		return nil, err
	}
	pid := cmd.Process.Pid
	k := &conn{cmd: cmd, stdin: in, lines: make(chan lineOrErr, 1), exited: make(chan struct{}),
		label: name, pid: pid, shellLine: line}
	k.execd.Store(direct)
	k.stderr = newRelay(fmt.Sprintf("%s (pid %d) started %s: %s", name, pid, time.Now().UTC().Format(time.RFC3339), c.Line), er)
	if hold {
		k.stderr.dst = &held{}
	}
	if logf != nil {
		// Before the relay starts: nothing goes elsewhere first.
		k.stderr.point(logf, log.shown)
	}
	go k.stderr.copy()
	go k.read(out)
	go func() {
		k.waitErr = cmd.Wait()
		close(k.exited)
	}()
	return k, nil
}

// who names the process in messages: "agent process 2 (pid 1234)" when
// the pid is the agent's — the line was exec'd, or the shell is seen (in
// /proc) to have replaced itself with the agent, as `cd dir && exec
// python3 agent.py` makes it — and "agent process 2 (pid 1234 of /bin/sh
// running it)" while the pid is the shell's. It looks again each time it
// is asked, while the process runs; where /proc cannot tell (another
// system, or the process is gone) it keeps what it last saw.
func (k *conn) who() string {
	if !k.execd.Load() {
		k.probe()
	}
	if k.execd.Load() {
		return fmt.Sprintf("%s (pid %d)", k.label, k.pid)
	}
	return fmt.Sprintf("%s (pid %d of /bin/sh running it)", k.label, k.pid)
}

// probe reads the process's command line in /proc: once it is no longer
// `/bin/sh -c LINE`, the shell has exec'd the agent (or another program
// that now holds the pid), and the pid is no longer the shell's.
func (k *conn) probe() {
	select {
	case <-k.exited: // the pid may be another process's by now
		return
	default:
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.pid))
	if err != nil || len(b) == 0 {
		return
	}
	if string(b) != "/bin/sh\x00-c\x00"+k.shellLine+"\x00" {
		k.execd.Store(true)
	}
}

// read delivers the process's stdout line by line until it ends, then
// closes it.
func (k *conn) read(out io.ReadCloser) {
	defer out.Close()
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			k.lines <- lineOrErr{err: err}
			close(k.lines)
			return
		}
		k.lines <- lineOrErr{line: line}
	}
}

// readLine reads one line without its newline (and a \r before it),
// refusing lines longer than MaxLine.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine {
			return nil, fmt.Errorf("a line longer than %d MiB", MaxLine>>20)
		}
		line = append(line, chunk...)
		if err == nil {
			line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
			return line, nil
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(line) > 0 {
				return nil, fmt.Errorf("stdout ended inside a line: %.80q", line)
			}
			return nil, err
		}
	}
}

// call sends one request line and waits up to timeout for its reply line.
// A failure here (the process exited, timed out, wrote a line that is not
// a reply) leaves the process unusable: the caller kills it.
func (k *conn) call(ctx context.Context, line []byte, timeout time.Duration, what string) ([]byte, error) {
	k.buf.Reset()
	k.buf.Write(line)
	k.buf.WriteByte('\n')
	k.stdin.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := k.stdin.Write(k.buf.Bytes()); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("%w: %s stopped reading its stdin: the %s request could not be written within %s%s", ErrAgent, k.who(), what, timeout, k.logHint())
		}
		return nil, k.died(what, fmt.Errorf("write request: %w", err))
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-k.lines:
		if !ok || l.err != nil {
			err := io.EOF
			if ok && l.err != io.EOF {
				err = l.err
			}
			return nil, k.died(what, err)
		}
		if !k.execd.Load() {
			k.probe() // by its first reply the shell has exec'd, if it does
		}
		return l.line, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: %s timed out after %s waiting for the %s reply%s", ErrAgent, k.who(), timeout, what, k.logHint())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// died describes the end of the process during a request.
func (k *conn) died(what string, cause error) error {
	select {
	case <-k.exited:
	case <-time.After(2 * time.Second):
		if errors.Is(cause, io.EOF) {
			return fmt.Errorf("%w: %s closed its stdout during %s%s", ErrAgent, k.who(), what, k.logHint())
		}
		return fmt.Errorf("%w: %s: %v during %s%s", ErrAgent, k.who(), cause, what, k.logHint())
	}
	// What it wrote to stderr before it exited is still in the pipe.
	k.stderr.wait(500 * time.Millisecond)
	status := "exited with status 0"
	var ee *exec.ExitError
	if errors.As(k.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = "was killed by signal " + ws.Signal().String()
		} else {
			status = fmt.Sprintf("exited with status %d", ee.ExitCode())
			switch ee.ExitCode() {
			case 126:
				status += " (the shell could not execute the command)"
			case 127:
				status += " (the shell did not find the command)"
			}
		}
	}
	if cause != nil && !errors.Is(cause, io.EOF) && !isPipeErr(cause) {
		status += fmt.Sprintf(" (%v)", cause)
	}
	return fmt.Errorf("%w: %s %s during %s%s", ErrAgent, k.who(), status, what, k.logHint())
}

func isPipeErr(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "file already closed")
}

// logHint points at the process's stderr: its last line, and the log file.
func (k *conn) logHint() string {
	k.stderr.sync(func() {}) // what it wrote before it failed, relayed
	last, shown := k.stderr.last()
	switch {
	case last != "" && shown != "":
		return fmt.Sprintf("; its stderr ends %q (%s)", last, shown)
	case last != "":
		return fmt.Sprintf("; its stderr ends %q", last)
	case shown != "":
		return fmt.Sprintf("; stderr: %s", shown)
	}
	return ""
}

// kill ends the process (its whole process group) and waits for it.
func (k *conn) kill() {
	if k == nil || k.cmd.Process == nil {
		return
	}
	k.stdin.Close()
	syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.exited
	k.drain()
}

// drain empties the line channel so that the reading goroutine ends.
func (k *conn) drain() {
	go func() {
		for range k.lines {
		}
	}()
}

// close asks the process to end: shutdown, then EOF on stdin; it is
// killed if it has not exited within ShutdownGrace.
func (k *conn) close() {
	if k == nil {
		return
	}
	line, _ := json.Marshal(request{JSONRPC: "2.0", ID: k.id(), Method: MethodShutdown, Params: struct{}{}})
	k.call(context.Background(), line, ShutdownGrace, MethodShutdown)
	k.stdin.Close()
	select {
	case <-k.exited:
	case <-time.After(ShutdownGrace):
		syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.exited
	}
	// Whatever else the process group started goes too.
	syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	k.drain()
}

func (k *conn) id() int64 {
	k.nextID++
	return k.nextID
}

// logTarget is where a relay writes: a log file, and how error messages
// name it.
type logTarget struct {
	path  string
	shown string // agent-logs/agent-2.log
	trunc bool   // start the file afresh instead of appending
}

// relay copies an agent process's standard error to where it goes now —
// forklab's own standard error (or memory, held) until it is pointed at a
// log file (to), the file after, capped and rotated (logFile) — and keeps
// its end for error messages. A process started
// before the sweep knows its log directory (the first one, whose
// initialize told forklab the world) is pointed at its file once the
// directory is known, with nothing lost. What the process had written
// when it is pointed elsewhere, or when an error message quotes it, is
// relayed first (sync): a line written before a reply is never taken for
// one written after it.
type relay struct {
	mu     sync.Mutex
	dst    io.Writer
	file   *logFile
	shown  string
	header string // the "--- forklab: …" line written atop each file
	tail   []byte // the last bytes written, for last
	src    *os.File
	// pending run, under mu, once what the pipe holds has been relayed;
	// ended is set when the process's stderr has ended.
	pending []func()
	ended   bool
	done    chan struct{}
}

// tailBytes bounds what a relay keeps of its output for last.
const tailBytes = 4096

func newRelay(header string, src *os.File) *relay {
	return &relay{dst: os.Stderr, header: header, src: src, done: make(chan struct{})}
}

// open opens t's file: appended to, or truncated with t.trunc; capped
// and rotated (openLog).
func (t logTarget) open() (*logFile, error) { return openLog(t.path, t.trunc) }

// point writes the header line atop f, then what was held for it, and
// sends what follows there; r.mu is held, or the relay is not copying
// yet.
func (r *relay) point(f *logFile, shown string) {
	fmt.Fprintf(f, "--- forklab: %s\n", r.header)
	if h, ok := r.dst.(*held); ok {
		if h.dropped > 0 {
			fmt.Fprintf(f, "--- forklab: the first %d bytes it wrote, before its log file was known, were dropped; the last %d follow\n", h.dropped, len(h.buf))
		}
		f.Write(h.buf)
	}
	if r.file != nil {
		r.file.Close()
	}
	r.dst, r.file, r.shown = f, f, shown
}

// to sends everything from now on to t's file, appending (or truncating,
// with t.trunc) after a header line naming the process. What the process
// wrote before the call goes where it went until now.
func (r *relay) to(t logTarget) error {
	f, err := t.open()
	if err != nil {
		return err
	}
	used := false
	r.sync(func() {
		if r.ended { // the process is gone: nothing more will come
			return
		}
		r.point(f, t.shown)
		used = true
	})
	if !used {
		f.Close()
	}
	return nil
}

// sync runs fn under r.mu once everything the process had written to its
// stderr when sync was called has been relayed: the copying goroutine is
// woken (a read deadline in the past), reads what the pipe holds without
// waiting for more, then runs fn. Once the stderr has ended, fn runs at
// once.
func (r *relay) sync(fn func()) {
	r.mu.Lock()
	if r.ended {
		fn()
		r.mu.Unlock()
		return
	}
	ran := make(chan struct{})
	r.pending = append(r.pending, func() { fn(); close(ran) })
	src := r.src
	r.mu.Unlock()
	if err := src.SetReadDeadline(time.Unix(1, 0)); err != nil {
		// Not a pipe the poller knows (or closed meanwhile): the copying
		// goroutine runs fn at its next read, or at the end.
		r.mu.Lock()
		r.runPending()
		r.mu.Unlock()
	}
	<-ran
}

// runPending runs the pending functions; r.mu is held.
func (r *relay) runPending() {
	p := r.pending
	r.pending = nil
	for _, fn := range p {
		fn()
	}
}

// write relays b.
func (r *relay) write(b []byte) {
	r.mu.Lock()
	r.dst.Write(b)
	r.tail = append(r.tail, b...)
	if len(r.tail) > tailBytes {
		r.tail = append(r.tail[:0], r.tail[len(r.tail)-tailBytes:]...)
	}
	r.mu.Unlock()
}

// drainMax bounds what one drain relays: a process that writes to its
// stderr without pause cannot hold a drain forever.
const drainMax = 1 << 20

// drain relays what src holds now, without waiting for more.
func (r *relay) drain(src *os.File, buf []byte) {
	rc, err := src.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		for total := 0; total < drainMax; {
			n, err := syscall.Read(int(fd), buf)
			if n > 0 {
				r.write(buf[:n])
				total += n
			}
			if n <= 0 || err != nil {
				break // empty (EAGAIN), ended or failed: done either way
			}
		}
		return true
	})
}

// copy relays src until it ends; a read deadline set by sync interrupts
// it to drain the pipe and run what sync asked.
func (r *relay) copy() {
	src := r.src
	defer close(r.done)
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.write(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			src.SetReadDeadline(time.Time{})
			r.drain(src, buf)
			r.mu.Lock()
			r.runPending()
			r.mu.Unlock()
			continue
		}
		if err != nil {
			break
		}
	}
	r.mu.Lock()
	r.ended = true
	r.runPending()
	if r.file != nil {
		r.file.Close()
		r.file = nil
	}
	r.mu.Unlock()
}

// wait waits up to d for the process's stderr to end.
func (r *relay) wait(d time.Duration) {
	select {
	case <-r.done:
	case <-time.After(d):
	}
}

// last returns the last non-empty line the process wrote to stderr, at
// most 200 bytes of it, and how messages name its log file ("" while it
// goes to forklab's own standard error).
func (r *relay) last() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(r.tail), "\n\r\t "), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	return last, r.shown
}
