//go:build !unix

package export

import (
	"context"
	"io"
	"os"
	"path/filepath"
)

// streamFile runs write, which writes a file by name (DuckDB's COPY), into
// a file in dir and copies it to w (no named pipes on this system).
func streamFile(ctx context.Context, w io.Writer, dir string, write func(ctx context.Context, path string) error) error {
	path := filepath.Join(dir, "result")
	if err := write(ctx, path); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
