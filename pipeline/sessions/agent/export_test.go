package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A stream whose first records retention removed is exported from the
// earliest offset the log names, and that is its rows' read_offset: a read
// from it answers 200 with exactly the events exported. EventRows used to
// fail on the 410 Gone of its read from the beginning, so forklab log
// export could not export the stream at all (and the offset it would have
// written, the beginning, is refused with 410). Found in the previous
// session's QA pass ("noticed, not fixed" 3).
func TestEventRowsAfterRetention(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	js := "application/json"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := c.Create(ctx, "x", client.CreateOptions{ContentType: js, Data: []byte(`{"e":0}`)}) // offset 0
	must(err)
	w := c.NewAppender("x", "w", 0, js)
	_, err = w.Append(ctx, []byte(`{"e":1}`)) // 1
	must(err)
	_, _, err = c.Create(ctx, "y", client.CreateOptions{ContentType: js}) // 2
	must(err)
	_, err = w.Append(ctx, []byte(`[{"e":2},{"e":3}]`)) // 3
	must(err)
	_, err = w.Append(ctx, []byte(`{"e":4}`)) // 4
	must(err)
	must(svc.Broker.Cluster().DeleteRecords("forklab.streams", 0, 3))
	// The service learns the log start from Kafka (every 2 s, or on a
	// read below it): wait until it names x's earliest offset.
	var earliest string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := c.Read(ctx, "x", client.Start)
		earliest = client.EarliestOffset(err)
		if client.GoneReason(err) == client.GoneRetention && earliest != "" && !strings.HasSuffix(earliest, "_0000000000000000") {
			break // not the beginning: the service knows the log start
		}
		if time.Now().After(deadline) {
			t.Fatalf("read of x from the beginning after retention: %v (earliest offset %q), want 410 Gone (retention) naming an offset", err, earliest)
		}
	}
	rows, err := EventRows(ctx, c, "x")
	if !errors.Is(err, ErrTrimmed) || err.Error() != "x: its first events were removed by retention (410 Gone from the beginning): exported from the earliest offset the log holds, "+earliest+", indexed from 0 there" {
		t.Fatalf("EventRows: %v", err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%d %s %s", r.Index, r.ReadOffset, r.Event))
	}
	want := []string{"0 " + earliest + ` {"e":2}`, "1 " + earliest + ` {"e":3}`}
	if len(rows) != 3 || strings.Join(got[:2], "|") != strings.Join(want, "|") || rows[2].Event != `{"e":4}` || rows[2].Index != 2 {
		t.Fatalf("rows:\n%s\nwant first\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ch, err := c.Read(ctx, "x", rows[0].ReadOffset)
	if err != nil || string(ch.Data) != `[{"e":2},{"e":3},{"e":4}]` {
		t.Fatalf("read from the exported read offset %s: %q %v, want 200 and the events exported", rows[0].ReadOffset, ch.Data, err)
	}
}

// TestEventRowsNotJSON: a stream that is not a JSON stream holds no
// session events; EventRows says so (ErrNotJSON, naming the stream and its
// content type) and returns no rows, for text and binary streams alike,
// even when the bytes happen to parse as a JSON array. It used to fail
// with "chunk is not a JSON array" (exit 1), or export a text stream's
// "[...]" bytes as events.
func TestEventRowsNotJSON(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	for _, s := range []struct{ name, ct, data string }{
		{"text", "text/plain", "hello"},
		{"looks-json", "text/plain", `[{"type":"session_start"}]`},
		{"bin", "application/octet-stream", "\x00\xff"},
	} {
		if _, _, err := c.Create(ctx, s.name, client.CreateOptions{ContentType: s.ct, Data: []byte(s.data)}); err != nil {
			t.Fatal(err)
		}
		rows, err := EventRows(ctx, c, s.name)
		want := "stream " + s.name + " is " + s.ct + ", not a JSON stream: its records are not session events; read it with forklab log read"
		if !errors.Is(err, ErrNotJSON) || err.Error() != want || rows != nil {
			t.Errorf("%s: %d rows, %v; want none and %q", s.name, len(rows), err, want)
		}
	}
}
