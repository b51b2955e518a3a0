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
