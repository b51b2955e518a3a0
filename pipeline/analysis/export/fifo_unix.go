//go:build unix

package export

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// streamFile runs write, which writes a file by name (DuckDB's COPY), and
// copies the bytes to w as they are written, through a named pipe in dir:
// nothing is staged on disk or in memory. If w fails (a closed pipe), the
// rest is drained and write is cancelled, so the writer never meets a
// broken pipe.
func streamFile(ctx context.Context, w io.Writer, dir string, write func(ctx context.Context, path string) error) error {
	fifo := filepath.Join(dir, "result")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return fmt.Errorf("make named pipe %s: %w", fifo, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	copied := make(chan error, 1)
	go func() {
		// Blocks until the writer opens the pipe (or release below does).
		f, err := os.Open(fifo)
		if err != nil {
			copied <- err
			return
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		if err != nil {
			cancel()
			io.Copy(io.Discard, f)
		}
		copied <- err
	}()
	werr := write(ctx, fifo)
	// If write failed before opening the pipe, the reader still waits for
	// a writer: open and close one without blocking to let it see the end.
	if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
	cerr := <-copied
	if cerr != nil {
		return fmt.Errorf("write result: %w", cerr)
	}
	return werr
}
