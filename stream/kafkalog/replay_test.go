package kafkalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/broker"
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

// TestReplayMatchesService drives every kind of operation through the
// service — JSON batches, forks at offsets and sub-offsets, a fork of a
// fork, soft and hard deletes, a name created again, closes, a
// Writer-retried append written twice — and requires a direct reader of
// the topic (Reader + Replay) to see exactly the streams and the content
// the service serves, before and after the service restarts.
func TestReplayMatchesService(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	l, err := Open(ctx, Config{Brokers: b.Addrs(), Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(req CreateRequest) {
		t.Helper()
		if req.TTL == 0 {
			req.TTL = -1
		}
		_, err := l.Create(ctx, req)
		must(err)
	}
	app := func(name, ct, body string) AppendResult {
		t.Helper()
		r, err := l.Append(ctx, AppendRequest{Name: name, ContentType: ct, Body: []byte(body)})
		must(err)
		return r
	}
	const tp, js = "text/plain", "application/json"
	create(CreateRequest{Name: "s", ContentType: js, Body: []byte(`[{"i":0}, {"i":1}]`)})
	app("s", js, ` {"i":2} `)
	mid := app("s", js, `[{"i":3},{"i":4},{"i":5}]`)
	app("s", js, `{"i":6}`)
	// Forks: at an offset, at a JSON sub-offset inside a batch, a fork of a
	// fork at a sub-offset, a fork with its own body.
	at := mid.Tail
	create(CreateRequest{Name: "s/at", ForkedFrom: "s", ForkOffset: &at})
	app("s/at", js, `{"own":1}`)
	before := Offset{Partition: at.Partition, Pos: at.Pos - 1}
	create(CreateRequest{Name: "s/sub", ForkedFrom: "s", ForkOffset: &before, ForkSub: 2})
	app("s/sub", js, `[{"own":2},{"own":3}]`)
	zero := Offset{}
	create(CreateRequest{Name: "s/sub/deep", ForkedFrom: "s/sub", ForkOffset: &zero, ForkSub: 1})
	create(CreateRequest{Name: "s/body", ForkedFrom: "s", ContentType: js, Body: []byte(`{"body":true}`)})
	// Bytes, closed; a stream closed by its last append.
	create(CreateRequest{Name: "t", ContentType: tp, Body: []byte("abc")})
	app("t", tp, "def")
	_, err = l.Append(ctx, AppendRequest{Name: "t", Close: true})
	must(err)
	create(CreateRequest{Name: "c", ContentType: js})
	_, err = l.Append(ctx, AppendRequest{Name: "c", ContentType: js, Body: []byte(`{"last":true}`), Close: true})
	must(err)
	// A Writer retry writes an append twice.
	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: 1})
	app("s/at", js, `{"retried":true}`)
	if fault.Hits() != 1 {
		t.Fatalf("fault answered %d produces", fault.Hits())
	}
	app("s/at", js, `{"after":true}`)
	// Soft delete (s has forks), hard delete of a fork, a name created
	// again after a hard delete.
	must(l.Delete(ctx, "s"))
	must(l.Delete(ctx, "s/body"))
	must(l.Delete(ctx, "c"))
	create(CreateRequest{Name: "c", ContentType: js, Body: []byte(`["again"]`)})
	for i := 0; i < 20; i++ {
		create(CreateRequest{Name: fmt.Sprintf("many/%d", i), ContentType: js, Body: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}

	rd := NewReader(b.Addrs(), l.Topic())
	defer rd.Close()
	want := readLog(t, l)
	if len(want) != 25 {
		t.Fatalf("service has %d streams: %v", len(want), want)
	}
	got := readThrough(t, rd, replayAll(t, rd, l.Partitions()))
	if !reflect.DeepEqual(got, want) {
		for n := range want {
			if got[n] != want[n] {
				t.Errorf("%s:\n replay  %s\n service %s", n, got[n], want[n])
			}
		}
		for n := range got {
			if _, ok := want[n]; !ok {
				t.Errorf("%s only in the replay: %s", n, got[n])
			}
		}
		t.FailNow()
	}
	if got["s/sub/deep"] != `gen=1 closed=false [{"i":0}]` || got["c"] != `gen=2 closed=false ["again"]` {
		t.Fatalf("unexpected content: deep %s, c %s", got["s/sub/deep"], got["c"])
	}
	must(l.Close())
	l, err = Open(ctx, Config{Brokers: b.Addrs()})
	must(err)
	defer l.Close()
	if after := readLog(t, l); !reflect.DeepEqual(after, want) {
		t.Fatalf("the service's rebuild changed what it serves")
	}
}

// The second copy of a Writer-retried append is a Duplicate: nothing new,
// and the entry moves to it as in the service.
func TestReplayDuplicateAndRetention(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	l, err := Open(ctx, Config{Brokers: b.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	js := "application/json"
	l.Create(ctx, CreateRequest{Name: "d", ContentType: js, TTL: -1})
	l.Append(ctx, AppendRequest{Name: "d", ContentType: js, Body: []byte(`{"a":1}`)})
	b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: 1})
	l.Append(ctx, AppendRequest{Name: "d", ContentType: js, Body: []byte(`[{"b":2},{"c":3}]`)})
	l.Append(ctx, AppendRequest{Name: "d", ContentType: js, Body: []byte(`{"d":4}`)})

	rd := NewReader(b.Addrs(), l.Topic())
	defer rd.Close()
	bt, err := rd.Fetch(ctx, 0, 0, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	rp := NewReplay(0)
	var got []string
	for _, r := range bt.Records {
		ch := rp.Apply(r)
		got = append(got, fmt.Sprintf("%d:%s dup=%v idx=%d new=%d", r.Offset, r.Op, ch.Duplicate, ch.Index, len(ch.New)))
	}
	want := []string{"0:create dup=false idx=0 new=0", "1:append dup=false idx=0 new=1", "2:append dup=false idx=1 new=1",
		"3:append dup=true idx=3 new=0", "4:append dup=false idx=3 new=1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes:\n%v\nwant\n%v", got, want)
	}
	if es := rp.Streams()[0].Entries; es[1].Koff != 3 || es[1].Msgs != 2 {
		t.Fatalf("entries %+v: the retried append should be read at its later copy, offset 3", es)
	}

	// Retention: a fetch below the log start is a RetentionError naming
	// what is gone; a record whose create is gone is adopted and counts
	// records skipped from there on.
	if err := b.Cluster().DeleteRecords(l.Topic(), 0, 2); err != nil {
		t.Fatal(err)
	}
	_, err = rd.Fetch(ctx, 0, 0, 1<<20, 0)
	var re *RetentionError
	if !errors.As(err, &re) || re.From != 0 || re.LogStart != 2 ||
		re.Error() != "partition 0: offsets 0 to 1 (2 records) were removed by retention before they were read" {
		t.Fatalf("fetch below the log start: %v", err)
	}
	bt, err = rd.Fetch(ctx, 0, 2, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := NewReplay(0)
	ch := fresh.Apply(bt.Records[0])
	if !ch.Adopted || ch.Index != 0 || len(ch.New) != 1 || ch.New[0].Msgs != 2 {
		t.Fatalf("first record after retention: %+v", ch)
	}
	if _, err := rd.Fetch(ctx, 0, 99, 1<<20, 0); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("fetch past the end: %v", err)
	}
	start := time.Now()
	bt, err = rd.Fetch(ctx, 0, bt.HighWatermark, 1<<20, 300*time.Millisecond)
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
