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

// headers are r's record headers. Their values share one buffer, and the
// header slice is sized for the common append, so a record costs a few
// allocations rather than one per header.
func (r *record) headers() []kafka.Header {
	type span struct {
		key        string
		start, end int
	}
	var spans [20]span
	n := 0
	buf := make([]byte, 0, len(r.op)+len(r.stream)+len(r.contentType)+len(r.producerID)+len(r.streamSeq)+64)
	add := func(key string, start int) {
		spans[n] = span{key, start, len(buf)}
		n++
	}
	str := func(key, v string) {
		start := len(buf)
		buf = append(buf, v...)
		add(key, start)
	}
	num := func(key string, v int64) {
		start := len(buf)
		buf = strconv.AppendInt(buf, v, 10)
		add(key, start)
	}
	str(HeaderOp, r.op)
	str(HeaderStream, r.stream)
	num(HeaderGen, r.gen)
	num(HeaderRec, r.rec)
	str(HeaderContentType, r.contentType)
	if r.closed {
		str(HeaderClosed, "true")
	}
	if r.hasProducer {
		str(HeaderProducerID, r.producerID)
		num(HeaderProducerEpoch, r.epoch)
		num(HeaderProducerSeq, r.seq)
	}
	if r.streamSeq != "" {
		str(HeaderStreamSeq, r.streamSeq)
	}
	if r.op == opCreate {
		if r.ttl >= 0 {
			num(HeaderTTL, r.ttl)
		}
		if !r.expiresAt.IsZero() {
			str(HeaderExpiresAt, r.expiresAt.UTC().Format(time.RFC3339Nano))
		}
		if r.forkedFrom != "" {
			str(HeaderForkedFrom, r.forkedFrom)
			num(HeaderForkGen, r.forkGen)
			str(HeaderForkOffset, r.forkOffset)
			num(HeaderForkSub, r.forkSub)
			if r.forkCut >= 0 {
				str(HeaderForkCut, fmt.Sprintf("%d:%d", r.forkCutKoff, r.forkCut))
			}
		}
	}
	if r.reason != "" {
		str(HeaderReason, r.reason)
	}
	h := make([]kafka.Header, n, n+1) // room for HeaderMAC
	for i, x := range spans[:n] {
		h[i] = kafka.Header{Key: x.key, Value: buf[x.start:x.end:x.end]}
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
