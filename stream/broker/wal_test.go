package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func recs(tag string, n int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{Key: []byte("s"), Value: []byte(fmt.Sprintf("%s%d", tag, i)),
			Headers: []kafka.Header{{Key: "forklab-op", Value: []byte("append")}, {Key: "empty", Value: []byte{}}}}
	}
	return out
}

func values(rs []Record) string {
	var b strings.Builder
	for _, r := range rs {
		b.Write(r.Value)
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}

// TestRecoverFrames: what the journal's frames say the partition holds,
// by the rules of recoverFrames.
func TestRecoverFrames(t *testing.T) {
	for _, c := range []struct {
		name      string
		frames    []frame
		start     int64
		wantVals  string
		wantCount int
	}{
		{"contiguous", []frame{{10, recs("a", 2)}, {12, recs("b", 3)}}, 10, "a0 a1 b0 b1 b2", 5},
		{"a failed batch written again at its base", []frame{{10, recs("a", 2)}, {12, recs("x", 3)}, {12, recs("b", 1)}}, 10, "a0 a1 b0", 3},
		{"a retry over part of an earlier frame", []frame{{10, recs("a", 3)}, {11, recs("b", 1)}}, 10, "a0 b0", 2},
		{"past a checkpoint the records start over", []frame{{10, recs("a", 2)}, {20, recs("b", 2)}}, 20, "b0 b1", 2},
		{"none", nil, 0, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			start, got := recoverFrames(c.frames)
			if start != c.start || values(got) != c.wantVals || len(got) != c.wantCount {
				t.Fatalf("got start %d %q (%d records), want %d %q", start, values(got), len(got), c.start, c.wantVals)
			}
		})
	}
}

// TestFrameRoundTrip: a frame decodes to exactly what was encoded (nil and
// empty keys and values told apart, headers, timestamps), and readFrames
// stops at the first frame that is torn, fails its checksum or belongs to
// another epoch.
func TestFrameRoundTrip(t *testing.T) {
	in := []Record{
		{Key: []byte("k"), Value: []byte("v"), Headers: []kafka.Header{{Key: "h", Value: []byte("x")}}, Time: time.UnixMilli(1700000000123)},
		{Key: nil, Value: []byte{}},
		{Key: []byte{}, Value: nil, Headers: []kafka.Header{{Key: "", Value: nil}}},
	}
	var raw []byte
	raw = appendFrame(raw, 7, 100, in)
	raw = appendFrame(raw, 7, 103, recs("b", 2))
	got := readFrames(raw, 7)
	if len(got) != 2 || got[0].base != 100 || got[1].base != 103 {
		t.Fatalf("frames %+v", got)
	}
	if !reflect.DeepEqual(got[0].recs, in) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", got[0].recs, in)
	}
	one := len(appendFrame(nil, 7, 100, in))
	for _, c := range []struct {
		name  string
		raw   []byte
		epoch uint64
		want  int
	}{
		{"torn second frame", raw[:len(raw)-3], 7, 1},
		{"zeros after the first", append(append([]byte{}, raw[:one]...), make([]byte, 64)...), 7, 1},
		{"flipped byte in the second", flip(raw, one+30), 7, 1},
		{"flipped byte in the first", flip(raw, 30), 7, 0},
		{"another epoch", raw, 8, 0},
	} {
		if n := len(readFrames(c.raw, c.epoch)); n != c.want {
			t.Errorf("%s: %d frames, want %d", c.name, n, c.want)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 0xff
	return c
}

// TestJournalRecovery is a crash of the machine in small: records written
// through the journal and produced, kfake's segment file cut back to what
// the last checkpoint synced (or to the middle of the next batch, a torn
// write), and a restart: Start produces the journal's records again at
// the offsets they were acknowledged at, once (a second restart adds
// nothing). A journal that starts past what the broker holds (synced
// records lost: the directory was damaged) is refused.
func TestJournalRecovery(t *testing.T) {
	for _, c := range []struct {
		name string
		cut  func(synced, size int64) int64
	}{
		{"cut to the last synced size", func(synced, _ int64) int64 { return synced }},
		{"torn batch after it", func(synced, _ int64) int64 { return synced + 30 }},
		{"nothing lost", func(_, size int64) int64 { return size }},
	} {
		t.Run(c.name, func(t *testing.T) { journalRecovery(t, c.cut) })
	}
	t.Run("journal past the broker", func(t *testing.T) {
		dir := t.TempDir()
		b, cl := startJournaled(t, dir)
		j := b.Journal("t")
		produceJournaled(t, cl, j, 0, recs("a", 3))
		if err := j.Checkpoint(0); err != nil {
			t.Fatal(err)
		}
		produceJournaled(t, cl, j, 3, recs("b", 2))
		b.crash()
		cutSegment(t, dir, func(int64) int64 { return 0 })
		_, err := Start(Config{DataDir: dir})
		if err == nil || !strings.Contains(err.Error(), "the journal starts at 3") {
			t.Fatalf("start: %v, want the journal-past-the-broker error", err)
		}
	})
}

func journalRecovery(t *testing.T, cut func(synced, size int64) int64) {
	dir := t.TempDir()
	b, cl := startJournaled(t, dir)
	j := b.Journal("t")
	a := recs("a", 3)
	produceJournaled(t, cl, j, 0, a)
	if err := j.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	synced := segmentSize(t, dir)
	bb, cc := recs("b", 4), recs("c", 2)
	produceJournaled(t, cl, j, 3, bb)
	produceJournaled(t, cl, j, 7, cc)
	size := segmentSize(t, dir)
	b.crash()
	cutSegment(t, dir, func(int64) int64 { return cut(synced, size) })
	want := append(append(append([]Record{}, a...), bb...), cc...)
	lost := 6
	if cut(synced, size) == size {
		lost = 0
	}
	for restart := 0; restart < 2; restart++ {
		b, err := Start(Config{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if restart == 0 && b.Recovered != lost || restart == 1 && b.Recovered != 0 {
			t.Fatalf("restart %d: %d records recovered, want %d", restart, b.Recovered, map[int]int{0: lost, 1: 0}[restart])
		}
		got := fetchAll(t, b)
		if len(got) != len(want) {
			t.Fatalf("restart %d: %d records, want %d", restart, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i].Value, want[i].Value) || !bytes.Equal(got[i].Key, want[i].Key) || !sameHeaders(got[i].Headers, want[i].Headers) {
				t.Fatalf("restart %d: offset %d holds %q %q %v, want %q %q %v", restart, i, got[i].Key, got[i].Value, got[i].Headers, want[i].Key, want[i].Value, want[i].Headers)
			}
		}
		b.Close()
	}
}

func startJournaled(t *testing.T, dir string) (*Broker, *kafka.Client) {
	t.Helper()
	b, err := Start(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cl := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
	if _, err := cl.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	return b, cl
}

// produceJournaled is what the log does with a batch: the journal's write
// and the produce side by side, both checked.
func produceJournaled(t *testing.T, cl *kafka.Client, j *Journal, base int64, rs []Record) {
	t.Helper()
	wait := j.Write(0, base, rs)
	krecs := make([]kafka.Record, len(rs))
	for i, r := range rs {
		krecs[i] = kafka.Record{Key: kafka.NewBytes(r.Key), Value: kafka.NewBytes(r.Value), Headers: r.Headers}
	}
	res, err := cl.Produce(context.Background(), &kafka.ProduceRequest{Topic: "t", Partition: 0, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(krecs...)})
	if err != nil || res.Error != nil || res.BaseOffset != base {
		t.Fatalf("produce at %d: %v %+v", base, err, res)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}

func segmentPath(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "kafka", "partitions", "t-0", "*.dat"))
	if len(m) != 1 {
		t.Fatalf("segment files %v, want one", m)
	}
	return m[0]
}

func segmentSize(t *testing.T, dir string) int64 {
	st, err := os.Stat(segmentPath(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func cutSegment(t *testing.T, dir string, to func(int64) int64) {
	t.Helper()
	p := segmentPath(t, dir)
	if err := os.Truncate(p, to(segmentSize(t, dir))); err != nil {
		t.Fatal(err)
	}
}

func fetchAll(t *testing.T, b *Broker) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", b.Addrs()[0], "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	for int64(len(out)) < last {
		m, err := conn.ReadMessage(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		if m.Offset != int64(len(out)) {
			t.Fatalf("offset %d, want %d", m.Offset, len(out))
		}
		out = append(out, m)
	}
	return out
}

// sameHeaders compares headers by key and bytes (Kafka does not tell an
// empty header value from a missing one).
func sameHeaders(a, b []kafka.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// TestJournalRecoveryTime measures what the journal adds to a start after
// a crash, at its worst: a full journal (DefaultJournalBytes of 100-byte
// records with the log's headers, in batches of 16) whose records kfake
// lost (its segment cut to its size at the checkpoint: every record
// produced again), and the same journal whose records kfake still holds
// (a crash of the process: read and skipped). A measurement, not a test:
// FORKLAB_BENCH_JOURNAL=1.
func TestJournalRecoveryTime(t *testing.T) {
	if os.Getenv("FORKLAB_BENCH_JOURNAL") == "" {
		t.Skip("a measurement: FORKLAB_BENCH_JOURNAL=1")
	}
	for _, lost := range []bool{false, true} {
		dir := t.TempDir()
		b, cl := startJournaled(t, dir)
		j := b.Journal("t")
		val := make([]byte, 100)
		hdr := []kafka.Header{{Key: "forklab-op", Value: []byte("append")}, {Key: "forklab-stream", Value: []byte("bench-s-1")},
			{Key: "forklab-gen", Value: []byte("1")}, {Key: "forklab-rec", Value: []byte("12345")}, {Key: "content-type", Value: []byte("application/octet-stream")},
			{Key: "producer-id", Value: []byte("bench")}, {Key: "producer-epoch", Value: []byte("0")}, {Key: "producer-seq", Value: []byte("12345")}}
		batch := make([]Record, 16)
		for i := range batch {
			batch[i] = Record{Key: []byte("bench-s-1"), Value: val, Headers: hdr}
		}
		frame := int64(len(appendFrame(nil, 1, 0, batch)))
		n := int64(0)
		for pos := int64(walHeaderSize); pos+frame <= DefaultJournalBytes; pos += frame {
			produceJournaled(t, cl, j, n, batch)
			n += int64(len(batch))
		}
		b.crash()
		if lost {
			cutSegment(t, dir, func(int64) int64 { return 0 })
		}
		t0 := time.Now()
		b, err := Start(Config{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(t0)
		b.Close()
		fmt.Printf("journal of %d records (%d MiB): start with kfake holding them %v: %s (%d produced again)\n",
			n, DefaultJournalBytes>>20, !lost, el.Round(time.Millisecond), b.Recovered)
	}
}
