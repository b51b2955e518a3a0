package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/queries"
	"github.com/forklab/forklab/stream/client"
)

// A sweep played on the log, its sessions listed by prefix and exported
// beside its tables: queries/session_events.sql joins them with the pairs.
func TestExportedEventsJoinPairs(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 12}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(ctx, r, st, sweep.Options{Runners: Runners(c, r, PlayOptions{Prefix: "exp"})}); err != nil {
		t.Fatal(err)
	}
	// Another sweep's streams must not be listed.
	sweepInto(t, r, sweep.Options{Runners: Runners(c, r, PlayOptions{Prefix: "other"})})
	names, err := c.List(ctx, "exp/")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 12*4 || !strings.HasPrefix(names[0], "exp/c0/s0") {
		t.Fatalf("listed %d streams: %v", len(names), names[:min(4, len(names))])
	}
	var rows int
	var all []string
	for _, n := range names {
		r, err := EventRows(ctx, c, n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r {
			all = append(all, fmt.Sprint(r[i].Stream, r[i].Index))
		}
		rows += len(r)
		if err := WriteEvents(filepath.Join(out, "events", fmt.Sprintf("part-%03d.parquet", len(all))), r); err != nil {
			t.Fatal(err)
		}
	}
	db, err := results.Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() // with the events view: the directory has exported events
	// The observation column is the world's JSON: the counter's reading and
	// steps, which agree with the steps column.
	tab, err := db.Query(ctx, "SELECT count(*), count(DISTINCT stream), count(*) FILTER (WHERE type = 'outcome'), "+
		"count(*) FILTER (WHERE type IN ('tool_result', 'recovery', 'outcome') AND CAST(obs::JSON->>'steps' AS INTEGER) = steps) "+
		"= count(*) FILTER (WHERE type IN ('tool_result', 'recovery', 'outcome')) FROM events")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tab.Rows[0]); got != fmt.Sprintf("[%d 48 36 true]", rows) {
		t.Fatalf("events: %s", got)
	}
	joined, err := db.Run(ctx, "session_events")
	if err != nil {
		t.Fatal(err)
	}
	// 12 seeds × 2 treatment arms × 2 sides, every branch's outcome agreeing
	// with the pair's label.
	if len(joined.Rows) != 48 {
		t.Fatalf("session_events: %d rows", len(joined.Rows))
	}
	idx := map[string]int{}
	for i, c := range joined.Columns {
		idx[c] = i
	}
	check, err := db.Query(ctx, "SELECT count(*) FROM ("+strings.TrimSuffix(strings.TrimSpace(queries.MustGet("session_events")), ";")+
		") AS j JOIN pairs AS p USING (config_id, fork_step, seed, arm) "+
		"WHERE j.branch_success IS DISTINCT FROM CASE j.side WHEN 'control' THEN p.control_success ELSE p.treatment_success END")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(check.Rows[0][0]) != "0" {
		t.Fatalf("%v branch outcomes disagree with the pairs", check.Rows[0][0])
	}
	for _, r := range joined.Rows {
		if r[idx["arm"]] == "on" && r[idx["side"]] == "treatment" && fmt.Sprint(r[idx["recoveries"]]) != "1" {
			t.Fatalf("an on branch without its recovery: %v", r)
		}
	}
}

// A row carries what the stream's events up to it say: no seed before
// session_start, the branch from the fork event on; messages that are not
// session events keep their JSON and an empty type.
func TestEventFoldRow(t *testing.T) {
	msgs := []string{
		`{"type":"incarnation","epoch":0,"nonce":"n","pid":1,"at":"2025-01-01T00:00:00Z"}`,
		string(session.Start(counter.Declaration(), counter.Default().WorldParams(), fork.Model{}, 7).Encode()),
		`{"type":"model_turn","turn":1,"tool":"increment"}`,
		`{"type":"fork","fork_step":3,"arm":"on","replica":2,"recovery":"refresh"}`,
		`{"foreign":true}`,
		`{"type":"outcome","success":true,"steps":5,"obs":{"obs":6,"steps":5}}`,
	}
	want := []string{
		"0 incarnation domain=false seed=<nil> branch=<nil>/<nil>/<nil>",
		"1 session_start domain=true seed=7 branch=<nil>/<nil>/<nil>",
		"2 model_turn domain=true seed=7 branch=<nil>/<nil>/<nil>",
		"3 fork domain=true seed=7 branch=3/on/2",
		"4  domain=false seed=7 branch=3/on/2",
		"5 outcome domain=true seed=7 branch=3/on/2",
	}
	var f EventFold
	for i, m := range msgs {
		r := f.Row("s", int32(i), "off", []byte(m))
		str := func(p any) string {
			switch v := p.(type) {
			case *int64:
				if v != nil {
					return fmt.Sprint(*v)
				}
			case *int32:
				if v != nil {
					return fmt.Sprint(*v)
				}
			case *string:
				if v != nil {
					return *v
				}
			}
			return "<nil>"
		}
		got := fmt.Sprintf("%d %s domain=%v seed=%s branch=%s/%s/%s", r.Index, r.Type, r.Domain,
			str(r.SessionSeed), str(r.BranchForkStep), str(r.BranchArm), str(r.BranchReplica))
		if got != want[i] || r.Event != m || r.Stream != "s" || r.ReadOffset != "off" {
			t.Errorf("row %d: %s (event %q), want %s", i, got, r.Event, want[i])
		}
	}
}
