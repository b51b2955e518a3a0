package sessiontest

import (
	"context"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/service"
)

// StartLog starts a session log in the test on an ephemeral port, its
// embedded broker's data in a new temporary directory, not synced
// (StartLogWith).
func StartLog(t testing.TB) *service.Service {
	t.Helper()
	return StartLogWith(t, service.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), NoSync: true})
}

// StartLogWith starts a session log in the test with cfg (its log's Logf
// silenced when unset) and closes it when the test ends.
func StartLogWith(t testing.TB, cfg service.Config) *service.Service {
	t.Helper()
	if cfg.Log.Logf == nil {
		cfg.Log.Logf = func(string, ...any) {}
	}
	svc, err := service.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start log: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Close(ctx)
	})
	return svc
}
