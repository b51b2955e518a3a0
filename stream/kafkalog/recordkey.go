package kafkalog

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/internal/atomicfile"
)

// Record authentication. The log is the only writer of its topics, but
// anyone who can reach Kafka can produce to them: a record with forklab's
// headers would be folded in as an append (or a delete, or a newer
// generation that ends the stream), and the log's next batch, landing
// behind a record it did not write, would be answered 503. So every record
// the log writes, to the data topic and to the snapshot topic, carries
// HeaderMAC: an HMAC-SHA256 (RFC 2104), cut to 16 bytes (RFC 2104 §5 allows
// a cut of at least half the output), over the topic, the partition, the
// key, the value and every other header, in order, each length-prefixed,
// under a key only the log knows (Config.RecordKeyFile). The log folds in
// only records whose MAC is right: any other is foreign, never served, and
// a batch that lands behind foreign records alone is acknowledged
// (partition.flush). Records written before the key existed are trusted as
// they are: the key file records, per partition, the offset from which
// records must carry a MAC (the high watermark when the key was made).
//
// A copy of a record the log wrote keeps a valid MAC; the fold's record
// numbers make a copy harmless, as a retried produce's copy is.

// HeaderMAC is the record header that authenticates a record: 32 lower-case
// hexadecimal digits.
const HeaderMAC = "forklab-mac"

// macBytes is the length of a MAC before hex encoding.
const macBytes = 16

// recordKey is the secret that authenticates the log's records, and for
// each partition of the data topic the offset from which records must
// carry a MAC.
type recordKey struct {
	secret []byte
	from   []int64
}

// keyFile is the record key file's format.
type keyFile struct {
	Note string `json:"note"`
	// Key is the secret, base64 (32 bytes).
	Key string `json:"key"`
	// Topics holds, per data topic, the offset of each partition from
	// which its records must carry a MAC.
	Topics map[string]keyTopic `json:"topics"`
}

type keyTopic struct {
	AuthenticatedFrom []int64 `json:"authenticated_from"`
}

const keyNote = "forklab log: the secret that authenticates the records this service writes to Kafka. Keep it private (mode 0600). Removing it makes the next start write a new one and trust the records already in the topic as they are."

// loadRecordKey reads the key file at path, or creates it with a fresh
// secret. The data topic's partitions that the file does not list yet
// (a new file, a new topic) get their current high watermark as the
// offset from which records must carry a MAC: the records already there
// were written before the key existed. The file is written atomically,
// private (0600), before the log writes anything.
func (l *Log) loadRecordKey(ctx context.Context, path string, parts int) (*recordKey, error) {
	var kf keyFile
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		secret := make([]byte, 32)
		rand.Read(secret) // never fails (crypto/rand)
		kf = keyFile{Key: base64.StdEncoding.EncodeToString(secret)}
	case err != nil:
		return nil, fmt.Errorf("record key: %w", err)
	default:
		if err := json.Unmarshal(raw, &kf); err != nil {
			return nil, fmt.Errorf("record key %s: %v; restore it, or remove it to start a new key (the records in the topic are then trusted as they are)", path, err)
		}
	}
	secret, err := base64.StdEncoding.DecodeString(kf.Key)
	if err != nil || len(secret) < 16 {
		return nil, fmt.Errorf("record key %s: the key is not base64 of at least 16 bytes; restore it, or remove it to start a new key (the records in the topic are then trusted as they are)", path)
	}
	if kf.Topics == nil {
		kf.Topics = map[string]keyTopic{}
	}
	kt := kf.Topics[l.cfg.Topic]
	changed := raw == nil || len(kt.AuthenticatedFrom) < parts
	for p := len(kt.AuthenticatedFrom); p < parts; p++ {
		_, hwm, err := l.offsets(ctx, int32(p))
		if err != nil {
			return nil, fmt.Errorf("record key: high watermark of %s/%d: %w", l.cfg.Topic, p, err)
		}
		kt.AuthenticatedFrom = append(kt.AuthenticatedFrom, hwm)
	}
	if changed {
		kf.Note = keyNote
		kf.Topics[l.cfg.Topic] = kt
		if err := writePrivate(path, kf); err != nil {
			return nil, fmt.Errorf("record key: %w", err)
		}
	}
	return &recordKey{secret: secret, from: kt.AuthenticatedFrom}, nil
}

// writePrivate writes v as JSON to path atomically, readable by its owner
// only.
func writePrivate(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	return f.Commit()
}

// macer computes and checks MACs; one per goroutine (the hash is reused).
type macer struct {
	h     hash.Hash
	buf   []byte
	sum   []byte
	topic string
	part  int32
}

// newMacer returns a macer for records of topic/part, nil without a key.
func (k *recordKey) newMacer(topic string, part int32) *macer {
	if k == nil {
		return nil
	}
	return &macer{h: hmac.New(sha256.New, k.secret), topic: topic, part: part}
}

// compute returns the MAC of a record: key, value and its headers other
// than HeaderMAC, in order.
func (m *macer) compute(key, value []byte, headers []kafka.Header) []byte {
	m.h.Reset()
	b := append(m.buf[:0], "forklab-record/1\x00"...)
	b = appendField(b, []byte(m.topic))
	b = binary.BigEndian.AppendUint32(b, uint32(m.part))
	b = appendField(b, key)
	b = binary.AppendUvarint(b, uint64(len(value)))
	m.h.Write(b)
	m.h.Write(value)
	b = b[:0]
	for _, h := range headers {
		if h.Key == HeaderMAC {
			continue
		}
		b = appendField(b, []byte(h.Key))
		b = appendField(b, h.Value)
	}
	m.h.Write(b)
	m.buf = b
	m.sum = m.h.Sum(m.sum[:0])
	return m.sum[:macBytes]
}

func appendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

// header returns the HeaderMAC header of a record with these key, value
// and headers.
func (m *macer) header(key, value []byte, headers []kafka.Header) kafka.Header {
	return kafka.Header{Key: HeaderMAC, Value: hex.AppendEncode(nil, m.compute(key, value, headers))}
}

// valid reports whether a record carries exactly one HeaderMAC and it is
// right. A nil macer (no key) takes every record.
func (m *macer) valid(key, value []byte, headers []kafka.Header) bool {
	if m == nil {
		return true
	}
	var got []byte
	n := 0
	for _, h := range headers {
		if h.Key == HeaderMAC {
			got = h.Value
			n++
		}
	}
	if n != 1 || len(got) != 2*macBytes {
		return false
	}
	var want [2 * macBytes]byte
	hex.Encode(want[:], m.compute(key, value, headers))
	return hmac.Equal(got, want[:])
}

// trusted reports whether the data record at koff of partition m.part is
// the log's: it carries a valid MAC, or it was written before the key
// existed.
func (k *recordKey) trusted(m *macer, koff int64, key, value []byte, headers []kafka.Header) bool {
	if k == nil || (int(m.part) < len(k.from) && koff < k.from[m.part]) {
		return true
	}
	return m.valid(key, value, headers)
}
