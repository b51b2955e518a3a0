package chaos

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/counter"
	"github.com/forklab/forklab/pipeline/fork"
)

// The short chaos run of `make test`: worker processes killed, frozen and
// woken, the log service killed and restarted, a sink beside it killed and
// restarted, and every check holding (the sink's files hold exactly the
// log's events, stream by stream; a one-shot run after writes nothing).
// `forklab chaos` runs the long one.
func TestShortChaos(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "forklab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/forklab").CombinedOutput(); err != nil {
		t.Fatalf("build forklab: %v\n%s", err, out)
	}
	p := counter.Default()
	p.PStall = 0.1
	cfg := Config{Bin: bin, Sessions: 8, Kills: 16, Zombies: 4, Restarts: 1, Seed: 7, Parallel: 8, SinkKills: 6,
		Delay: 15 * time.Millisecond, Params: p, Model: fork.Model{Temperature: 0.1, NoTool: 0.5},
		Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Write(&buf)
	t.Log("\n" + buf.String())
	if !rep.OK() || rep.Restarts != 1 || rep.Kills < cfg.Kills/2 || rep.Zombies == 0 || rep.SinkKills < 3 || rep.SinkEvents == 0 ||
		rep.Fenced403+rep.Closed409+rep.ZombieWon+rep.ZombieIdle != rep.Zombies {
		t.Fatalf("chaos checks failed:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "verdict: OK") {
		t.Fatal("no verdict")
	}
}
