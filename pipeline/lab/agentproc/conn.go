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
	"strings"
	"sync"
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

// conn is one agent process and the pipes to it. Requests are sent one
// line at a time: a conn is used by one goroutine at a time.
type conn struct {
	cmd     *exec.Cmd
	stdin   *os.File
	lines   chan lineOrErr
	exited  chan struct{} // closed once the process has been waited for
	waitErr error
	nextID  int64
	name    string // "agent process 2 (pid 1234)", for errors
	log     string // where its stderr goes ("" when inherited)
	shown   string // how errors name the log file (agent-logs/agent-2.log)
	// tail reads the last line the process wrote to stderr when it goes to
	// a file, for error messages.
	tail *tailFile
	buf  bytes.Buffer
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

// start starts the agent process. stderr receives its standard error (nil:
// forklab's own). The process gets its own process group, so that killing
// it kills whatever the shell line started.
func start(c Command, name string, stderr *os.File, logPath string) (*conn, error) {
	if strings.TrimSpace(c.Line) == "" {
		return nil, errors.New("the agent command is empty")
	}
	cmd := exec.Command("/bin/sh", "-c", c.Line)
	cmd.Dir = c.Dir
	cmd.Env = os.Environ()
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own process group, so that a kill reaches whatever the shell
	// line started; and killed if forklab dies (SIGKILL included), so that
	// a hung agent does not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if stderr != nil {
		cmd.Stderr = stderr
	} else {
		cmd.Stderr = os.Stderr
	}
	// A pipe of our own for stdin, whose writes can time out: an agent that
	// stops reading must not block forklab on a full pipe.
	pr, in, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = pr
	out, err := cmd.StdoutPipe()
	if err != nil {
		pr.Close()
		in.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		in.Close()
		return nil, fmt.Errorf("start %q: %w", c.Line, err)
	}
	pr.Close()
	k := &conn{cmd: cmd, stdin: in, lines: make(chan lineOrErr, 1), exited: make(chan struct{}),
		name: fmt.Sprintf("%s (pid %d)", name, cmd.Process.Pid), log: logPath, shown: logPath}
	if logPath != "" {
		k.tail = &tailFile{path: logPath}
		k.tail.mark()
	}
	go k.read(out)
	go func() {
		k.waitErr = cmd.Wait()
		close(k.exited)
	}()
	return k, nil
}

// read delivers the process's stdout line by line until it ends.
func (k *conn) read(out io.Reader) {
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
			return nil, fmt.Errorf("%w: %s stopped reading its stdin: the %s request could not be written within %s%s", ErrAgent, k.name, what, timeout, k.logHint())
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
		return l.line, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: %s timed out after %s waiting for the %s reply%s", ErrAgent, k.name, timeout, what, k.logHint())
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
			return fmt.Errorf("%w: %s closed its stdout during %s%s", ErrAgent, k.name, what, k.logHint())
		}
		return fmt.Errorf("%w: %s: %v during %s%s", ErrAgent, k.name, cause, what, k.logHint())
	}
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
	return fmt.Errorf("%w: %s %s during %s%s", ErrAgent, k.name, status, what, k.logHint())
}

func isPipeErr(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "file already closed")
}

// logHint points at the process's stderr: its last line, and the log file.
func (k *conn) logHint() string {
	if k.tail == nil {
		return ""
	}
	last := k.tail.last()
	if last != "" {
		return fmt.Sprintf("; its stderr ends %q (%s)", last, k.shown)
	}
	return fmt.Sprintf("; stderr: %s", k.shown)
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
// killed if it has not exited within grace.
func (k *conn) close(grace time.Duration) {
	if k == nil {
		return
	}
	line, _ := json.Marshal(request{JSONRPC: "2.0", ID: k.id(), Method: MethodShutdown, Params: struct{}{}})
	k.call(context.Background(), line, grace, MethodShutdown)
	k.stdin.Close()
	select {
	case <-k.exited:
	case <-time.After(grace):
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

// tailFile reads the end of a log file that a process appends to.
type tailFile struct {
	path string
	from int64 // where this process's output begins
	mu   sync.Mutex
}

func (t *tailFile) mark() {
	if fi, err := os.Stat(t.path); err == nil {
		t.from = fi.Size()
	}
}

// last returns the last non-empty line this process wrote, at most 200
// bytes of it.
func (t *tailFile) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(t.path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= t.from {
		return ""
	}
	start := max(t.from, fi.Size()-4096)
	b := make([]byte, fi.Size()-start)
	if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	return last
}
