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
		snap := &partSnapshot{Partition: int32(rng.IntN(8)), Covered: rng.Int64N(1 << 40), Last: rng.Uint32(),
			Gens: map[string]int64{}, Removed: map[string]int64{}}
		for i := rng.IntN(5); i > 0; i-- {
			snap.Gens[randName(rng)] = rng.Int64N(9) + 1
			snap.Removed[randName(rng)] = rng.Int64N(9) + 1
		}
		for i := rng.IntN(6); i > 0; i-- {
			s := streamSnap{Name: randName(rng), ContentType: "text/plain", Gen: rng.Int64N(5) + 1, TTL: rng.Int64N(3) - 1,
				ForkPos: rng.Int64N(100) - 1, ForkSub: rng.Int64N(4), Source: rng.IntN(len(snap.Streams)+1) - 1,
				Trimmed: rng.IntN(2) == 0, Current: rng.IntN(2) == 0, NextRec: rng.Int64N(100), Burnt: rng.Int64N(100),
				Producers: map[string]fence.State{}, Closed: rng.IntN(2) == 0, Deleted: rng.IntN(2) == 0, Soft: rng.IntN(2) == 0,
				Refs: rng.IntN(3), CreateKoff: rng.Int64N(1000) - 1, Tail: rng.Int64N(1 << 40)}
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
		damage    func(t *testing.T, l *Log, b *broker.Broker)
	}{
		{"torn chunk", "torn: chunk 0 does not match", func(t *testing.T, l *Log, b *broker.Broker) {
			m := readManifest(t, l)
			putSnapshotRecord(t, l, chunkKey(0, m.Slot, 0), []byte("garbage"))
		}},
		{"missing chunk", "torn: chunk 0 of 1 is missing", func(t *testing.T, l *Log, b *broker.Broker) {
			m := readManifest(t, l)
			putSnapshotRecord(t, l, chunkKey(0, m.Slot, 0), nil)
		}},
		{"other version", "another version", func(t *testing.T, l *Log, b *broker.Broker) {
			m := readManifest(t, l)
			m.Version = snapshotVersion + 1
			mb, _ := json.Marshal(m)
			putSnapshotRecord(t, l, manifestKey(0), mb)
		}},
		{"manifest not JSON", "manifest is not JSON", func(t *testing.T, l *Log, b *broker.Broker) {
			putSnapshotRecord(t, l, manifestKey(0), []byte("{"))
		}},
		{"covers more than the topic holds", "the partition ends at", func(t *testing.T, l *Log, b *broker.Broker) {
			snap := l.capture(l.parts[0])
			snap.Covered += 100
			if err := l.writeSnapshot(context.Background(), l.parts[0], snap); err != nil {
				t.Fatal(err)
			}
		}},
		{"another last record", "is not the one it ends at", func(t *testing.T, l *Log, b *broker.Broker) {
			snap := l.capture(l.parts[0])
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
			c.damage(t, l, b)
			// ... until it is damaged. (skip the snapshot of this close)
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

func readManifest(t *testing.T, l *Log) manifest {
	t.Helper()
	kv, err := l.readSnapshotTopic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(kv[manifestKey(0)], &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return m
}

// putSnapshotRecord writes one record to the snapshot topic; a nil value
// is a tombstone.
func putSnapshotRecord(t *testing.T, l *Log, key string, value []byte) {
	t.Helper()
	rec := kafka.Record{Key: kafka.NewBytes([]byte(key))}
	if value != nil {
		rec.Value = kafka.NewBytes(value)
	}
	res, err := l.producer.Produce(context.Background(), &kafka.ProduceRequest{Topic: l.cfg.SnapshotTopic, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(rec)})
	if err != nil || res.Error != nil {
		t.Fatalf("produce %s: %v %v", key, err, res.Error)
	}
}
