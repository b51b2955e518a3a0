package sweep_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
)

func TestZZSmoke(t *testing.T) {
	spec := sweep.DefaultSpec()
	if n := os.Getenv("SMOKE_SEEDS"); n != "" {
		spec.Seeds, _ = sweep.ParseRange(n)
	}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := sweep.Run(context.Background(), r, st, sweep.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t.Logf("rows %v files %d in %v; cpu user %v sys %v", res.Manifest.Rows, len(res.Manifest.Files), time.Since(start),
		time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()))
	if dst := os.Getenv("SMOKE_OUT"); dst != "" {
		exec.Command("cp", "-r", out, dst).Run()
	}
}
