package kafkalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/broker/brokertest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replayAll reads every partition of l's topic from the log start with a
// Reader and folds it with a Replay, checking the state's encoding
// round-trips at every step.
func replayAll(t *testing.T, rd *Reader, parts int) []*Replay {
	t.Helper()
	ctx := context.Background()
	var out []*Replay
	for p := int32(0); p < int32(parts); p++ {
		ls, hwm, err := rd.Offsets(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		rp := NewReplay(p)
		for from := ls; from < hwm; {
			b, err := rd.Fetch(ctx, p, from, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range b.Records {
				rp.Apply(r)
				enc, _ := rp.MarshalBinary()
				back, err := UnmarshalReplay(enc)
				if err != nil {
					t.Fatalf("partition %d at %d: %v", p, r.Offset, err)
				}
				if enc2, _ := back.MarshalBinary(); !bytes.Equal(enc, enc2) {
					t.Fatalf("partition %d at %d: state does not round-trip", p, r.Offset)
				}
				rp = back
			}
			from = b.Next
		}
		out = append(out, rp)
	}
	return out
}

// readThrough rebuilds what a read of every stream returns from the
// replayed entries and the records' values in Kafka: the bytes for a byte
// stream, the JSON array of messages for a JSON stream.
func readThrough(t *testing.T, rd *Reader, reps []*Replay) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rp := range reps {
		for _, s := range rp.Streams() {
			if s.SoftDeleted {
				continue
			}
			var koffs []int64
			for _, e := range s.Entries {
				koffs = append(koffs, e.Koff)
			}
			recs, err := rd.FetchRecords(context.Background(), rp.Partition(), koffs)
			if err != nil {
				t.Fatal(err)
			}
			var data []byte
			var msgs [][]byte
			for _, e := range s.Entries {
				v := recs[e.Koff].Value
				if isJSON(s.ContentType) {
					m := Messages(v, e.Cut)
					if int32(len(m)) != e.Msgs {
						t.Fatalf("%s: entry at %d counts %d messages, holds %d", s.Name, e.Koff, e.Msgs, len(m))
					}
					msgs = append(msgs, m...)
				} else {
					if e.Cut >= 0 {
						v = v[:e.Cut]
					}
					data = append(data, v...)
				}
			}
			if isJSON(s.ContentType) {
				data = append([]byte("["), bytes.Join(msgs, []byte(","))...)
				data = append(data, ']')
				if int64(len(msgs)) != s.Messages {
					t.Fatalf("%s: %d messages counted, %d read", s.Name, s.Messages, len(msgs))
				}
			}
			out[s.Name] = fmt.Sprintf("gen=%d closed=%v %s", s.Gen, s.Closed, data)
		}
	}
	return out
}

// readLog is what the service serves of every live stream.
func readLog(t *testing.T, l *Log) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range l.Names() {
		res, err := l.Read(context.Background(), ReadRequest{Name: n, From: Start, MaxBytes: 64 << 20})
		if err != nil {
			t.Fatalf("read %s: %v", n, err)
		}
		l.mu.RLock()
		gen := l.streams[n].meta.gen
		l.mu.RUnlock()
		data := res.Data
		if res.JSON {
			// Messages as a client splits them (json.RawMessage), joined
			// without the whitespace the appends carried.
			var ms []json.RawMessage
			if len(data) > 0 {
				if err := json.Unmarshal(data, &ms); err != nil {
					t.Fatalf("read %s: %v", n, err)
				}
			}
			parts := make([][]byte, len(ms))
			for i, m := range ms {
				parts[i] = m
			}
			data = append(append([]byte("["), bytes.Join(parts, []byte(","))...), ']')
		}
		out[n] = fmt.Sprintf("gen=%d closed=%v %s", gen, res.Closed, data)
	}
	return out
}

// lateLog is a Log on the embedded broker whose produce requests a test
// can hold, so that a write lands late, as one the log gave up on does (the
// write path makes one produce attempt per batch: a held one is given up
// at the produce timeout, its record numbers burnt, and lands when the
// broker lets it).
type lateLog struct {
	*Log
	t      *testing.T
	b      *broker.Broker
	gaveUp chan struct{}
}

// openLate opens a Log with short write and produce timeouts on b.
func openLate(t *testing.T, b *broker.Broker, cfg Config) *lateLog {
	t.Helper()
	ll := &lateLog{t: t, b: b, gaveUp: make(chan struct{}, 1)}
	cfg.Brokers = b.Addrs()
	cfg.WriteTimeout, cfg.produceTimeout = 500*time.Millisecond, 700*time.Millisecond
	cfg.Logf = func(format string, args ...any) {
		if strings.Contains(format, "failed, resyncing") {
			select {
			case ll.gaveUp <- struct{}{}:
			default:
			}
		}
	}
	l, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ll.Log = l
	return ll
}

// hold runs write, a write to stream name (or its create), with the broker
// holding its produce request. The write
// must be answered Unavailable; hold returns once the log has given the
// produce up, with land, which lets the held record land and waits until
// Kafka holds it. The log learns of it only when its next produce to the
// partition lands behind it, or from a restart.
func (ll *lateLog) hold(name string, write func() error) (land func()) {
	t := ll.t
	t.Helper()
	ll.mu.RLock()
	part := ll.rootPartition(name)
	if s := ll.streams[name]; s != nil {
		part = s.meta.part
	}
	ll.mu.RUnlock()
	select {
	case <-ll.gaveUp:
	default:
	}
	c := ll.b.Cluster()
	release, held := brokertest.HoldFirstProduce(c)
	if err := write(); KindOf(err) != Unavailable {
		t.Fatalf("write whose produce the broker holds: %v, want Unavailable", err)
	}
	<-held
	select {
	case <-ll.gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the log did not give the held produce up")
	}
	// It re-reads Kafka next, before it decides anything else: an op that
	// writes nothing returns once it has (the held record must not land
	// before, or the re-read would find it).
	if _, err := ll.parts[part].submit(context.Background(), &op{decide: func(*tx) *pending { return nil }}); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		_, hwm, err := ll.offsets(context.Background(), part)
		if err != nil {
			t.Fatal(err)
		}
		close(release)
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, h, err := ll.offsets(context.Background(), part)
			if err == nil && h > hwm {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the held record did not land: high watermark %d (%v)", h, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// settle runs a write until Kafka answers it: a write that lands behind a
// late record is answered Unavailable (the log re-reads Kafka first), and
// its retry is decided on what Kafka holds.
func settle[T any](t *testing.T, write func() (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := write()
		if KindOf(err) != Unavailable || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// foldState renders the state the fold of Kafka's records decides by and
// leaves, for every stream generation the log holds (soft-deleted sources
// included): record numbers, producers, Stream-Seq, closure, deletion,
// references, the index and the tail.
func foldState(l *Log) map[string]string {
	out := map[string]string{}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for n, s := range l.streams {
		v := s.snapshot()
		var es []string
		for _, e := range v.entries {
			es = append(es, fmt.Sprintf("%d/%d/%d", e.koff, e.rec, e.cut))
		}
		fork := "-"
		if s.meta.source != nil {
			fork = fmt.Sprintf("%s@%d", s.meta.source.meta.name, s.meta.forkPos)
		}
		out[n] = fmt.Sprintf("gen=%d next=%d producers=%v seq=%q closed=%v/%v deleted=%v soft=%v refs=%d trimmed=%v fork=%s own=%d create=%d tail=%d entries=%v",
			s.meta.gen, s.w.nextRec, s.w.producers, s.w.streamSeq, s.w.closed, v.closed, s.w.deleted, s.w.soft, s.w.refs,
			s.meta.trimmed, fork, s.own, v.createKoff, v.tail, es)
	}
	return out
}

// replayState is foldState of what Replay folded.
func replayState(reps []*Replay) map[string]string {
	out := map[string]string{}
	for _, rp := range reps {
		for n, s := range rp.streams {
			var es []string
			for _, e := range s.entries {
				es = append(es, fmt.Sprintf("%d/%d/%d", e.Koff, e.Rec, e.Cut))
			}
			fork := "-"
			if s.source != nil {
				fork = fmt.Sprintf("%s@%d", s.source.name, s.forkPos)
			}
			out[n] = fmt.Sprintf("gen=%d next=%d producers=%v seq=%q closed=%v/%v deleted=%v soft=%v refs=%d trimmed=%v fork=%s own=%d create=%d tail=%d entries=%v",
				s.gen, s.w.nextRec, s.w.producers, s.w.streamSeq, s.w.closed, s.w.closed, s.w.deleted, s.w.soft, s.w.refs,
				s.trimmed, fork, s.own, s.createKoff, s.tail, es)
		}
	}
	return out
}

// sameMaps fails the test with every key where got and want differ.
func sameMaps(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for n := range want {
		if got[n] != want[n] {
			t.Errorf("%s: %s:\n replay  %s\n service %s", what, n, got[n], want[n])
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: %s only in the replay: %s", what, n, got[n])
		}
	}
	t.FailNow()
}

// checkOffsets requires the offsets Replay mints for every live stream to
// be the ones the service issues and accepts: the tail (HEAD), and the
// Stream-Next-Offset after every record, read one record at a time, each
// read starting from the offset Replay gave for the record before.
func checkOffsets(t *testing.T, l *Log, reps []*Replay) {
	t.Helper()
	ctx := context.Background()
	for _, rp := range reps {
		for _, s := range rp.Streams() {
			if s.SoftDeleted {
				continue
			}
			info, err := l.Head(s.Name)
			if err != nil {
				t.Fatal(err)
			}
			if info.Tail != s.Tail {
				t.Fatalf("%s: tail %s in the replay, %s in the service", s.Name, s.Tail, info.Tail)
			}
			from := Zero // the beginning
			for i := range s.Entries {
				res, err := l.Read(ctx, ReadRequest{Name: s.Name, From: from, MaxBytes: 1})
				if err != nil {
					t.Fatalf("%s: read of entry %d from %s (the replay's offset): %v", s.Name, i, from, err)
				}
				want := s.Tail
				if i < len(s.Entries)-1 {
					want = s.End(i)
				}
				if res.Records != 1 || res.Next != want {
					t.Fatalf("%s: read of entry %d from %s: %d records, next %s; the replay says %s", s.Name, i, from, res.Records, res.Next, want)
				}
				from = s.End(i)
			}
		}
	}
}

// TestReplayMatchesService drives every kind of operation through the
// service — JSON batches, forks at stamped offsets and sub-offsets (one at
// an offset the fork inherits from its source), a fork of a fork, soft and
// hard deletes, a name created again, closes — and writes that land late
// as the write path can make them: a write whose answer was lost, a record
// landing after its retry, before it (the retry is then refused as a
// duplicate producer seq), after a close, after a new producer epoch and
// after a higher Stream-Seq, a create landing after its retry created the
// next generation. A direct reader of the topic (Reader + Replay) must
// decide every record as the service did, live and when it restarts: the
// same streams and content, the same write state (record numbers,
// producers, Stream-Seq, closure, the index), the same offsets.
func TestReplayMatchesService(t *testing.T) {
	b, err := broker.Start(broker.Config{DataDir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	l := openLate(t, b, Config{Partitions: 2})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(req CreateRequest) CreateResult {
		t.Helper()
		if req.TTL == 0 {
			req.TTL = -1
		}
		r, err := l.Create(ctx, req)
		must(err)
		return r
	}
	app := func(name, ct, body string) AppendResult {
		t.Helper()
		r, err := l.Append(ctx, AppendRequest{Name: name, ContentType: ct, Body: []byte(body)})
		must(err)
		return r
	}
	const tp, js = "text/plain", "application/json"
	s0 := create(CreateRequest{Name: "s", ContentType: js, Body: []byte(`[{"i":0}, {"i":1}]`)})
	prev := app("s", js, ` {"i":2} `)
	mid := app("s", js, `[{"i":3},{"i":4},{"i":5}]`)
	app("s", js, `{"i":6}`)
	// Forks: at an offset, at a JSON sub-offset inside a batch (from the
	// offset before it, which the service issued), a fork of a fork at a
	// sub-offset, a fork with its own body, a fork of a fork at an offset
	// its source inherited (stamped by s).
	at := mid.Tail
	create(CreateRequest{Name: "s/at", ForkedFrom: "s", ForkOffset: &at})
	app("s/at", js, `{"own":1}`)
	before := prev.Tail
	create(CreateRequest{Name: "s/sub", ForkedFrom: "s", ForkOffset: &before, ForkSub: 2})
	app("s/sub", js, `[{"own":2},{"own":3}]`)
	zero := Offset{}
	create(CreateRequest{Name: "s/sub/deep", ForkedFrom: "s/sub", ForkOffset: &zero, ForkSub: 1})
	create(CreateRequest{Name: "s/body", ForkedFrom: "s", ContentType: js, Body: []byte(`{"body":true}`)})
	early := s0.Info.Tail
	create(CreateRequest{Name: "s/at/early", ForkedFrom: "s/at", ForkOffset: &early})
	// Bytes, closed; a stream closed by its last append.
	create(CreateRequest{Name: "t", ContentType: tp, Body: []byte("abc")})
	app("t", tp, "def")
	_, err = l.Append(ctx, AppendRequest{Name: "t", Close: true})
	must(err)
	create(CreateRequest{Name: "c", ContentType: js})
	_, err = l.Append(ctx, AppendRequest{Name: "c", ContentType: js, Body: []byte(`{"last":true}`), Close: true})
	must(err)

	// Late writes. pw is an append of producer id at epoch/seq.
	pw := func(name, body, id string, epoch, seq int64, streamSeq string) func() (AppendResult, error) {
		return func() (AppendResult, error) {
			return l.Append(ctx, AppendRequest{Name: name, ContentType: tp, Body: []byte(body),
				HasProducer: id != "", ProducerID: id, Epoch: epoch, Seq: seq, StreamSeq: streamSeq})
		}
	}
	do := func(w func() (AppendResult, error)) func() error {
		return func() error { _, err := w(); return err }
	}
	outcome := func(what string, w func() (AppendResult, error), want Outcome, wantKind Kind) {
		t.Helper()
		r, err := settle(t, w)
		if err != nil && KindOf(err) != wantKind || err == nil && (wantKind != 0 || r.Outcome != want) {
			t.Fatalf("%s: %v %v, want outcome %v / error kind %v", what, r.Outcome, err, want, wantKind)
		}
	}
	for _, n := range []string{"late/lost", "late/after", "late/before", "late/closed", "late/epoch", "late/seq"} {
		create(CreateRequest{Name: n, ContentType: tp})
	}
	// A write whose answer is lost (it lands; the broker answers an
	// error): the log re-reads Kafka and takes it; the retry is a
	// duplicate.
	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: 1})
	if _, err := pw("late/lost", "l0;", "p", 0, 0, "")(); KindOf(err) != Unavailable || fault.Hits() != 1 {
		t.Fatalf("append whose answer is lost: %v (fault hit %d times)", err, fault.Hits())
	}
	outcome("retry of the lost answer", pw("late/lost", "l0;", "p", 0, 0, ""), Duplicate, 0)
	// A record landing after its retry: its number was passed.
	outcome("a;", pw("late/after", "a;", "p", 0, 0, ""), Appended, 0)
	land := l.hold("late/after", do(pw("late/after", "b;", "p", 0, 1, "")))
	outcome("retry of b;", pw("late/after", "b;", "p", 0, 1, ""), Appended, 0)
	land()
	outcome("c; behind the late b;", pw("late/after", "c;", "p", 0, 2, ""), Duplicate, 0)
	// A record landing before its retry: the retry is refused as a
	// duplicate producer seq.
	outcome("a;", pw("late/before", "a;", "p", 0, 0, ""), Appended, 0)
	l.hold("late/before", do(pw("late/before", "b;", "p", 0, 1, "")))()
	outcome("retry of b; behind the late b;", pw("late/before", "b;", "p", 0, 1, ""), Duplicate, 0)
	// A close landing late: the append decided before it is refused.
	outcome("x;", pw("late/closed", "x;", "", 0, 0, ""), Appended, 0)
	l.hold("late/closed", func() error {
		_, err := l.Append(ctx, AppendRequest{Name: "late/closed", Close: true})
		return err
	})()
	outcome("y; behind the late close", pw("late/closed", "y;", "", 0, 0, ""), 0, Conflict)
	// A new producer epoch landing late fences the zombie's append.
	outcome("0;", pw("late/epoch", "0;", "z", 0, 0, ""), Appended, 0)
	l.hold("late/epoch", do(pw("late/epoch", "1;", "z", 1, 0, "")))()
	outcome("the zombie's append behind the late epoch", pw("late/epoch", "z;", "z", 0, 1, ""), 0, Fenced)
	// A higher Stream-Seq landing late refuses the lower one decided after.
	outcome("1;", pw("late/seq", "1;", "", 0, 0, "001"), Appended, 0)
	l.hold("late/seq", do(pw("late/seq", "3;", "", 0, 0, "003")))()
	outcome("Stream-Seq 002 behind the late 003", pw("late/seq", "2;", "", 0, 0, "002"), 0, Conflict)
	// A create landing after its retry created the next generation (the
	// failed create burnt generation 1).
	createGen := func() (CreateResult, error) {
		return l.Create(ctx, CreateRequest{Name: "late/gen", ContentType: tp, TTL: -1})
	}
	landGen := l.hold("late/gen", func() error { _, err := createGen(); return err })
	if r, err := settle(t, createGen); err != nil || !r.Created {
		t.Fatalf("retry of the create: %+v %v", r, err)
	}
	landGen()
	outcome("g; behind the late create", pw("late/gen", "g;", "g", 0, 0, ""), Duplicate, 0)
	// Soft delete (s has forks), hard delete of a fork, a name created
	// again after a hard delete.
	must(l.Delete(ctx, "s"))
	must(l.Delete(ctx, "s/body"))
	must(l.Delete(ctx, "c"))
	create(CreateRequest{Name: "c", ContentType: js, Body: []byte(`["again"]`)})
	for i := 0; i < 20; i++ {
		create(CreateRequest{Name: fmt.Sprintf("many/%d", i), ContentType: js, Body: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	// Copies of records that another program wrote into the topic (what
	// an earlier version's kafka-go Writer retries left): a copy of a
	// stream's latest record moves its entry to the copy, a copy of its
	// create too, a copy of an older record is ignored. The service finds
	// them when its next write to the partition lands behind them.
	rd := NewReader(b.Addrs(), l.Topic())
	defer rd.Close()
	copyAndSettle := func(name string, rec int64, ct, body string) {
		t.Helper()
		l.mu.RLock()
		st := l.streams[name]
		l.mu.RUnlock()
		_, hwm, err := rd.Offsets(ctx, st.meta.part)
		must(err)
		var orig *Record
		for from := int64(0); from < hwm && orig == nil; {
			bt, err := rd.Fetch(ctx, st.meta.part, from, 1<<20, 0)
			must(err)
			for i, r := range bt.Records {
				if r.Stream == name && r.Gen == st.meta.gen && r.Rec == rec {
					orig = &bt.Records[i]
				}
			}
			from = bt.Next
		}
		if orig == nil {
			t.Fatalf("no record %d of %s", rec, name)
		}
		res, err := l.producer.Produce(ctx, &kafka.ProduceRequest{Topic: l.Topic(), Partition: int(st.meta.part),
			RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(orig.r.kafkaRecord())})
		must(err)
		must(res.Error)
		_, err = settle(t, func() (AppendResult, error) {
			return l.Append(ctx, AppendRequest{Name: name, ContentType: ct, Body: []byte(body), HasProducer: true, ProducerID: "settle"})
		})
		must(err)
	}
	copyAndSettle("s/sub", 1, js, `{"settle":1}`)
	copyAndSettle("many/3", 0, js, `{"settle":3}`)
	copyAndSettle("late/after", 1, tp, "s;")

	want := readLog(t, l.Log)
	if len(want) != 33 {
		t.Fatalf("service has %d streams: %v", len(want), want)
	}
	reps := replayAll(t, rd, l.Partitions())
	got := readThrough(t, rd, reps)
	sameMaps(t, "content", got, want)
	for n, w := range map[string]string{
		"s/sub/deep":  `gen=1 closed=false [{"i":0}]`,
		"s/sub":       `gen=1 closed=false [{"i":0},{"i":1},{"i":2},{"i":3},{"i":4},{"own":2},{"own":3},{"settle":1}]`,
		"many/3":      `gen=1 closed=false [{"n":3},{"settle":3}]`,
		"s/at/early":  `gen=1 closed=false [{"i":0},{"i":1}]`,
		"c":           `gen=2 closed=false ["again"]`,
		"late/lost":   "gen=1 closed=false l0;",
		"late/after":  "gen=1 closed=false a;b;c;s;",
		"late/before": "gen=1 closed=false a;b;",
		"late/closed": "gen=1 closed=true x;",
		"late/epoch":  "gen=1 closed=false 0;1;",
		"late/seq":    "gen=1 closed=false 1;3;",
		"late/gen":    "gen=2 closed=false g;",
	} {
		if got[n] != w {
			t.Errorf("%s: %s, want %s", n, got[n], w)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	sameMaps(t, "state", replayState(reps), foldState(l.Log))
	checkOffsets(t, l.Log, reps)

	// A restart folds the same records the same way: a full rebuild, then
	// a start from the snapshot the first close wrote.
	must(l.Close())
	for _, cfg := range []Config{{SnapshotRecords: -1}, {}} {
		l2, err := Open(ctx, Config{Brokers: b.Addrs(), SnapshotRecords: cfg.SnapshotRecords})
		must(err)
		if after := readLog(t, l2); !reflect.DeepEqual(after, want) {
			l2.Close()
			t.Fatalf("the service's restart (snapshots %d) changed what it serves", cfg.SnapshotRecords)
		}
		sameMaps(t, "state after a restart", replayState(reps), foldState(l2))
		checkOffsets(t, l2, reps)
		must(l2.Close())
	}
}

// A record that lands after its retry (the log gave its produce up; the
// client's retry was written under a new record number) is in Kafka twice
// with the same producer seq: Replay folds it once, as a Duplicate, as the
// service does. One that lands before its retry makes the retry the second
// copy, which the fold refuses as a duplicate producer seq. Record numbers
// the failed write burnt are Burnt, not Missing; retention is Missing, and
// a stream whose create it removed is Adopted.
func TestReplayDuplicateAndRetention(t *testing.T) {
	for _, c := range []struct {
		name       string
		landFirst  bool
		want       []string
		entryKoffs []int64
	}{
		{"late record lands after the retry", false, []string{
			"0:create rec=0 idx=0 new=0 tail=1",
			"1:append rec=1 idx=0 new=1 tail=2",
			"2:append rec=3 idx=1 new=1 burnt=1 tail=3",
			"3:append rec=2 dup idx=3 new=0 tail=3",
			"4:append rec=4 idx=3 new=1 tail=5",
		}, []int64{1, 2, 4}},
		{"late record lands before the retry", true, []string{
			"0:create rec=0 idx=0 new=0 tail=1",
			"1:append rec=1 idx=0 new=1 tail=2",
			"2:append rec=2 idx=1 new=1 tail=3",
			"3:append rec=3 refused=the producer seq was already accepted idx=3 new=0 tail=3",
			"4:append rec=4 idx=3 new=1 tail=5",
		}, []int64{1, 2, 4}},
	} {
		t.Run(c.name, func(t *testing.T) { replayDuplicate(t, c.landFirst, c.want, c.entryKoffs) })
	}
}

func replayDuplicate(t *testing.T, landFirst bool, want []string, entryKoffs []int64) {
	b, err := broker.Start(broker.Config{DataDir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	l := openLate(t, b, Config{})
	defer l.Close()
	js := "application/json"
	if _, err := l.Create(ctx, CreateRequest{Name: "d", ContentType: js, TTL: -1}); err != nil {
		t.Fatal(err)
	}
	app := func(seq int64, body string) func() (AppendResult, error) {
		return func() (AppendResult, error) {
			return l.Append(ctx, AppendRequest{Name: "d", ContentType: js, Body: []byte(body), HasProducer: true, ProducerID: "p", Seq: seq})
		}
	}
	a, err := app(0, `{"a":1}`)()
	if err != nil {
		t.Fatal(err)
	}
	land := l.hold("d", func() error { _, err := app(1, `[{"b":2},{"c":3}]`)(); return err })
	var retry AppendResult
	if landFirst {
		land()
		retry, err = settle(t, app(1, `[{"b":2},{"c":3}]`))
		if err != nil || retry.Outcome != Duplicate {
			t.Fatalf("retry behind the late record: %v %v, want a duplicate", retry.Outcome, err)
		}
	} else {
		retry, err = app(1, `[{"b":2},{"c":3}]`)()
		if err != nil || retry.Outcome != Appended {
			t.Fatalf("retry before the late record lands: %v %v, want appended", retry.Outcome, err)
		}
		land()
	}
	if _, err := settle(t, app(2, `{"d":4}`)); err != nil {
		t.Fatal(err)
	}

	rd := NewReader(b.Addrs(), l.Topic())
	defer rd.Close()
	bt, err := rd.Fetch(ctx, 0, 0, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := NewReplay(0)
	var got []string
	var changes []Change
	for _, r := range bt.Records {
		ch := rp.Apply(r)
		changes = append(changes, ch)
		line := fmt.Sprintf("%d:%s rec=%d", r.Offset, r.Op, r.Rec)
		if ch.Duplicate {
			line += " dup"
		}
		if ch.Refused != "" {
			line += " refused=" + ch.Refused
		}
		line += fmt.Sprintf(" idx=%d new=%d", ch.Index, len(ch.New))
		if ch.Burnt != 0 {
			line += fmt.Sprintf(" burnt=%d", ch.Burnt)
		}
		if ch.Missing != 0 {
			line += fmt.Sprintf(" missing=%d", ch.Missing)
		}
		got = append(got, line+fmt.Sprintf(" tail=%d", ch.Tail.Pos))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s := rp.Streams()[0]
	var koffs []int64
	for _, e := range s.Entries {
		koffs = append(koffs, e.Koff)
	}
	if !reflect.DeepEqual(koffs, entryKoffs) || s.Entries[1].Msgs != 2 || s.Messages != 4 {
		t.Fatalf("entries %+v: want the batch once, at offsets %v", s.Entries, entryKoffs)
	}
	// What the service serves, live and rebuilt, and the offsets it
	// issued: the tail after {"a":1} is where a read of the batch starts.
	wantRead := map[string]string{"d": `gen=1 closed=false [{"a":1},{"b":2},{"c":3},{"d":4}]`}
	if g := readThrough(t, rd, []*Replay{rp}); !reflect.DeepEqual(g, wantRead) {
		t.Fatalf("replay reads %v, want %v", g, wantRead)
	}
	if g := readLog(t, l.Log); !reflect.DeepEqual(g, wantRead) {
		t.Fatalf("service reads %v, want %v", g, wantRead)
	}
	if from := changes[2].ReadFrom(0); from != a.Tail || changes[1].ReadFrom(0) != Zero {
		t.Fatalf("read offsets %s and %s; the service's tail after {\"a\":1} is %s", changes[1].ReadFrom(0), from, a.Tail)
	}
	res, err := l.Read(ctx, ReadRequest{Name: "d", From: changes[2].ReadFrom(0)})
	if err != nil || string(res.Data) != `[{"b":2},{"c":3},{"d":4}]` {
		t.Fatalf("read from the batch's read offset: %s %v", res.Data, err)
	}
	info, _ := l.Head("d")
	if changes[4].Tail != info.Tail || changes[3].Tail != changes[2].Tail {
		t.Fatalf("tails %s, %s, %s; the service's %s", changes[2].Tail, changes[3].Tail, changes[4].Tail, info.Tail)
	}
	sameMaps(t, "state", replayState([]*Replay{rp}), foldState(l.Log))
	l.Close()
	l2, err := Open(ctx, Config{Brokers: b.Addrs(), SnapshotRecords: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	sameMaps(t, "state after a rebuild", replayState([]*Replay{rp}), foldState(l2))
	if landFirst {
		return
	}

	// Retention: a fetch below the log start is a RetentionError naming
	// what is gone. A Replay that saw the stream's first records and is
	// told of the gap (Gap) counts the numbers skipped across it as
	// Missing; a fresh one adopts the stream at its first record left.
	if err := b.Cluster().DeleteRecords(l.Topic(), 0, 4); err != nil {
		t.Fatal(err)
	}
	_, err = rd.Fetch(ctx, 0, 2, 1<<20, 0)
	var re *RetentionError
	if !errors.As(err, &re) || re.From != 2 || re.LogStart != 4 ||
		re.Error() != "partition 0: offsets 2 to 3 (2 records) were removed by retention before they were read" {
		t.Fatalf("fetch below the log start: %v", err)
	}
	rest, err := rd.Fetch(ctx, 0, 4, 1<<20, 0)
	if err != nil || len(rest.Records) != 1 {
		t.Fatalf("fetch from the log start: %d records, %v", len(rest.Records), err)
	}
	partial := NewReplay(0)
	partial.Apply(bt.Records[0])
	partial.Apply(bt.Records[1])
	partial.Gap(re.LogStart)
	if ch := partial.Apply(rest.Records[0]); ch.Missing != 2 || ch.Burnt != 0 || ch.Index != 1 || len(ch.New) != 1 {
		t.Fatalf("first record after the gap: %+v", ch)
	}
	fresh := NewReplay(0)
	fresh.Gap(re.LogStart)
	if ch := fresh.Apply(rest.Records[0]); !ch.Adopted || ch.Missing != 0 || ch.Index != 0 || len(ch.New) != 1 || ch.Tail != info.Tail {
		t.Fatalf("first record of a stream whose create is gone: %+v", ch)
	}
	if _, err := rd.Fetch(ctx, 0, 99, 1<<20, 0); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("fetch past the end: %v", err)
	}
	start := time.Now()
	bt, err = rd.Fetch(ctx, 0, rest.HighWatermark, 1<<20, 300*time.Millisecond)
	if err != nil || len(bt.Records) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("long poll at the end: %d records, %v, after %s", len(bt.Records), err, time.Since(start))
	}
}

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		value string
		cut   int32
		want  []string
	}{
		{`{"a":1}`, -1, []string{`{"a":1}`}},
		{` [ {"a":1} , {"b":[1,2]},"x" ] `, -1, []string{`{"a":1}`, `{"b":[1,2]}`, `"x"`}},
		{`[{"a":1},{"b":2}]`, 7, []string{`{"a":1}`}},
		{`[[1,2],3]`, -1, []string{`[1,2]`, `3`}},
		{`[]`, -1, []string{}},
	} {
		var got []string
		for _, m := range Messages([]byte(c.value), c.cut) {
			got = append(got, string(m))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Messages(%q, %d) = %q, want %q", c.value, c.cut, got, c.want)
		}
	}
}
