package kafkalog

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/stream/broker"
	"github.com/forklab/forklab/stream/fence"
)

// TestSnapshotRoundTrip encodes random partition states and decodes them
// back: every field must survive, and every truncation of the encoding must
// be refused, not decoded into something else.
func TestSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		snap := &partSnapshot{Partition: int32(rng.IntN(8)), Delta: rng.IntN(2) == 0, Covered: rng.Int64N(1 << 40), Last: rng.Uint32(),
			Gens: map[string]int64{}, Removed: map[string]int64{}}
		for i := rng.IntN(3); i > 0; i-- {
			snap.Dropped = append(snap.Dropped, skey{randName(rng), rng.Int64N(9) + 1})
		}
		for i := rng.IntN(5); i > 0; i-- {
			snap.Gens[randName(rng)] = rng.Int64N(9) + 1
			snap.Removed[randName(rng)] = rng.Int64N(9) + 1
		}
		for i := rng.IntN(6); i > 0; i-- {
			s := streamSnap{Name: randName(rng), ContentType: "text/plain", Gen: rng.Int64N(5) + 1, TTL: rng.Int64N(3) - 1,
				ForkPos: rng.Int64N(100) - 1, ForkSub: rng.Int64N(4),
				Trimmed: rng.IntN(2) == 0, Current: rng.IntN(2) == 0, Appended: rng.IntN(2) == 0, NextRec: rng.Int64N(100), Burnt: rng.Int64N(100),
				Producers: map[string]fence.State{}, Closed: rng.IntN(2) == 0, Deleted: rng.IntN(2) == 0, Soft: rng.IntN(2) == 0,
				Refs: rng.IntN(3), CreateKoff: rng.Int64N(1000) - 1, Tail: rng.Int64N(1 << 40)}
			if rng.IntN(2) == 0 {
				s.Source = skey{randName(rng), rng.Int64N(9) + 1}
			}
			if rng.IntN(2) == 0 {
				s.ExpiresAt = time.Unix(0, rng.Int64N(1<<62)).UTC()
				s.ForkedFrom, s.ForkOffset = randName(rng), stamp("x", 1, 0, 5).String()
			}
			if rng.IntN(2) == 0 {
				s.Closer = &producerTuple{id: randName(rng), epoch: rng.Int64N(3), seq: rng.Int64N(99)}
				s.StreamSeq = randName(rng)
			}
			for j := rng.IntN(4); j > 0; j-- {
				s.Producers[randName(rng)] = fence.State{Known: true, Epoch: rng.Int64N(1 << 50), LastSeq: rng.Int64N(fence.MaxValue)}
			}
			k, rec := rng.Int64N(1000), int64(0)
			for j := rng.IntN(50); j > 0; j-- {
				k += rng.Int64N(1 << uint(rng.IntN(40)))
				rec += rng.Int64N(3)
				cut := int32(-1)
				if rng.IntN(10) == 0 {
					cut = rng.Int32N(1 << 20)
				}
				s.Entries = append(s.Entries, entry{koff: k, rec: rec, cut: cut})
			}
			s.Own = rng.IntN(len(s.Entries) + 1)
			snap.Streams = append(snap.Streams, s)
		}
		b := snap.encode()
		got, err := decodeSnapshot(b)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if len(got.Streams) == 0 {
			got.Streams = nil
		}
		for i := range got.Streams {
			if len(got.Streams[i].Entries) == 0 {
				got.Streams[i].Entries = nil
			}
		}
		if !reflect.DeepEqual(got, snap) {
			t.Fatalf("trial %d: decoded\n%#v\nwant\n%#v", trial, got, snap)
		}
		for cut := 0; cut < len(b); cut += 1 + len(b)/50 {
			if _, err := decodeSnapshot(b[:cut]); err == nil {
				t.Fatalf("trial %d: %d of %d bytes decoded without error", trial, cut, len(b))
			}
		}
	}
	if _, err := decodeSnapshot(append([]byte{99}, (&partSnapshot{}).encode()[1:]...)); err == nil || !strings.Contains(err.Error(), "another version") {
		t.Fatalf("snapshot of version 99: %v", err)
	}
}

func randName(rng *rand.Rand) string {
	const chars = "abcxyz/-._0123é"
	var b strings.Builder
	for i := rng.IntN(12) + 1; i > 0; i-- {
		b.WriteByte(chars[rng.IntN(len(chars))])
	}
	return b.String()
}

// TestSnapshotIgnored damages the snapshot a clean close wrote in every way
// the start must notice: a torn chunk (checksum), a missing chunk, another
// format version, a manifest that is not JSON, a snapshot covering records
// the data topic does not hold, one whose last record is not the one at
// its offset. Each time the start ignores the snapshot, says why, rebuilds
// the partition from the data topic, and a client sees the same state.
func TestSnapshotIgnored(t *testing.T) {
	for _, c := range []struct {
		name, why string
		damage    func(t *testing.T, l *Log)
	}{
		{"torn chunk", "torn: chunk 0 does not match", func(t *testing.T, l *Log) {
			m := readManifest(t, l)
			putSnapshotRecord(t, l, chunkPartition, chunkKey(0, m.Slot, -1, 0), []byte("garbage"))
			m.Full.Last++ // the damaged chunk is read, not the good one before it
			putManifest(t, l, m)
		}},
		{"missing chunk", "torn: chunk 0 of 1 is missing", func(t *testing.T, l *Log) {
			m := readManifest(t, l)
			m.Full.First, m.Full.Last = m.Full.Last+1, m.Full.Last+1 // where no chunk is
			putManifest(t, l, m)
		}},
		{"other version", "another version", func(t *testing.T, l *Log) {
			m := readManifest(t, l)
			m.Version = snapshotVersion + 1
			putManifest(t, l, m)
		}},
		{"manifest not JSON", "manifest is not JSON", func(t *testing.T, l *Log) {
			putSnapshotRecord(t, l, manifestPartition, manifestKey(0), []byte("{"))
		}},
		{"covers more than the topic holds", "the partition ends at", func(t *testing.T, l *Log) {
			snap, _ := l.capture(l.parts[0], nil)
			snap.Covered += 100
			if err := l.writeSnapshot(context.Background(), l.parts[0], snap); err != nil {
				t.Fatal(err)
			}
		}},
		{"another last record", "is not the one it ends at", func(t *testing.T, l *Log) {
			snap, _ := l.capture(l.parts[0], nil)
			snap.Last++
			if err := l.writeSnapshot(context.Background(), l.parts[0], snap); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := context.Background()
			cfg := Config{Brokers: b.Addrs()}
			l, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, l)
			want := snapshotAll(t, l, []string{"w"})
			l.Close()
			// The snapshot the close wrote is used...
			l, err = Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r := l.Restored()[0]; !r.FromSnapshot || r.Replayed != 0 {
				t.Fatalf("after a clean close: %+v, want the snapshot and nothing replayed", r)
			}
			c.damage(t, l)
			// ... until it is damaged. (no snapshot on this close)
			l.cfg.NoSnapshotOnClose = true
			l.Close()
			l, err = Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			r := l.Restored()[0]
			if r.FromSnapshot || !strings.Contains(r.Why, c.why) || r.Replayed == 0 {
				t.Fatalf("restored %+v, want a full rebuild because %q", r, c.why)
			}
			if got := snapshotAll(t, l, []string{"w"}); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the rebuild:\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestSnapshotChain writes a chain (a full snapshot and deltas after it:
// new streams, appends, a record copy that rewrites an index entry, a
// fork, deletes, a re-creation) and restarts from it; then damages one
// delta, and the start uses the chain up to it and replays the rest. Each
// time a client sees what it saw live.
func TestSnapshotChain(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	cfg := Config{Brokers: b.Addrs(), SnapshotRecords: -1}
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ensureSnapshotTopic(ctx); err != nil {
		t.Fatal(err)
	}
	p := l.parts[0]
	snapNow := func() {
		t.Helper()
		var prev *snapMarks
		if !p.nextIsFull() {
			prev = p.marks
		}
		done := make(chan error)
		// On the partition goroutine, between batches.
		p.ops <- &op{done: make(chan error, 1), decide: func(*tx) *pending {
			snap, marks := l.capture(p, prev)
			go func() {
				err := l.writeSnapshot(ctx, p, snap)
				if err == nil {
					p.marks = marks
				}
				done <- err
			}()
			return nil
		}}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	tp := "text/plain"
	app := func(name, v string) {
		t.Helper()
		for try := 0; ; try++ {
			_, err := l.Append(ctx, AppendRequest{Name: name, ContentType: tp, Body: []byte(v), HasProducer: true, ProducerID: name + v, Seq: 0})
			if err == nil {
				return
			}
			// After a record copy the next write is not acknowledged
			// (it lands behind a record the log did not write).
			if KindOf(err) != Unavailable || try > 50 {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	create := func(name string) {
		t.Helper()
		if _, err := l.Create(ctx, CreateRequest{Name: name, ContentType: tp, TTL: -1}); err != nil {
			t.Fatal(err)
		}
	}
	create("a")
	create("b")
	app("a", "1;")
	snapNow() // full
	app("a", "2;")
	create("c")
	app("c", "c1;")
	snapNow() // delta 0: a appended, c new
	app("b", "b1;")
	if _, err := l.Create(ctx, CreateRequest{Name: "f", ForkedFrom: "a", TTL: -1}); err != nil {
		t.Fatal(err)
	}
	app("f", "f1;")
	if err := l.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	snapNow() // delta 1: b appended, f new, c dropped, a's refs
	create("c")
	app("c", "again;")
	app("a", "3;")
	snapNow()              // delta 2: c again, a appended
	copyRecord(t, l, "3;") // a copy of a's last record: its index entry moves there
	app("b", "b2;")
	if a, _ := l.lookup("a"); a.rewrites != 1 {
		t.Fatalf("the copy rewrote %d entries of a, want 1", a.rewrites)
	}
	snapNow() // delta 3: a rewritten (all its index), b appended
	if got := len(p.chain.Deltas); got != 4 {
		t.Fatalf("chain of %d deltas, want 4", got)
	}
	app("a", "4;") // after the chain: replayed
	want := snapshotAll(t, l, nil)
	l.cfg.NoSnapshotOnClose = true
	l.Close()

	cfg.SnapshotRecords = 0
	reopen := func() *Log {
		t.Helper()
		l, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.cfg.NoSnapshotOnClose = true
		return l
	}
	l = reopen()
	if r := l.Restored()[0]; !r.FromSnapshot || r.Replayed != 1 || r.Why != "" {
		t.Fatalf("restored %+v, want the chain and 1 record replayed", r)
	}
	if got := snapshotAll(t, l, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the chain:\n%v\nwant\n%v", got, want)
	}
	// Delta 1 torn: the chain ends at delta 0, the rest is replayed.
	m := readManifest(t, l)
	putSnapshotRecord(t, l, chunkPartition, chunkKey(0, m.Slot, 1, 0), []byte("garbage"))
	m.Deltas[1].First, m.Deltas[1].Last = m.Deltas[3].Last+1, m.Deltas[3].Last+1
	putManifest(t, l, m)
	l.Close()
	l = reopen()
	defer l.Close()
	r := l.Restored()[0]
	if !r.FromSnapshot || r.Covered != m.Deltas[0].Covered || !strings.Contains(r.Why, "deltas from 2 of 4 not used") {
		t.Fatalf("restored %+v, want the chain to delta 0 (covering %d)", r, m.Deltas[0].Covered)
	}
	if got := snapshotAll(t, l, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the chain to delta 0:\n%v\nwant\n%v", got, want)
	}
}

// fill writes a few streams: appends with a producer, a fork, a delete.
func fill(t *testing.T, l *Log) {
	t.Helper()
	ctx := context.Background()
	tp := "text/plain"
	for _, n := range []string{"a", "b", "src"} {
		if _, err := l.Create(ctx, CreateRequest{Name: n, ContentType: tp, TTL: -1}); err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 5; i++ {
			if _, err := l.Append(ctx, AppendRequest{Name: n, ContentType: tp, Body: []byte(n), HasProducer: true, ProducerID: "w", Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := l.Create(ctx, CreateRequest{Name: "mid", ForkedFrom: "src", TTL: -1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
}

// copyRecord writes the record of the data topic whose value is v to it
// again, as a retried produce whose first attempt landed did.
func copyRecord(t *testing.T, l *Log, v string) {
	t.Helper()
	recs, _, _, err := l.fetchBatch(context.Background(), 0, 0, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range recs {
		if string(f.value) == v {
			res, err := l.producer.Produce(context.Background(), &kafka.ProduceRequest{Topic: l.cfg.Topic, RequiredAcks: kafka.RequireAll,
				Records: kafka.NewRecordReader(kafka.Record{Key: kafka.NewBytes(f.key), Value: kafka.NewBytes(f.value), Headers: f.headers})})
			if err != nil || res.Error != nil {
				t.Fatal(err, res)
			}
			return
		}
	}
	t.Fatalf("no record %q", v)
}

func readManifest(t *testing.T, l *Log) manifest {
	t.Helper()
	ms, err := l.readManifests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(ms[manifestKey(0)], &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return m
}

func putManifest(t *testing.T, l *Log, m manifest) {
	t.Helper()
	b, _ := json.Marshal(m)
	putSnapshotRecord(t, l, manifestPartition, manifestKey(0), b)
}

// putSnapshotRecord writes one record to a partition of the snapshot
// topic; a nil value is a tombstone.
func putSnapshotRecord(t *testing.T, l *Log, part int, key string, value []byte) {
	t.Helper()
	rec := kafka.Record{Key: kafka.NewBytes([]byte(key))}
	if value != nil {
		rec.Value = kafka.NewBytes(value)
	}
	res, err := l.producer.Produce(context.Background(), &kafka.ProduceRequest{Topic: l.cfg.SnapshotTopic, Partition: part, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(rec)})
	if err != nil || res.Error != nil {
		t.Fatalf("produce %s: %v %v", key, err, res.Error)
	}
}
