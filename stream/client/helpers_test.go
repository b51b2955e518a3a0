package client_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// TestMain doubles as the server process of the crash tests: with
// FORKLAB_TEST_SERVE set to a data directory it runs the session-log
// service (embedded broker, fsync per batch) until killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FORKLAB_TEST_SERVE"); dir != "" {
		serveForever(dir)
		return
	}
	os.Exit(m.Run())
}

func serveForever(dir string) {
	svc, err := service.Start(context.Background(), service.Config{
		Addr: "127.0.0.1:0", DataDir: dir,
		Server: server.Config{LongPollTimeout: time.Second},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	fmt.Println("URL", svc.URL)
	select {}
}

// startService starts an in-process service on a fresh or existing data
// directory (no fsync: these tests do not crash the machine).
func startService(t testing.TB, dir string) *service.Service {
	t.Helper()
	svc, err := service.Start(context.Background(), service.Config{
		Addr: "127.0.0.1:0", DataDir: dir, NoSync: true,
		Log:    kafkalog.Config{Logf: func(string, ...any) {}},
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("start service: %v", err)
	}
	return svc
}

func stopService(t testing.TB, svc *service.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc.Close(ctx)
}

// serverProcess is the service running in a child process.
type serverProcess struct {
	cmd *exec.Cmd
	url string
}

// startProcess runs this test binary as a server on dir and waits for its
// URL.
func startProcess(t *testing.T, dir string) *serverProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FORKLAB_TEST_SERVE="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{cmd: cmd}
	t.Cleanup(func() { p.kill() })
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "URL "); ok {
				got <- u
			}
		}
	}()
	select {
	case p.url = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("server process did not start")
	}
	return p
}

// kill sends SIGKILL: no shutdown code runs.
func (p *serverProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}
