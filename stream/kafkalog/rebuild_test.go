package kafkalog

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/broker"
)

// snapshotAll captures everything a client can observe of every stream:
// metadata, the whole content, reads from every offset, producer state.
func snapshotAll(t *testing.T, l *Log, producers []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	names := l.Names()
	sort.Strings(names)
	for _, n := range names {
		info, err := l.Head(n)
		if err != nil {
			t.Fatalf("head %s: %v", n, err)
		}
		info.ID = "" // generation id is stable, but compare content only
		s := fmt.Sprintf("info=%+v", info)
		from := Start
		for i := 0; ; i++ {
			res, err := l.Read(ctx, ReadRequest{Name: n, From: from, MaxBytes: 7})
			if err != nil {
				t.Fatalf("read %s: %v", n, err)
			}
			s += fmt.Sprintf(" | %s %q next=%s up=%v closed=%v", from, res.Data, res.Next, res.UpToDate, res.Closed)
			from = res.Next
			if res.UpToDate {
				break
			}
		}
		for _, p := range producers {
			e, q, known, _ := l.ProducerState(n, p)
			s += fmt.Sprintf(" | %s=%d/%d/%v", p, e, q, known)
		}
		out[n] = s
	}
	// Soft-deleted streams are invisible but still block their name.
	for _, n := range []string{"src", "mid"} {
		if _, err := l.Head(n); err != nil {
			out["!"+n] = fmt.Sprint(KindOf(err))
		}
	}
	return out
}

// TestRebuildMatchesLive drives a mix of every operation, then restarts the
// log three times and requires a client to see exactly the same streams,
// bytes, offsets and producer state each time: with a full rebuild from the
// data topic, with a snapshot taken on the way and the records after it
// replayed (as after a crash), and with the snapshot a clean close writes.
func TestRebuildMatchesLive(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  Config
		// how the start must have made each partition's state
		snapshot, replay bool
	}{
		{"full rebuild", Config{SnapshotRecords: -1}, false, true},
		{"snapshot then replay", Config{SnapshotRecords: 7, SnapshotMinInterval: time.Nanosecond, NoSnapshotOnClose: true}, true, true},
		{"snapshot on close", Config{}, true, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			rebuildMatchesLive(t, mode.cfg, func(t *testing.T, l *Log) {
				snapshots, replayed := 0, 0
				for _, r := range l.Restored() {
					if r.FromSnapshot {
						snapshots++
					} else if r.Why != "no snapshot" && mode.snapshot {
						t.Errorf("partition %d: snapshot not used: %s", r.Partition, r.Why)
					}
					replayed += r.Replayed
				}
				if (snapshots > 0) != mode.snapshot || (replayed > 0) != mode.replay {
					t.Fatalf("restored %+v: want snapshots %v, records replayed %v", l.Restored(), mode.snapshot, mode.replay)
				}
			})
		})
	}
}

func rebuildMatchesLive(t *testing.T, cfg Config, checkRestore func(*testing.T, *Log)) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	cfg.Brokers, cfg.Partitions = b.Addrs(), 3
	open := func() *Log {
		l, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
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
	app := func(name, ct, body string, prod string, epoch, seq int64) AppendResult {
		t.Helper()
		r, err := l.Append(ctx, AppendRequest{Name: name, ContentType: ct, Body: []byte(body), HasProducer: prod != "", ProducerID: prod, Epoch: epoch, Seq: seq})
		must(err)
		return r
	}
	const tp, js = "text/plain", "application/json"
	// A root with producers, a closed stream, JSON with batches.
	create(CreateRequest{Name: "src", ContentType: tp, Body: []byte("hello ")})
	app("src", tp, "world", "w", 0, 0)
	mid := app("src", tp, "-and-more", "w", 0, 1)
	app("src", tp, "!", "w", 1, 0)
	create(CreateRequest{Name: "done", ContentType: tp, Body: []byte("final"), Closed: true})
	create(CreateRequest{Name: "j", ContentType: js, Body: []byte(`[{"a":1},{"b":2}]`)})
	app("j", js, `{"c":3}`, "w", 0, 0)
	app("j", js, `[[1,2],{"d":4}]`, "w", 0, 1)
	_, err = l.Append(ctx, AppendRequest{Name: "j", Close: true, HasProducer: true, ProducerID: "w", Epoch: 0, Seq: 2})
	must(err)
	// Forks: at an offset, with byte and JSON sub-offsets, a fork of a fork.
	at := mid.Tail
	create(CreateRequest{Name: "mid", ForkedFrom: "src", ForkOffset: &at})
	app("mid", tp, "+fork", "w", 0, 0)
	zero := Offset{}
	create(CreateRequest{Name: "sub", ForkedFrom: "src", ForkOffset: &zero, ForkSub: 3})
	create(CreateRequest{Name: "jsub", ForkedFrom: "j", ForkOffset: &zero, ForkSub: 1})
	create(CreateRequest{Name: "deep", ForkedFrom: "mid"})
	app("deep", tp, "+deep", "", 0, 0)
	// Soft delete (src has forks), hard delete, re-creation of a name.
	must(l.Delete(ctx, "src"))
	must(l.Delete(ctx, "done"))
	create(CreateRequest{Name: "done", ContentType: js, Body: []byte(`["reborn"]`)})
	// Many small streams spread over the partitions.
	for i := 0; i < 30; i++ {
		n := fmt.Sprintf("s/%d", i)
		create(CreateRequest{Name: n, ContentType: tp})
		app(n, tp, n, "p", int64(i%3), 0)
	}
	producers := []string{"w", "p"}
	want := snapshotAll(t, l, producers)
	if got := want["sub"]; got == "" {
		t.Fatal("fork sub missing")
	}
	for restart := 1; restart <= 3; restart++ {
		l.Close()
		l = open()
		checkRestore(t, l)
		got := snapshotAll(t, l, producers)
		if !reflect.DeepEqual(got, want) {
			for k := range want {
				if got[k] != want[k] {
					t.Errorf("restart %d: %s\n live:  %s\n after: %s", restart, k, want[k], got[k])
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("restart %d: %s appeared: %s", restart, k, got[k])
				}
			}
			t.FailNow()
		}
	}
	// Spot-check the content the snapshot compared.
	check := func(name, want string) {
		t.Helper()
		res, err := l.Read(ctx, ReadRequest{Name: name, From: Start})
		must(err)
		if string(res.Data) != want {
			t.Errorf("%s = %q, want %q", name, res.Data, want)
		}
	}
	check("mid", "hello world-and-more+fork")
	check("deep", "hello world-and-more+fork+deep")
	check("sub", "hel")
	check("jsub", `[{"a":1}]`)
	check("j", `[{"a":1},{"b":2},{"c":3},[1,2],{"d":4}]`)
	check("done", `["reborn"]`)
	if _, err := l.Head("src"); KindOf(err) != Gone {
		t.Errorf("soft-deleted src: %v, want Gone", err)
	}
	// Deleting the last forks of src cascades: the name is free again.
	must(l.Delete(ctx, "sub"))
	must(l.Delete(ctx, "deep"))
	must(l.Delete(ctx, "mid"))
	if _, err := l.Head("src"); KindOf(err) != NotFound {
		t.Errorf("src after its forks were deleted: %v, want NotFound", err)
	}
	l.Close()
	l = open()
	defer l.Close()
	if _, err := l.Head("src"); KindOf(err) != NotFound {
		t.Errorf("src after restart: %v, want NotFound", err)
	}
	if r, err := l.Create(ctx, CreateRequest{Name: "src", ContentType: tp, TTL: -1}); err != nil || !r.Created {
		t.Errorf("re-create src: %+v %v", r, err)
	}
}
