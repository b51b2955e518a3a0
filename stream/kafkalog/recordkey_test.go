package kafkalog

import (
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestRecordMAC: a MAC is over the topic, the partition, the key, the
// value and every header in order; changing any of them, or the secret,
// makes it wrong, and a record must carry exactly one.
func TestRecordMAC(t *testing.T) {
	k := &recordKey{secret: []byte("0123456789abcdef0123456789abcdef")}
	m := k.newMacer("forklab.streams", 0)
	r := record{op: opAppend, stream: "s/1", gen: 1, rec: 2, contentType: "text/plain", value: []byte("hello"), ttl: -1}
	hs := r.headers()
	hs = append(hs, m.header([]byte(r.stream), r.value, hs))
	if len(hs[len(hs)-1].Value) != 32 || !m.valid([]byte("s/1"), []byte("hello"), hs) {
		t.Fatalf("the record's own MAC %q is not valid", hs[len(hs)-1].Value)
	}
	changed := map[string]func() bool{
		"value":     func() bool { return m.valid([]byte("s/1"), []byte("hellO"), hs) },
		"key":       func() bool { return m.valid([]byte("s/2"), []byte("hello"), hs) },
		"partition": func() bool { return k.newMacer("forklab.streams", 1).valid([]byte("s/1"), []byte("hello"), hs) },
		"topic": func() bool {
			return k.newMacer("forklab.streams.snapshots", 0).valid([]byte("s/1"), []byte("hello"), hs)
		},
		"secret": func() bool {
			return (&recordKey{secret: []byte("0123456789abcdef0123456789abcdeF")}).newMacer("forklab.streams", 0).valid([]byte("s/1"), []byte("hello"), hs)
		},
		"a header's value": func() bool {
			h2 := append([]kafka.Header(nil), hs...)
			h2[3] = kafka.Header{Key: h2[3].Key, Value: []byte("3")}
			return m.valid([]byte("s/1"), []byte("hello"), h2)
		},
		"a header added": func() bool {
			h2 := append([]kafka.Header{{Key: HeaderClosed, Value: []byte("true")}}, hs...)
			return m.valid([]byte("s/1"), []byte("hello"), h2)
		},
		"two MACs": func() bool { return m.valid([]byte("s/1"), []byte("hello"), append(hs, hs[len(hs)-1])) },
		"no MAC":   func() bool { return m.valid([]byte("s/1"), []byte("hello"), hs[:len(hs)-1]) },
		// A key and value boundary moved: the lengths are in the MAC.
		"boundary": func() bool { return m.valid([]byte("s/1h"), []byte("ello"), hs) },
	}
	for name, valid := range changed {
		if valid() {
			t.Errorf("%s changed: the MAC is still valid", name)
		}
	}
	// Below the offset the key file names, records are trusted as they are.
	k.from = []int64{10}
	if !k.trusted(m, 9, []byte("x"), nil, nil) || k.trusted(m, 10, []byte("x"), nil, nil) {
		t.Errorf("trusted below 10 / at 10: want true / false")
	}
	var nilKey *recordKey
	if !nilKey.trusted(nil, 10, []byte("x"), nil, nil) || nilKey.newMacer("t", 0) != nil {
		t.Errorf("no key: every record is trusted")
	}
}

// BenchmarkRecordMAC is the cost the MAC adds to each record written and
// to each record read back on a rebuild: a 100-byte append with producer
// headers.
func BenchmarkRecordMAC(b *testing.B) {
	k := &recordKey{secret: []byte("0123456789abcdef0123456789abcdef")}
	m := k.newMacer("forklab.streams", 0)
	r := record{op: opAppend, stream: "sessions/abc", gen: 1, rec: 2, contentType: "application/json",
		value: []byte(strings.Repeat("x", 100)), hasProducer: true, producerID: "worker-1", epoch: 3, seq: 41, ttl: -1}
	hs := r.headers()
	hs = append(hs, m.header([]byte(r.stream), r.value, hs))
	b.Run("write", func(b *testing.B) {
		for b.Loop() {
			m.header([]byte(r.stream), r.value, hs[:len(hs)-1])
		}
	})
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if !m.valid([]byte(r.stream), r.value, hs) {
				b.Fatal("not valid")
			}
		}
	})
}
