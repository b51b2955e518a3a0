package kafkalog

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// The log's places where outside bytes enter, fuzzed (make fuzz): the
// opaque offset a reader hands back, the records of the Kafka topics
// (anyone who can produce to them writes their headers and values), and a
// snapshot's bytes. Seeds are the f.Add calls and
// testdata/fuzz/<name>/ beside this file (a failing input found goes there).

// FuzzParseOffset: any text either is refused or is an offset whose text
// form is the text itself (one spelling per offset), and the byte-wise
// order of two offsets' first 33 characters is their order (§8).
func FuzzParseOffset(f *testing.F) {
	f.Add("0000000000000000_0000000000000002_1_3bb06b0c", "0000000000000000_0000000000000000")
	f.Add("0000000000000003_9999999999999999_9223372036854775807_ffffffff", "0000000002147483647_0000000000000001")
	f.Add("-1", "now")
	f.Fuzz(func(t *testing.T, a, b string) {
		oa, erra := ParseOffset(a)
		ob, errb := ParseOffset(b)
		for _, c := range []struct {
			s   string
			o   Offset
			err error
		}{{a, oa, erra}, {b, ob, errb}} {
			if c.err != nil {
				if c.err != ErrBadOffset {
					t.Fatalf("ParseOffset(%q): %v, want ErrBadOffset", c.s, c.err)
				}
				continue
			}
			if got := c.o.String(); got != c.s {
				t.Fatalf("ParseOffset(%q) = %+v, which prints as %q", c.s, c.o, got)
			}
			if c.o.Partition < 0 || c.o.Pos < 0 || c.o.Pos > MaxPos || c.o.Gen < 0 {
				t.Fatalf("ParseOffset(%q) = %+v: out of range", c.s, c.o)
			}
		}
		if erra == nil && errb == nil {
			if cmp := strings.Compare(a[:bareLen], b[:bareLen]); (cmp < 0) != oa.Less(ob) || (cmp > 0) != ob.Less(oa) {
				t.Fatalf("%q and %q: byte order %d, Less %v/%v", a, b, cmp, oa.Less(ob), ob.Less(oa))
			}
		}
	})
}

// fuzzHeaders splits s into record headers: lines "key=value".
func fuzzHeaders(s string) []kafka.Header {
	var hs []kafka.Header
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		hs = append(hs, kafka.Header{Key: k, Value: []byte(v)})
	}
	return hs
}

// FuzzDecodeRecord: a record of the data topic with any key, value and
// headers (the producer headers among them) either is not the log's, or
// decodes to a record whose own encoding decodes to the same record; with
// a record key, a record is trusted only with the MAC the log writes, and
// the log's MAC over it is always valid.
func FuzzDecodeRecord(f *testing.F) {
	f.Add("s/1", "hello", "forklab-op=append\nforklab-stream=s/1\nforklab-gen=1\nforklab-rec=2\ncontent-type=text/plain\nproducer-id=w\nproducer-epoch=0\nproducer-seq=3")
	f.Add("s/2", "", "forklab-op=create\nforklab-stream=s/2\nforklab-gen=2\nforklab-rec=0\ncontent-type=application/json\nstream-ttl=60\nstream-expires-at=2026-01-01T00:00:00Z\nstream-forked-from=s/1\nforklab-fork-gen=1\nstream-fork-offset=0000000000000000_0000000000000002_1_3bb06b0c\nstream-fork-sub-offset=3\nforklab-fork-cut=1:3")
	f.Add("z1", "FORGED", "forklab-op=append\nforklab-stream=z1")
	f.Add("z1", "x", "forklab-op=delete\nforklab-gen=1\nforklab-rec=1\nforklab-reason=expired\nforklab-mac=00000000000000000000000000000000")
	key := &recordKey{secret: []byte("fuzz-secret-0123456789abcdef"), from: []int64{0}}
	mac := key.newMacer(DefaultTopic, 0)
	f.Fuzz(func(t *testing.T, k, v, headers string) {
		hs := fuzzHeaders(headers)
		r, ok, err := decodeRecord([]byte(k), []byte(v), hs, time.Unix(0, 0))
		if err != nil && ok {
			t.Fatalf("decodeRecord: ok with error %v", err)
		}
		signed := append(append([]kafka.Header(nil), hs...), mac.header([]byte(k), []byte(v), hs))
		if !mac.valid([]byte(k), []byte(v), signed) && !hasMAC(hs) {
			t.Fatalf("the log's own MAC over %q is not valid", headers)
		}
		if hasMAC(hs) && mac.valid([]byte(k), []byte(v), hs) {
			t.Fatalf("a MAC in the input (%q) was accepted: forged", headers)
		}
		if !ok || err != nil {
			return
		}
		// The log writes what it decoded: the same record comes back.
		again, ok2, err2 := decodeRecord([]byte(r.stream), r.value, r.headers(), time.Unix(0, 0))
		if !ok2 || err2 != nil {
			t.Fatalf("%+v: its own encoding does not decode: %v", r, err2)
		}
		if !sameRecord(r, again) {
			t.Fatalf("decoded %+v, re-encoded and decoded %+v", r, again)
		}
	})
}

func hasMAC(hs []kafka.Header) bool {
	for _, h := range hs {
		if h.Key == HeaderMAC {
			return true
		}
	}
	return false
}

// sameRecord compares the fields the log writes (headers() writes the
// producer headers only as a set of three, and the create's fields only
// for a create).
func sameRecord(a, b record) bool {
	if a.op != opCreate {
		a.ttl, a.expiresAt, a.forkedFrom, a.forkGen, a.forkOffset, a.forkSub, a.forkCutKoff, a.forkCut = -1, time.Time{}, "", 0, "", 0, -1, -1
		b.ttl, b.expiresAt, b.forkedFrom, b.forkGen, b.forkOffset, b.forkSub, b.forkCutKoff, b.forkCut = -1, time.Time{}, "", 0, "", 0, -1, -1
	}
	if a.forkedFrom == "" {
		a.forkGen, a.forkOffset, a.forkSub, a.forkCutKoff, a.forkCut = 0, "", 0, -1, -1
		b.forkGen, b.forkOffset, b.forkSub, b.forkCutKoff, b.forkCut = 0, "", 0, -1, -1
	}
	if a.forkCut < 0 {
		a.forkCutKoff, b.forkCutKoff = -1, -1
	}
	return a.op == b.op && a.stream == b.stream && a.gen == b.gen && a.rec == b.rec && a.contentType == b.contentType &&
		bytes.Equal(a.value, b.value) && a.closed == b.closed && a.hasProducer == b.hasProducer &&
		a.producerID == b.producerID && a.epoch == b.epoch && a.seq == b.seq && a.streamSeq == b.streamSeq &&
		a.ttl == b.ttl && a.expiresAt.Equal(b.expiresAt) && a.forkedFrom == b.forkedFrom && a.forkGen == b.forkGen &&
		a.forkOffset == b.forkOffset && a.forkSub == b.forkSub && a.forkCutKoff == b.forkCutKoff && a.forkCut == b.forkCut &&
		a.reason == b.reason
}

// FuzzDecodeSnapshot: any bytes either are refused with an error or are a
// snapshot whose encoding decodes to the same snapshot.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte{})
	f.Add((&partSnapshot{Partition: 0, Covered: 3}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		again, err := decodeSnapshot(snap.encode())
		if err != nil {
			t.Fatalf("a decoded snapshot's encoding does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, snap) {
			t.Fatalf("snapshot does not round-trip:\n%+v\n%+v", snap, again)
		}
	})
}
