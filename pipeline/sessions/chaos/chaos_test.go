package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	_ "github.com/forklab/forklab/pipeline/worlds/counter" // registers the counter world
)

// The short chaos run of `make test`, with a sink beside it killed and
// restarted (its files must hold exactly the log's events, stream by
// stream; a one-shot run after writes nothing).
// The short chaos run of `make test`: worker processes killed, frozen and
// woken, the log service killed and restarted, and every check holding.
// The faults are planned by events, so every one asked for lands: the
// counts are exact, run after run. The world's parameters are not its
// defaults, so a worker that did not get them would write another session
// (issue 12: chaos --base-budget 20 --target 15 once reported every session
// as differing, the flags having reached only the reference run).
// `forklab chaos` runs the long one.
func TestShortChaos(t *testing.T) {
	bin := buildForklab(t)
	cfg := Config{Bin: bin, Sessions: 8, Kills: 16, Zombies: 4, Restarts: 1, Seed: 7, Parallel: 8, SinkKills: 6,
		Delay: 15 * time.Millisecond, World: "counter", Params: world.Params{"p_stall": 0.1, "base_budget": 10, "target": 8},
		Model: fork.Model{Temperature: 0.1, NoTool: 0.5}, Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Write(&buf)
	t.Log("\n" + buf.String())
	if !rep.OK() || rep.Kills != 16 || rep.Zombies != 4 || rep.Restarts != 1 || rep.Fenced403+rep.Closed409 != 4 ||
		rep.Completed != 8 || rep.Processes != 8+16+4 || rep.Differing != 0 || rep.Gaps != 0 ||
		rep.SinkKills != 6 || rep.SinkEvents == 0 || rep.SinkDiffering != 0 || rep.SinkProblems != 0 || rep.SinkRerun != "nothing" {
		t.Fatalf("chaos checks failed:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "verdict: OK") || !strings.Contains(buf.String(), `"target":8`) {
		t.Fatal("no verdict, or the table does not show the sessions' parameters")
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildForklab builds the forklab binary once per test process (go test
// -count=10 runs the chaos ten times, not the linker).
func buildForklab(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "forklab-chaos-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "forklab")
		if out, err := exec.Command("go", "build", "-o", binPath, "../../../cmd/forklab").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build forklab: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// The plan is a pure function of the configuration: the same seed gives the
// same faults at the same events; and a plan the sessions cannot host is
// refused before anything runs, saying how many faults fit.
func TestPlan(t *testing.T) {
	cfg := Config{Sessions: 5, Kills: 30, Zombies: 6, Restarts: 2, Seed: 3, World: "counter"}
	a, sa, err := plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, sb, _ := plan(cfg)
	kills, zombies := 0, 0
	for i, s := range sa {
		if len(s.faults) != len(sb[i].faults) {
			t.Fatalf("session %d: %d faults, then %d", i, len(s.faults), len(sb[i].faults))
		}
		for k, f := range s.faults {
			if f != sb[i].faults[k] {
				t.Fatalf("session %d fault %d: %+v, then %+v", i, k, f, sb[i].faults[k])
			}
			if f.after < 1 || f.after >= len(s.expected) || k > 0 && f.after <= s.faults[k-1].after {
				t.Fatalf("session %d fault %d after event %d of %d", i, k, f.after, len(s.expected))
			}
			if f.zombie {
				zombies++
				if f.wake <= f.after || f.wake > len(s.expected) {
					t.Fatalf("zombie woken at %d, frozen at %d, of %d events", f.wake, f.after, len(s.expected))
				}
			} else {
				kills++
			}
		}
	}
	if kills != 30 || zombies != 6 || a.Capacity != a.Events-5 {
		t.Fatalf("%d kills, %d zombies planned; capacity %d of %d events", kills, zombies, a.Capacity, a.Events)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Sessions: 2, Kills: 200, Zombies: 20, World: "counter"}, "room for at most"},
		{Config{Sessions: 1, Restarts: 100, World: "counter"}, "100 log restarts do not fit"},
		{Config{Sessions: 1, World: "chess"}, `unknown world "chess"`},
		{Config{Sessions: 1, World: "counter", Params: world.Params{"target": 0}}, "target"},
		{Config{Sessions: 1, World: "counter", Params: world.Params{"p_stal": 0.1}}, `no parameter "p_stal"`},
		{Config{Sessions: 1, Seed: 1 << 62, World: "counter"}, "too large"},
	} {
		if _, err := Plan(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// WorkerArgs gives a worker every parameter of the session, so its
// session_start is the harness's, byte for byte.
func TestWorkerArgsCarryEveryParameter(t *testing.T) {
	_, ss, err := plan(Config{Sessions: 1, Seed: 2, World: "counter", Params: world.Params{"target": 15, "base_budget": 20, "slack": []any{0, 3}, "p_obs_noise": 0.05},
		Model: fork.Model{Temperature: 0.3, NoTool: 0.25}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(WorkerArgs("http://x", "s", ss[0].start, 20*time.Millisecond), " ")
	for _, want := range []string{"--world counter", "--seed 2000", "--temperature 0.3", "--no-tool 0.25", "--param base_budget=20", "--param target=15",
		"--param slack=0,3", "--param freeze_at=0,0,1,2", "--param p_obs_noise=0.05", "--param p_stall=0", "--param p_refresh_fail=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("worker args lack %q: %s", want, got)
		}
	}
}
