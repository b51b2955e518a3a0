package netcut

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves lines back to their sender until the listener closes.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string) (string, error) {
	c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// The proxy forwards bytes unchanged; a cut ends the open connection and
// leaves a new one unanswered (an i/o timeout, not a refusal); after
// Restore the bytes pass again.
func TestCutAndRestore(t *testing.T) {
	p, err := Start("0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c1, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if got, err := roundTrip(c1, "offset 42"); got != "offset 42\n" || err != nil {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	p.Cut()
	if _, err := roundTrip(c1, "again"); err == nil {
		t.Fatal("a connection open at the cut still answered")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("a dial during the cut was refused (%v): a cut must look like a partition", err)
	}
	defer c2.Close()
	_, err = roundTrip(c2, "anyone?")
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection made during the cut: %v, want an i/o timeout", err)
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "back"); got != "back\n" || err != nil {
		t.Fatalf("after Restore: %q %v", got, err)
	}
	if p.Cuts() != 1 {
		t.Errorf("Cuts() = %d, want 1", p.Cuts())
	}
}
