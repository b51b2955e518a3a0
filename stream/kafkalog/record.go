package kafkalog

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Record headers. Every record in the data topic carries the stream name as
// its key and in HeaderStream, the operation, the stream generation and a
// per-generation record number; appends also carry the producer headers the
// writer sent. Kafka-native tools (kcat -f '%h') show them as they are.
const (
	HeaderOp            = "forklab-op"     // create | append | close | delete
	HeaderStream        = "forklab-stream" // stream name (also the record key)
	HeaderGen           = "forklab-gen"    // generation of the name: 1 for the first stream ever created under it
	HeaderRec           = "forklab-rec"    // record number within the generation: 0 for the create
	HeaderContentType   = "content-type"
	HeaderProducerID    = "producer-id"
	HeaderProducerEpoch = "producer-epoch"
	HeaderProducerSeq   = "producer-seq"
	HeaderStreamSeq     = "stream-seq"
	HeaderClosed        = "stream-closed"      // "true" when the record closes the stream
	HeaderTTL           = "stream-ttl"         // create: sliding TTL in seconds
	HeaderExpiresAt     = "stream-expires-at"  // create: RFC 3339 expiry
	HeaderForkedFrom    = "stream-forked-from" // create of a fork: source stream name
	HeaderForkGen       = "forklab-fork-gen"   // create of a fork: source generation
	HeaderForkOffset    = "stream-fork-offset" // create of a fork: divergence offset
	HeaderForkSub       = "stream-fork-sub-offset"
	HeaderForkCut       = "forklab-fork-cut" // create of a fork with a sub-offset: "koff:bytes" of the partly inherited record
	HeaderReason        = "forklab-reason"   // delete: "expired" when the TTL or expiry removed it
)

// Operation names, the values of HeaderOp.
const (
	opCreate = "create"
	opAppend = "append"
	opClose  = "close"
	opDelete = "delete"
)

// record is one decoded record of the data topic.
type record struct {
	op          string
	stream      string
	gen         int64
	rec         int64
	contentType string
	value       []byte
	closed      bool
	time        time.Time

	hasProducer bool
	producerID  string
	epoch, seq  int64
	streamSeq   string

	// create only
	ttl        int64 // seconds; -1 when absent
	expiresAt  time.Time
	forkedFrom string
	forkGen    int64
	forkOffset string
	forkSub    int64
	// forkCutKoff and forkCut resolve a sub-offset: the record partly
	// inherited and how many bytes of it (of the JSON array body for JSON
	// streams); forkCut is -1 when the fork inherits whole records only.
	forkCutKoff int64
	forkCut     int64
	reason      string
}

// kafkaRecord encodes r as a Kafka record keyed by the stream name.
func (r *record) kafkaRecord() kafka.Record {
	return kafka.Record{Key: kafka.NewBytes([]byte(r.stream)), Value: kafka.NewBytes(r.value), Headers: r.headers()}
}

// headers are r's record headers.
func (r *record) headers() []kafka.Header {
	h := []kafka.Header{
		{Key: HeaderOp, Value: []byte(r.op)},
		{Key: HeaderStream, Value: []byte(r.stream)},
		{Key: HeaderGen, Value: strconv.AppendInt(nil, r.gen, 10)},
		{Key: HeaderRec, Value: strconv.AppendInt(nil, r.rec, 10)},
		{Key: HeaderContentType, Value: []byte(r.contentType)},
	}
	if r.closed {
		h = append(h, kafka.Header{Key: HeaderClosed, Value: []byte("true")})
	}
	if r.hasProducer {
		h = append(h,
			kafka.Header{Key: HeaderProducerID, Value: []byte(r.producerID)},
			kafka.Header{Key: HeaderProducerEpoch, Value: strconv.AppendInt(nil, r.epoch, 10)},
			kafka.Header{Key: HeaderProducerSeq, Value: strconv.AppendInt(nil, r.seq, 10)})
	}
	if r.streamSeq != "" {
		h = append(h, kafka.Header{Key: HeaderStreamSeq, Value: []byte(r.streamSeq)})
	}
	if r.op == opCreate {
		if r.ttl >= 0 {
			h = append(h, kafka.Header{Key: HeaderTTL, Value: strconv.AppendInt(nil, r.ttl, 10)})
		}
		if !r.expiresAt.IsZero() {
			h = append(h, kafka.Header{Key: HeaderExpiresAt, Value: []byte(r.expiresAt.UTC().Format(time.RFC3339Nano))})
		}
		if r.forkedFrom != "" {
			h = append(h,
				kafka.Header{Key: HeaderForkedFrom, Value: []byte(r.forkedFrom)},
				kafka.Header{Key: HeaderForkGen, Value: strconv.AppendInt(nil, r.forkGen, 10)},
				kafka.Header{Key: HeaderForkOffset, Value: []byte(r.forkOffset)},
				kafka.Header{Key: HeaderForkSub, Value: strconv.AppendInt(nil, r.forkSub, 10)})
			if r.forkCut >= 0 {
				h = append(h, kafka.Header{Key: HeaderForkCut, Value: []byte(fmt.Sprintf("%d:%d", r.forkCutKoff, r.forkCut))})
			}
		}
	}
	if r.reason != "" {
		h = append(h, kafka.Header{Key: HeaderReason, Value: []byte(r.reason)})
	}
	return h
}

// recordSum identifies a record by its key and headers (CRC-32), to check
// that the record a snapshot ends at is still the one at that offset.
func recordSum(key []byte, headers []kafka.Header) uint32 {
	h := crc32.NewIEEE()
	h.Write(key)
	for _, x := range headers {
		h.Write([]byte{0})
		h.Write([]byte(x.Key))
		h.Write([]byte{0})
		h.Write(x.Value)
	}
	return h.Sum32()
}

// decodeRecord parses the headers of a record read back from Kafka. A record
// without forklab headers (written by something else) yields ok=false.
func decodeRecord(key []byte, value []byte, headers []kafka.Header, ts time.Time) (record, bool, error) {
	r := record{value: value, time: ts, ttl: -1, forkCutKoff: -1, forkCut: -1}
	var gotGen, gotRec bool
	var pid, pep, pseq []byte
	var havePID, havePEp, havePSeq bool
	for _, h := range headers {
		v := h.Value
		switch h.Key {
		case HeaderOp:
			r.op = string(v)
		case HeaderStream:
			r.stream = string(v)
		case HeaderGen:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
			r.gen, gotGen = n, true
		case HeaderRec:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
			r.rec, gotRec = n, true
		case HeaderContentType:
			r.contentType = string(v)
		case HeaderClosed:
			r.closed = string(v) == "true"
		case HeaderProducerID:
			pid, havePID = v, true
		case HeaderProducerEpoch:
			pep, havePEp = v, true
		case HeaderProducerSeq:
			pseq, havePSeq = v, true
		case HeaderStreamSeq:
			r.streamSeq = string(v)
		case HeaderTTL:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
			r.ttl = n
		case HeaderExpiresAt:
			t, err := time.Parse(time.RFC3339Nano, string(v))
			if err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
			r.expiresAt = t
		case HeaderForkedFrom:
			r.forkedFrom = string(v)
		case HeaderForkGen:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
			r.forkGen = n
		case HeaderForkOffset:
			r.forkOffset = string(v)
		case HeaderForkSub:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
			r.forkSub = n
		case HeaderForkCut:
			if _, err := fmt.Sscanf(string(v), "%d:%d", &r.forkCutKoff, &r.forkCut); err != nil {
				return r, false, fmt.Errorf("header %s=%q: %w", h.Key, v, err)
			}
		case HeaderReason:
			r.reason = string(v)
		}
	}
	if r.op == "" || !gotGen || !gotRec {
		return r, false, nil
	}
	if r.stream == "" {
		r.stream = string(key)
	}
	if havePID && havePEp && havePSeq {
		e, err1 := strconv.ParseInt(string(pep), 10, 64)
		s, err2 := strconv.ParseInt(string(pseq), 10, 64)
		if err1 != nil || err2 != nil {
			return r, false, fmt.Errorf("producer headers epoch=%q seq=%q are not integers", pep, pseq)
		}
		r.hasProducer, r.producerID, r.epoch, r.seq = true, string(pid), e, s
	}
	return r, true, nil
}
