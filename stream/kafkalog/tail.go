package kafkalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/forklab/forklab/internal/plural"
)

// This file is the log's Kafka side seen from outside the service: a Reader
// that fetches and decodes records of the data topic directly, as a Kafka
// Connect sink does (by partition and offset), and Messages, which splits a
// JSON record the way a read does. Replay (replay.go) folds the decoded
// records with the rules the service's own rebuild applies, so a reader of
// the topic sees exactly the streams the HTTP API serves.

// Operation names, the values of HeaderOp, for readers of the topic.
const (
	OpCreate = opCreate
	OpAppend = opAppend
	OpClose  = opClose
	OpDelete = opDelete
)

// Record is one record of the data topic with its forklab headers decoded.
type Record struct {
	Partition int32
	// Offset is the record's Kafka offset in Partition.
	Offset int64
	// Time is the Kafka record timestamp: when the log service wrote it.
	Time time.Time
	// Op is OpCreate, OpAppend, OpClose or OpDelete.
	Op     string
	Stream string
	// Gen is the generation of the stream name (1 for the first stream
	// ever created under it) and Rec the record's number within the
	// generation (0 for the create). The log never gives a number twice,
	// even to the retry of a write that failed: a record found twice with
	// the same (Stream, Gen, Rec) is one record written twice (by an
	// earlier version's kafka-go Writer retry, or a program copying
	// records), and one whose number the stream is past is a copy or a
	// write the log gave up on that landed late. Replay folds them as the
	// service does.
	Gen, Rec    int64
	ContentType string
	// Value is the appended bytes (a create's initial body; empty for a
	// close or delete).
	Value []byte
	// Closed: this record closes the stream.
	Closed bool
	// ForkedFrom is the source stream when the record creates a fork.
	ForkedFrom string

	r record
}

func newRecord(part int32, koff int64, r record) Record {
	return Record{Partition: part, Offset: koff, Time: r.time, Op: r.op, Stream: r.stream, Gen: r.gen, Rec: r.rec,
		ContentType: r.contentType, Value: r.value, Closed: r.closed, ForkedFrom: r.forkedFrom, r: r}
}

// DecodeRecord decodes a record of the data topic that the caller read
// with a Kafka client of its own: its partition and offset, key, value,
// headers and timestamp. ok is false for a record without forklab headers
// (written by another program); an error names a header that does not
// parse. The log service skips both.
func DecodeRecord(part int32, offset int64, key, value []byte, headers []kafka.Header, ts time.Time) (rec Record, ok bool, err error) {
	r, ok, err := decodeRecord(key, value, headers, ts)
	if !ok || err != nil {
		return Record{}, false, err
	}
	return newRecord(part, offset, r), true, nil
}

// JSON reports whether the record's stream is a JSON-mode stream, whose
// values are JSON messages (protocol §9.1).
func (r *Record) JSON() bool { return isJSON(r.ContentType) }

// Messages splits the value of a JSON-mode record into the messages a read
// returns for it: the elements of a top-level array (one level is flattened,
// §9.1.2) or the value itself, each as its bytes in the value, without
// surrounding whitespace. cut ≥ 0 keeps only the messages within the first
// cut bytes of the array's inner text: the part of a record a fork at a
// sub-offset inherits (Entry.Cut). A value that is not valid JSON is one
// message, as the log never stores one.
func Messages(value []byte, cut int32) [][]byte {
	if single, ok := oneMessage(value, cut); ok {
		return [][]byte{single}
	}
	inner := jsonInner(value)
	if cut >= 0 && int(cut) <= len(inner) {
		inner = inner[:cut]
	}
	ends := jsonEnds(inner)
	out := make([][]byte, 0, len(ends))
	prev := 0
	for _, e := range ends {
		m := inner[prev:e]
		for len(m) > 0 && (m[0] == ',' || m[0] == ' ' || m[0] == '\t' || m[0] == '\n' || m[0] == '\r') {
			m = m[1:]
		}
		out = append(out, m)
		prev = e
	}
	return out
}

// oneMessage is the common case of Messages without a JSON decoder: a
// value that is not an array is one message, itself without surrounding
// whitespace (jsonInner returns it whole, and jsonEnds ends it at its end).
func oneMessage(value []byte, cut int32) ([]byte, bool) {
	t := bytes.TrimSpace(value)
	if len(t) == 0 || t[0] == '[' || cut >= 0 {
		return nil, false
	}
	return t, true
}

// RetentionError reports a fetch from an offset Kafka no longer holds: the
// topic's retention removed the records in [From, LogStart) of Partition
// before they were read.
type RetentionError struct {
	Partition      int32
	From, LogStart int64
}

func (e *RetentionError) Error() string {
	return fmt.Sprintf("partition %d: offsets %d to %d (%s) were removed by retention before they were read",
		e.Partition, e.From, e.LogStart-1, plural.Count(e.LogStart-e.From, "record"))
}

// ErrBeyondEnd is returned by Fetch for an offset past the partition's high
// watermark: the topic is not the one the offset was taken from (deleted and
// created again, or another cluster).
var ErrBeyondEnd = errors.New("offset is beyond the end of the partition")

// Reader reads the data topic directly from Kafka, partition by partition,
// with explicit offsets and no consumer group: the caller keeps its
// position. Its methods are safe for concurrent use.
type Reader struct {
	topic     string
	client    *kafka.Client
	transport *kafka.Transport
}

// NewReader returns a Reader of topic on the given bootstrap brokers
// (host:port). It connects lazily.
func NewReader(brokers []string, topic string) *Reader {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MetadataTTL: 5 * time.Second}
	return &Reader{topic: topic, transport: tr,
		client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 30 * time.Second}}
}

// Close releases the Reader's connections.
func (r *Reader) Close() { r.transport.CloseIdleConnections() }

// Topic is the data topic the Reader reads.
func (r *Reader) Topic() string { return r.topic }

// ErrNoTopic is returned by Partitions when the cluster has no such topic.
var ErrNoTopic = errors.New("no such topic")

// Partitions returns the topic's partition count; ErrNoTopic (wrapped)
// when the cluster does not have it.
func (r *Reader) Partitions(ctx context.Context) (int, error) {
	md, err := r.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{r.topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name == r.topic {
			if errors.Is(t.Error, kafka.UnknownTopicOrPartition) || (t.Error == nil && len(t.Partitions) == 0) {
				return 0, fmt.Errorf("topic %s: %w", r.topic, ErrNoTopic)
			}
			if t.Error != nil {
				return 0, fmt.Errorf("topic %s: %w", r.topic, t.Error)
			}
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("topic %s: %w", r.topic, ErrNoTopic)
}

// Offsets returns the partition's log start offset (the first record Kafka
// still retains) and high watermark (one past the last record).
func (r *Reader) Offsets(ctx context.Context, part int32) (logStart, hwm int64, err error) {
	res, err := r.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		r.topic: {kafka.FirstOffsetOf(int(part)), kafka.LastOffsetOf(int(part))},
	}})
	if err != nil {
		return 0, 0, err
	}
	for _, po := range res.Topics[r.topic] {
		if po.Partition == int(part) {
			if po.Error != nil {
				return 0, 0, po.Error
			}
			return po.FirstOffset, po.LastOffset, nil
		}
	}
	return 0, 0, fmt.Errorf("no offsets for %s/%d", r.topic, part)
}

// Batch is what one Fetch returned.
type Batch struct {
	// Records are the forklab records at or after the fetch offset, in
	// offset order.
	Records []Record
	// Next is the offset to fetch from next: one past the last record
	// returned or skipped, or the fetch offset when nothing came.
	Next int64
	// Skipped lists records that are not the log's: no forklab headers
	// (written by another program) or headers that do not parse. The log
	// service ignores them too.
	Skipped []Skipped
	// LogStart and HighWatermark are the partition's, as the broker
	// answered this fetch.
	LogStart, HighWatermark int64
}

// Skipped is a record of the data topic that is not a forklab record.
type Skipped struct {
	Offset int64
	Reason string
}

// Fetch reads records of partition part from offset from, at most about
// maxBytes (at least one record batch when any is available). With
// maxWait > 0 the broker holds the request until a record arrives or
// maxWait passes (a long poll); an empty Batch then means nothing new.
// A from below the log start offset is a *RetentionError, one past the
// high watermark ErrBeyondEnd: the broker's OFFSET_OUT_OF_RANGE, which
// kafka-go's consumer would silently turn into a jump.
func (r *Reader) Fetch(ctx context.Context, part int32, from int64, maxBytes int, maxWait time.Duration) (Batch, error) {
	if maxWait <= 0 {
		maxWait = 10 * time.Millisecond
	}
	res, err := r.client.Fetch(ctx, &kafka.FetchRequest{
		Topic:     r.topic,
		Partition: int(part),
		Offset:    from,
		MinBytes:  1,
		MaxBytes:  int64(maxBytes),
		MaxWait:   maxWait,
	})
	if err != nil {
		return Batch{}, err
	}
	b := Batch{Next: from, LogStart: res.LogStartOffset, HighWatermark: res.HighWatermark}
	if res.Error != nil {
		if errors.Is(res.Error, kafka.OffsetOutOfRange) {
			ls, hwm, err := r.Offsets(ctx, part)
			if err != nil {
				return b, fmt.Errorf("fetch %s/%d at %d: %w (and list offsets: %v)", r.topic, part, from, res.Error, err)
			}
			if from < ls {
				return b, &RetentionError{Partition: part, From: from, LogStart: ls}
			}
			if from > hwm {
				return b, fmt.Errorf("fetch %s/%d at %d, high watermark %d: %w", r.topic, part, from, hwm, ErrBeyondEnd)
			}
			return b, nil // the offset came back into range: nothing yet
		}
		return b, fmt.Errorf("fetch %s/%d at %d: %w", r.topic, part, from, res.Error)
	}
	for {
		kr, err := res.Records.ReadRecord()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return b, fmt.Errorf("fetch %s/%d at %d: read records: %w", r.topic, part, from, err)
		}
		if kr.Offset < from {
			continue // the broker answers with whole batches
		}
		k, v, err := readKeyValue(kr)
		if err != nil {
			return b, err
		}
		b.Next = kr.Offset + 1
		dr, ok, err := decodeRecord(k, v, kr.Headers, kr.Time)
		switch {
		case err != nil:
			b.Skipped = append(b.Skipped, Skipped{kr.Offset, err.Error()})
		case !ok:
			b.Skipped = append(b.Skipped, Skipped{kr.Offset, "no forklab headers"})
		default:
			b.Records = append(b.Records, newRecord(part, kr.Offset, dr))
		}
	}
	return b, nil
}

// FetchRecords returns the records of partition part at the given Kafka
// offsets, keyed by offset. Offsets Kafka no longer holds (or that hold no
// forklab record) are absent from the map; the caller decides what the
// loss means.
func (r *Reader) FetchRecords(ctx context.Context, part int32, koffs []int64) (map[int64]Record, error) {
	got := map[int64]Record{}
	if len(koffs) == 0 {
		return got, nil
	}
	want := append([]int64(nil), koffs...)
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	need := make(map[int64]bool, len(want))
	for _, k := range want {
		need[k] = true
	}
	from, last := want[0], want[len(want)-1]
	empty := 0
	for from <= last {
		b, err := r.Fetch(ctx, part, from, 256<<10, 0)
		var re *RetentionError
		if errors.As(err, &re) {
			from = re.LogStart // what is below is gone
			continue
		}
		if err != nil {
			return nil, err
		}
		if b.Next == from {
			if from >= b.HighWatermark {
				break
			}
			if empty++; empty > 20 {
				return nil, fmt.Errorf("fetch %s/%d at %d returned nothing below high watermark %d", r.topic, part, from, b.HighWatermark)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		empty = 0
		for _, rec := range b.Records {
			if need[rec.Offset] {
				got[rec.Offset] = rec
			}
		}
		from = b.Next
	}
	return got, nil
}

// readKeyValue copies a fetched record's key and value and releases them:
// kafka-go reads each record batch into 64 KiB pages from a pool, and a page
// goes back to the pool only once every key and value on it is closed.
// Left open, every batch costs a new page — with the small batches of a
// log under light load, most of a fetch's time goes to clearing them.
func readKeyValue(kr *kafka.Record) (key, value []byte, err error) {
	defer func() {
		if kr.Key != nil {
			kr.Key.Close()
		}
		if kr.Value != nil {
			kr.Value.Close()
		}
	}()
	if key, err = protocol.ReadAll(kr.Key); err != nil {
		return nil, nil, err
	}
	value, err = protocol.ReadAll(kr.Value)
	return key, value, err
}
