package kafkalog

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/forklab/forklab/stream/broker"
)

// TestOffsetRoundTrip renders and parses offsets at every boundary of each
// field: the text form must give back exactly the offset, bare and stamped.
func TestOffsetRoundTrip(t *testing.T) {
	parts := []int32{0, 1, 2, 9, 10, 99, 1 << 16, math.MaxInt32 - 1, math.MaxInt32}
	poss := []int64{0, 1, 9, 10, 99, 100, 1<<31 - 1, 1 << 31, 1<<32 - 1, 1 << 32, MaxPos - 1, MaxPos}
	gens := []int64{0, 1, 9, 10, 1<<31 - 1, 1 << 32, math.MaxInt64}
	sums := []uint32{0, 1, 0x0f, 0x10, 0xdeadbeef, math.MaxUint32}
	for _, p := range parts {
		for _, q := range poss {
			for _, g := range gens {
				for _, c := range sums {
					o := Offset{Partition: p, Pos: q, Gen: g, Sum: c}
					if g == 0 {
						o.Sum = 0 // the bare form has no check
					}
					s := o.String()
					want := bareLen
					if g > 0 {
						want = stampedMin - 1 + len(fmt.Sprint(g))
					}
					if len(s) != want {
						t.Fatalf("%+v renders as %q (%d chars), want %d", o, s, len(s), want)
					}
					if !strings.HasPrefix(s, fmt.Sprintf("%016d_%016d", p, q)) {
						t.Fatalf("%+v renders as %q: the first 33 characters must be partition and Kafka offset", o, s)
					}
					back, err := ParseOffset(s)
					if err != nil || back != o {
						t.Fatalf("ParseOffset(%q) = %+v, %v; want %+v", s, back, err, o)
					}
				}
			}
		}
	}
}

// TestParseOffsetRefuses lists text that is not an offset, in particular
// fields that do not fit: a partition above the int32 range must be an
// error, never wrap (4294967296 read as partition 0) or be clamped.
func TestParseOffsetRefuses(t *testing.T) {
	ok := stamp("s", 1, 0, 5).String()
	bad := []string{
		"", "-1", "now", "abc",
		"0000002147483648_0000000000000001",                              // partition MaxInt32+1
		"0000004294967296_0000000000000001",                              // 2^32: would wrap to 0
		"0000004294967297_0000000000000001",                              // 2^32+1: would wrap to 1
		"9999999999999999_9999999999999999_1_00000000",                   // partition far too large
		"0000000000000000_000000000000001",                               // 15 digits
		"000000000000000_00000000000000001",                              // 15 + 17
		"0000000000000000-0000000000000001",                              // wrong separator
		"0000000000000000_000000000000000a",                              // letter
		"+000000000000000_0000000000000001",                              // sign
		"0000000000000000_0000000000000001_",                             // empty stamp
		"0000000000000000_0000000000000001_1",                            // no check
		"0000000000000000_0000000000000001_1_0000000",                    // 7 hex digits
		"0000000000000000_0000000000000001_1_000000000",                  // 9 hex digits
		"0000000000000000_0000000000000001_0_00000000",                   // generation 0
		"0000000000000000_0000000000000001_01_00000000",                  // leading zero
		"0000000000000000_0000000000000001_1_0000000G",                   // not hex
		"0000000000000000_0000000000000001_1_DEADBEEF",                   // upper-case hex
		"0000000000000000_0000000000000001_1-00000000",                   // wrong separator
		"0000000000000000_0000000000000001_9223372036854775808_00000000", // generation beyond int64
		"0000000000000000_0000000000000001_x_00000000",
		ok + "0", " " + ok, ok[:len(ok)-1],
	}
	for _, s := range bad {
		if o, err := ParseOffset(s); err == nil {
			t.Errorf("ParseOffset(%q) = %+v, want an error", s, o)
		}
	}
}

// TestOffsetOrder checks that byte-wise order of the text forms is the
// log's order (partition, then Kafka offset), across partitions and field
// widths, as §8 requires of offsets of one stream.
func TestOffsetOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() Offset {
		p := int32(rng.IntN(4))
		q := []int64{0, 1, 9, 10, 11, 99, 100, 101, 1 << 20, MaxPos}[rng.IntN(10)] + int64(rng.IntN(3))
		q = min(q, MaxPos)
		return stamp("s", 1+int64(rng.IntN(20)), p, q)
	}
	for i := 0; i < 20000; i++ {
		a, b := pick(), pick()
		if a.Partition == b.Partition && a.Pos == b.Pos {
			continue // one position of one stream always carries one stamp
		}
		if got, want := a.String() < b.String(), a.Less(b); got != want {
			t.Fatalf("%s < %s is %v as text, %v as offsets", a, b, got, want)
		}
	}
	if !(Zero.String() < stamp("s", 1, 0, 1).String()) {
		t.Fatal("Zero must sort before every issued offset")
	}
}

// TestOffsetsBelongToTheirStream issues offsets on streams in several
// partitions and checks, for every pair of streams, that each accepts
// exactly its own offsets (and, for a fork, its source's up to the fork
// point): every other offset is a 400, an earlier generation's a 410.
// Reading from every offset a stream issued gives exactly the rest of the
// stream, so an off-by-one in the positions (the record instead of the one
// after it) or a lost order shows as duplicated or missing bytes.
func TestOffsetsBelongToTheirStream(t *testing.T) {
	l, closeLog := openPartitions(t, t.TempDir(), 4)
	defer closeLog()
	ctx := context.Background()
	tp := "text/plain"
	// Streams spread over the partitions, interleaved so that no stream's
	// records are contiguous.
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	issued := map[string][]Offset{}
	data := map[string]string{}
	for _, n := range names {
		res, err := l.Create(ctx, CreateRequest{Name: n, ContentType: tp, TTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		issued[n] = append(issued[n], res.Info.Tail)
	}
	parts := map[int32]bool{}
	for _, n := range names {
		_, p, _ := l.Location(n)
		parts[p] = true
	}
	if len(parts) < 3 {
		t.Fatalf("streams landed in %d partitions, want at least 3", len(parts))
	}
	for round := 0; round < 4; round++ {
		for _, n := range names {
			v := fmt.Sprintf("%s%d;", n, round)
			r, err := l.Append(ctx, AppendRequest{Name: n, ContentType: tp, Body: []byte(v)})
			if err != nil {
				t.Fatal(err)
			}
			data[n] += v
			issued[n] = append(issued[n], r.Tail)
		}
	}
	// A fork of "a" after its second append, with appends of its own.
	fork := "a-fork"
	fc, err := l.Create(ctx, CreateRequest{Name: fork, ForkedFrom: "a", ForkOffset: &issued["a"][2], TTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Append(ctx, AppendRequest{Name: fork, ContentType: tp, Body: []byte("F;")})
	if err != nil {
		t.Fatal(err)
	}
	issued[fork] = []Offset{issued["a"][0], issued["a"][1], issued["a"][2], fc.Info.Tail, r.Tail}
	data[fork] = "a0;a1;F;"
	names = append(names, fork)

	// Offsets read back chunk by chunk are issued offsets too.
	for _, n := range names {
		from := Start
		for reads := 0; ; reads++ {
			if reads > 20 {
				t.Fatalf("%s: still not up to date after %d one-record reads", n, reads)
			}
			res, err := l.Read(ctx, ReadRequest{Name: n, From: from, MaxBytes: 1})
			if err != nil {
				t.Fatalf("%s: read from %s: %v", n, from, err)
			}
			if !contains(issued[n], res.Next) {
				issued[n] = append(issued[n], res.Next)
			}
			if res.UpToDate {
				break
			}
			from = res.Next
		}
	}

	for _, n := range names {
		own := map[Offset]bool{}
		for _, o := range issued[n] {
			own[o] = true
		}
		for _, o := range issued[n] {
			res, err := l.Read(ctx, ReadRequest{Name: n, From: o})
			if err != nil {
				t.Fatalf("%s: own offset %s: %v", n, o, err)
			}
			// The rest of the stream from o: a suffix of its data that
			// starts at a record boundary.
			at := len(data[n]) - len(res.Data)
			if !strings.HasSuffix(data[n], string(res.Data)) || (at > 0 && data[n][at-1] != ';') {
				t.Fatalf("%s: read from %s gives %q, not a suffix of %q at a record boundary", n, o, res.Data, data[n])
			}
		}
		for _, m := range names {
			for _, o := range issued[m] {
				if own[o] {
					continue
				}
				_, err := l.Read(ctx, ReadRequest{Name: n, From: o})
				if KindOf(err) != BadRequest {
					t.Fatalf("%s read from %s (issued by %s): %v, want BadRequest", n, o, m, err)
				}
			}
		}
		// Every position of the partition that the stream did not issue,
		// stamped as the stream would stamp it, is refused too.
		info, _ := l.Head(n)
		s, _ := l.lookup(n)
		for pos := int64(0); pos <= info.Tail.Pos+2; pos++ {
			o := s.mint(pos)
			_, err := l.Read(ctx, ReadRequest{Name: n, From: o})
			if own[o] != (err == nil) {
				t.Fatalf("%s: read from position %d (%s): %v; issued: %v", n, pos, o, err, own[o])
			}
			if err != nil && KindOf(err) != BadRequest {
				t.Fatalf("%s: position %d: %v, want BadRequest", n, pos, err)
			}
			// The same position in another partition is never this stream's.
			for p := int32(0); p < 4; p++ {
				if p == s.meta.part {
					continue
				}
				wrong := stamp(n, s.meta.gen, p, pos)
				if _, err := l.Read(ctx, ReadRequest{Name: n, From: wrong}); KindOf(err) != BadRequest {
					t.Fatalf("%s: position %d in partition %d: %v, want BadRequest", n, pos, p, err)
				}
			}
		}
	}
}

// TestOldGenerationOffset re-creates a stream and hands back an offset of
// the deleted generation: reads (catch-up and live) and forks refuse it as
// Gone, and the bare form of an issued offset is refused as never issued.
func TestOldGenerationOffset(t *testing.T) {
	l, closeLog := openTest(t, t.TempDir())
	defer closeLog()
	ctx := context.Background()
	js := "application/json"
	if _, err := l.Create(ctx, CreateRequest{Name: "s", ContentType: js, TTL: -1}); err != nil {
		t.Fatal(err)
	}
	old, err := l.Append(ctx, AppendRequest{Name: "s", ContentType: js, Body: []byte(`{"old":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	created, err := l.Create(ctx, CreateRequest{Name: "s", ContentType: js, TTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, AppendRequest{Name: "s", ContentType: js, Body: []byte(`{"new":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(ctx, ReadRequest{Name: "s", From: old.Tail}); KindOf(err) != Gone {
		t.Fatalf("read from the old generation's tail: %v, want Gone", err)
	}
	if _, err := l.Wait(ctx, ReadRequest{Name: "s", From: old.Tail}, 0); KindOf(err) != Gone {
		t.Fatalf("wait from the old generation's tail: %v, want Gone", err)
	}
	if _, err := l.Create(ctx, CreateRequest{Name: "f", ForkedFrom: "s", ForkOffset: &old.Tail, TTL: -1}); KindOf(err) != Gone {
		t.Fatalf("fork at the old generation's tail: %v, want Gone", err)
	}
	if e, err := l.EarliestOffset("s"); err != nil || e != Zero {
		t.Fatalf("earliest offset %s %v, want the beginning (%s): Kafka retains all of the new generation", e, err, Zero)
	}
	bare, _ := ParseOffset(created.Info.Tail.String()[:bareLen])
	if _, err := l.Read(ctx, ReadRequest{Name: "s", From: bare}); KindOf(err) != BadRequest {
		t.Fatalf("read from the bare form of an issued offset: %v, want BadRequest", err)
	}
	res, err := l.Read(ctx, ReadRequest{Name: "s", From: created.Info.Tail})
	if err != nil || string(res.Data) != `[{"new":1}]` {
		t.Fatalf("read from the new generation's first offset: %q %v", res.Data, err)
	}
}

// openPartitions opens a log whose topic has n partitions.
func openPartitions(t *testing.T, dir string, n int) (*Log, func()) {
	t.Helper()
	b, err := broker.Start(broker.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(context.Background(), Config{Brokers: b.Addrs(), Partitions: n})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	return l, func() { l.Close(); b.Close() }
}

func contains(os []Offset, o Offset) bool {
	for _, x := range os {
		if x == o {
			return true
		}
	}
	return false
}
