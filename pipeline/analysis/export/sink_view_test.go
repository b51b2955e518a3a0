package export

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/sessions/sink"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// A sweep played on the log, its results directory, and forklab log sink
// writing the sessions' events into it: results.duckdb's events view reads
// the sink's files, session_events joins them with the pairs, and a
// connection opened before the sink's next rotation sees the new events
// without forklab db running again. forklab sql (results.Open) sees them
// too.
func TestEventsViewReadsTheSink(t *testing.T) {
	svc, err := service.Start(context.Background(), service.Config{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), NoSync: true,
		Log:    kafkalog.Config{Logf: func(string, ...any) {}},
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	c := client.New(svc.URL)
	ctx := context.Background()
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 6}
	spec.Arms = []fork.Arm{fork.Off, fork.On}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(ctx, r, st, sweep.Options{Runners: agent.Runners(c, r, agent.PlayOptions{Prefix: "v"})}); err != nil {
		t.Fatal(err)
	}
	sinkRun := func() *sink.Report {
		t.Helper()
		rep, err := sink.Run(ctx, sink.Config{Brokers: svc.Brokers, Out: out, RotateRecords: 40})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := sinkRun()
	info, err := WriteDB(ctx, out)
	if err != nil || !info.Events {
		t.Fatalf("WriteDB: %+v %v", info, err)
	}
	abs, _ := filepath.Abs(out)
	db := openDB(t, filepath.Join(abs, DBName)+"?access_mode=read_only&file_search_path="+abs)
	count := func() string {
		return fmt.Sprint(queryAll(t, db, `SELECT count(*), count(DISTINCT stream), min(event_date) IS NOT NULL,
			count(*) FILTER (WHERE kafka_offset IS NULL) FROM events`).Rows[0])
	}
	if got, want := count(), fmt.Sprintf("[%d 18 true 0]", first.Events); got != want {
		t.Fatalf("events view: %s, want %s", got, want)
	}
	// 6 seeds × the arm on × 2 sides, each branch's outcome the pair's.
	joined := queryAll(t, db, "SELECT side, branch_success, label FROM session_events")
	if len(joined.Rows) != 12 {
		t.Fatalf("session_events: %d rows", len(joined.Rows))
	}

	// More sessions on the log, another rotation of the sink: the open
	// connection sees them as they are written.
	rn, err := agent.Runners(c, r, agent.PlayOptions{Prefix: "v2"})(r.Configs[0], r.Plan())
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Run(ctx, 6, 8, func(*lab.SeedResult) error { return nil }); err != nil {
		t.Fatal(err)
	}
	second := sinkRun()
	if second.Files == 0 {
		t.Fatalf("the second run wrote nothing: %+v", second)
	}
	if got, want := count(), fmt.Sprintf("[%d 24 true 0]", first.Events+second.Events); got != want {
		t.Fatalf("events view after the rotation: %s, want %s", got, want)
	}
	rdb, err := results.Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	tab, err := rdb.Query(ctx, "SELECT count(*) FROM events")
	if err != nil || fmt.Sprint(tab.Rows[0][0]) != fmt.Sprint(first.Events+second.Events) {
		t.Fatalf("forklab sql's events: %v %v", tab, err)
	}
}
