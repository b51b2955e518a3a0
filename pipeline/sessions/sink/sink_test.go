package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/schemas"
	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
	"github.com/parquet-go/parquet-go"
)

const js = "application/json"

// startLog starts a log service on the embedded broker in dir.
func startLog(t testing.TB, dir string, partitions int) *service.Service {
	t.Helper()
	return sessiontest.StartLogWith(t, service.Config{
		Addr: "127.0.0.1:0", DataDir: dir, NoSync: true,
		Log:    kafkalog.Config{Partitions: partitions},
		Server: server.Config{LongPollTimeout: 500 * time.Millisecond},
	})
}

// sinkFile is one file of a sink directory, read back.
type sinkFile struct {
	rel         string
	part        int32
	first, last int64
	rows        []schemas.SessionEvent
}

// readSink reads every file under out/sink, in offset order, and checks
// that files of one partition never overlap (a batch's files of different
// dates share their name and range).
func readSink(t testing.TB, out string) []sinkFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(out, Dir, DatePrefix+"*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var files []sinkFile
	for _, p := range paths {
		_, part, a, b, ok := ParseFileName(filepath.Base(p))
		if !ok {
			t.Fatalf("%s: not a sink file name", p)
		}
		rows, err := parquet.ReadFile[schemas.SessionEvent](p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		rel, _ := filepath.Rel(out, p)
		date := strings.TrimPrefix(filepath.Base(filepath.Dir(p)), DatePrefix)
		for _, r := range rows {
			if r.AppendedAt == nil || r.AppendedAt.UTC().Format(time.DateOnly) != date {
				t.Fatalf("%s: a row appended at %v in the folder of %s", rel, r.AppendedAt, date)
			}
			if *r.KafkaPartition != part || *r.KafkaOffset > b {
				t.Fatalf("%s: a row of partition %d offset %d", rel, *r.KafkaPartition, *r.KafkaOffset)
			}
		}
		files = append(files, sinkFile{rel, part, a, b, rows})
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].part != files[j].part {
			return files[i].part < files[j].part
		}
		return files[i].first < files[j].first || files[i].first == files[j].first && files[i].rel < files[j].rel
	})
	for i := 1; i < len(files); i++ {
		a, b := files[i-1], files[i]
		if a.part == b.part && b.first <= a.last && (a.first != b.first || a.last != b.last) {
			t.Fatalf("%s and %s overlap", a.rel, b.rel)
		}
	}
	return files
}

type genRef struct {
	stream string
	gen    int64
}

// byStream reads out back with ReadDir, after readSink's checks of every
// file, and fails on any problem ReadDir finds: overlapping batches, an
// index missing or found twice, events out of offset order.
func byStream(t testing.TB, out string) map[genRef][]schemas.SessionEvent {
	t.Helper()
	readSink(t, out)
	c, err := ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) > 0 {
		t.Fatalf("sink directory:\n%s", strings.Join(c.Problems, "\n"))
	}
	m := map[genRef][]schemas.SessionEvent{}
	for ref, rs := range c.Streams {
		m[genRef{ref.Name, ref.Gen}] = rs
	}
	return m
}

// compareWithLog checks that every live stream under prefix holds in the
// sink's files (its latest generation) exactly the messages a read of the
// whole stream returns, and the same row as forklab log export makes of it.
func compareWithLog(t testing.TB, c *client.Client, out, prefix string) (streams, events int) {
	t.Helper()
	ctx := context.Background()
	got := byStream(t, out)
	latest := map[string]int64{}
	for k := range got {
		latest[k.stream] = max(latest[k.stream], k.gen)
	}
	names, err := c.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		info, err := c.Head(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info.ContentType, js) {
			if latest[n] != 0 {
				t.Fatalf("%s (%s) is in the sink", n, info.ContentType)
			}
			continue
		}
		want, err := agent.EventRows(ctx, c, n)
		if err != nil && !strings.Contains(err.Error(), "cannot fold") {
			t.Fatal(err)
		}
		rows := got[genRef{n, latest[n]}]
		if len(rows) != len(want) {
			t.Fatalf("%s: %d events in the sink, %d in the log", n, len(rows), len(want))
		}
		checkReadOffsets(t, c, n, rows)
		for i := range rows {
			r := rows[i]
			r.ReadOffset, r.Generation, r.KafkaPartition, r.KafkaOffset, r.AppendedAt = want[i].ReadOffset, nil, nil, nil, nil
			if !reflect.DeepEqual(r, want[i]) {
				t.Fatalf("%s event %d:\n sink   %+v\n export %+v", n, i, r, want[i])
			}
		}
		streams++
		events += len(rows)
	}
	return streams, events
}

// checkReadOffsets requires every event's read_offset to be an offset the
// log issued for the stream, from which a read starts with the record that
// holds the event: a read of one record (max_bytes 1) from it returns
// exactly the events of the rows with that record's Kafka offset, in order.
func checkReadOffsets(t testing.TB, c *client.Client, name string, rows []schemas.SessionEvent) {
	t.Helper()
	compact := func(m []byte) string {
		var b bytes.Buffer
		if err := json.Compact(&b, m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b.String()
	}
	for i := 0; i < len(rows); {
		j := i
		var want []string
		for ; j < len(rows) && *rows[j].KafkaOffset == *rows[i].KafkaOffset; j++ {
			if rows[j].ReadOffset != rows[i].ReadOffset {
				t.Fatalf("%s events %d and %d, of one record, have read offsets %s and %s", name, i, j, rows[i].ReadOffset, rows[j].ReadOffset)
			}
			want = append(want, compact([]byte(rows[j].Event)))
		}
		ch, err := c.ReadMax(context.Background(), name, rows[i].ReadOffset, 1)
		if err != nil {
			t.Fatalf("%s event %d: read from its read offset %s: %v", name, i, rows[i].ReadOffset, err)
		}
		ms, err := ch.Messages()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, compact(m))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s event %d: a read from its read offset %s returns %q, want the events of its record %q", name, i, rows[i].ReadOffset, got, want)
		}
		i = j
	}
}

func run(t testing.TB, cfg Config) *Report {
	t.Helper()
	if cfg.RotateRecords == 0 {
		cfg.RotateRecords = 25
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("sink: %v", err)
	}
	return rep
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A sweep played on the log (sessions and their forks at every fork
// step), streams created again after a delete, JSON batches and a fork at
// a sub-offset inside one, a closed stream, a byte stream: a one-shot sink
// copies every JSON stream's events exactly as the log serves them and as
// forklab log export flattens them; run again it writes nothing; after more
// appends it continues each stream's indexes and folds.
func TestSinkMatchesLog(t *testing.T) {
	svc := startLog(t, t.TempDir(), 2)
	c := client.New(svc.URL)
	ctx := context.Background()
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 4}
	spec.Arms = []fork.Arm{fork.Off, fork.On}
	r, err := spec.Resolve()
	mustDo(t, err)
	rn, err := agent.Runners(c, r, agent.PlayOptions{Prefix: "lab"})(r.Configs[0], r.Plan())
	mustDo(t, err)
	mustDo(t, rn.Run(ctx, 0, 4, func(*lab.SeedResult) error { return nil }))
	// Streams of every shape under the prefix, and one outside it.
	batch, _, err := c.Create(ctx, "lab/x/batch", client.CreateOptions{ContentType: js, Data: []byte(`[{"type":"incarnation","epoch":0,"nonce":"a"},{"n":1}]`)})
	mustDo(t, err)
	w := c.NewAppender("lab/x/batch", "w", 0, js)
	_, err = w.Append(ctx, []byte(`[{"n":2},{"n":3},{"n":4}]`))
	mustDo(t, err)
	// The fork starts from the offset the log issued before that append
	// (the tail after the create) and inherits 2 of its 3 events.
	_, err = c.Fork(ctx, "lab/x/batch/sub", "lab/x/batch", client.ForkOptions{At: batch.Tail, Sub: 2})
	mustDo(t, err)
	_, _, err = c.Create(ctx, "lab/x/again", client.CreateOptions{ContentType: js, Data: []byte(`{"first":"generation"}`)})
	mustDo(t, err)
	mustDo(t, c.Delete(ctx, "lab/x/again"))
	_, _, err = c.Create(ctx, "lab/x/again", client.CreateOptions{ContentType: js, Data: []byte(`{"second":"generation"}`)})
	mustDo(t, err)
	_, _, err = c.Create(ctx, "lab/x/closed", client.CreateOptions{ContentType: js, Data: []byte(`{"only":1}`)})
	mustDo(t, err)
	mustDo(t, c.Close(ctx, "lab/x/closed"))
	_, _, err = c.Create(ctx, "lab/x/bytes", client.CreateOptions{ContentType: "text/plain", Data: []byte("not events")})
	mustDo(t, err)
	_, _, err = c.Create(ctx, "other/x", client.CreateOptions{ContentType: js, Data: []byte(`{"elsewhere":1}`)})
	mustDo(t, err)

	out := t.TempDir()
	cfg := Config{Brokers: svc.Brokers, Out: out, Prefix: "lab/"}
	rep := run(t, cfg)
	streams, events := compareWithLog(t, c, out, "lab/")
	names, _ := c.List(ctx, "lab/")
	// Every event written is compared, but the first generation of
	// lab/x/again (one event), which the log no longer serves.
	if streams != len(names)-1 || int64(events)+1 != rep.Events || len(rep.Gaps) != 0 || rep.Rewritten != 0 {
		t.Fatalf("%d streams, %d events compared; report %+v", streams, events, rep)
	}
	// The first generation of lab/x/again stays in the files; the other
	// prefix does not get in.
	all := byStream(t, out)
	if g1 := all[genRef{"lab/x/again", 1}]; len(g1) != 1 || g1[0].Event != `{"first":"generation"}` {
		t.Fatalf("generation 1 of lab/x/again: %+v", g1)
	}
	for k := range all {
		if !strings.HasPrefix(k.stream, "lab/") {
			t.Fatalf("%s is outside the prefix", k.stream)
		}
	}
	sub := all[genRef{"lab/x/batch/sub", 1}]
	if len(sub) != 4 || sub[3].Event != `{"n":3}` || *sub[3].KafkaOffset != *all[genRef{"lab/x/batch", 1}][3].KafkaOffset {
		t.Fatalf("fork at a sub-offset: %+v", sub)
	}

	// Run again: nothing new, nothing written (not even the state).
	before := snapshotDir(t, out)
	rep = run(t, cfg)
	if rep.Files != 0 || rep.Records != 0 || !reflect.DeepEqual(snapshotDir(t, out), before) {
		t.Fatalf("second run wrote: %+v", rep)
	}

	// More events: a session's fork from the files' time on, a second
	// generation growing; the next run continues indexes and folds.
	// It forks before the session's outcome: at the offset the log read
	// before its last event (a fork at -1 has no run to fork).
	s1 := all[genRef{"lab/c0/s1", 1}]
	if len(s1) < 3 {
		t.Fatalf("lab/c0/s1 has %d events", len(s1))
	}
	_, err = agent.Fork(ctx, agent.Worker{Log: c}, "lab/c0/s1", s1[len(s1)-1].ReadOffset, "lab/c0/s1/late", 0, fork.On, 0, nil)
	if err != nil {
		t.Fatalf("fork again: %v", err)
	}
	w2 := c.NewAppender("lab/x/again", "w", 0, js)
	_, err = w2.Append(ctx, []byte(`[{"more":1},{"more":2}]`))
	mustDo(t, err)
	rep = run(t, cfg)
	if rep.Files == 0 {
		t.Fatalf("third run wrote nothing: %+v", rep)
	}
	if s2, _ := compareWithLog(t, c, out, "lab/"); s2 != streams+1 {
		t.Fatalf("%d streams after the fork, want %d", s2, streams+1)
	}
}

// snapshotDir lists every file under out with its size and modification
// time, but the lock file (a run writes its pid there).
func snapshotDir(t testing.TB, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && fi.Name() != LockName {
			m[p] = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
		}
		return err
	})
	return m
}

// ReadDir reports what would break exactly-once: overlapping batches, an
// event twice or missing, events out of offset order.
func TestReadDirFindsProblems(t *testing.T) {
	ev := func(stream string, index int32, koff int64) schemas.SessionEvent {
		gen, part, at := int64(1), int32(0), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
		return schemas.SessionEvent{Stream: stream, Index: index, Generation: &gen, KafkaPartition: &part, KafkaOffset: &koff, AppendedAt: &at}
	}
	type batch struct {
		first, last int64
		rows        []schemas.SessionEvent
	}
	for _, c := range []struct {
		name    string
		batches []batch
		want    string
	}{
		{"clean", []batch{{0, 4, []schemas.SessionEvent{ev("s", 0, 1), ev("s", 1, 3)}}, {5, 9, []schemas.SessionEvent{ev("s", 2, 6)}}}, ""},
		{"overlap", []batch{{0, 4, []schemas.SessionEvent{ev("s", 0, 1)}}, {3, 9, []schemas.SessionEvent{ev("s", 1, 6)}}}, "overlaps"},
		{"twice", []batch{{0, 4, []schemas.SessionEvent{ev("s", 0, 1)}}, {5, 9, []schemas.SessionEvent{ev("s", 0, 1)}}}, "s (generation 1): event 1 has index 0"},
		{"missing", []batch{{0, 4, []schemas.SessionEvent{ev("s", 0, 1), ev("s", 2, 3)}}}, "s (generation 1): event 1 has index 2"},
		{"order", []batch{{0, 4, []schemas.SessionEvent{ev("s", 0, 3)}}, {5, 9, []schemas.SessionEvent{ev("s", 1, 2)}}}, "event 1 at offset 2 comes after offset 3"},
	} {
		out := t.TempDir()
		for _, b := range c.batches {
			if _, err := writeFile(filepath.Join(out, Dir, DatePrefix+"2025-06-01", FileName("t", 0, b.first, b.last)), b.rows); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(got.Problems, "; "); (c.want == "") != (p == "") || !strings.Contains(p, c.want) {
			t.Errorf("%s: problems %q, want one with %q", c.name, p, c.want)
		}
	}
}
