package server

import (
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/forklab/forklab/stream/fence"
	"github.com/forklab/forklab/stream/kafkalog"
)

// maxNameBytes bounds a stream name.
const maxNameBytes = 1024

// checkName validates a stream name taken from the URL path: non-empty
// slash-separated segments, none "." or "..", no control characters or
// backslashes, valid UTF-8 (protocol §12.2: sanitise URLs against path
// traversal).
func checkName(name string) error {
	if name == "" {
		return errors.New("missing stream name after the base path")
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("stream name is %d bytes; the limit is %d", len(name), maxNameBytes)
	}
	if !utf8.ValidString(name) {
		return errors.New("stream name is not valid UTF-8")
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("stream name contains the character %q", c)
		}
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "":
			return errors.New("stream name has an empty path segment")
		case ".", "..":
			return fmt.Errorf("stream name may not contain a %q segment", seg)
		}
	}
	return nil
}

// parseUint parses a protocol integer: decimal digits, no sign, no leading
// zeros (Stream-TTL, §5.1), at most max.
func parseUint(s string, max int64) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a non-negative decimal integer")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("larger than %d", max)
	}
	return n, nil
}

// parseRFC3339 parses an RFC 3339 timestamp (Stream-Expires-At, §5.1),
// fractional seconds allowed. RFC 3339 §5.6 lets "T" and "Z" be written
// "t" and "z", which time.Parse refuses: they are read as upper case.
func parseRFC3339(v string) (time.Time, error) {
	if len(v) > 10 && (v[10] == 't' || v[len(v)-1] == 'z') {
		b := []byte(v)
		if b[10] == 't' {
			b[10] = 'T'
		}
		if b[len(b)-1] == 'z' {
			b[len(b)-1] = 'Z'
		}
		v = string(b)
	}
	return time.Parse(time.RFC3339Nano, v)
}

// isTrue is the protocol's reading of Stream-Closed: present only when the
// value is "true", case-insensitively (§4.1).
func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

var errBodyTooLarge = errors.New("body too large")

// readBody reads the request body up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	if r.ContentLength > 0 {
		// The declared length, read into a buffer of that size (the log
		// keeps appended bodies in its read cache: no slack capacity).
		// net/http ends the body there; a shorter body is an error.
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, errBodyTooLarge
	}
	return b, nil
}

// bodyOr413 reads the body within the body timeout, answering 413, 408
// (too slow: the connection is closed) or 400 itself on failure.
func (s *Server) bodyOr413(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	b, err := readBody(r, s.cfg.MaxBodyBytes)
	var ne net.Error
	if (!errors.As(err, &ne) || !ne.Timeout()) && (err != nil || r.ContentLength <= 0) {
		// No deadline while the request is handled: the server's
		// background read, which notices a client that goes away, must
		// not time out. (A body of declared length read in full already
		// started that read, which clears the deadline itself.)
		rc.SetReadDeadline(time.Time{})
	}
	switch {
	case errors.Is(err, errBodyTooLarge):
		fail(w, http.StatusRequestEntityTooLarge, "body exceeds the limit of %d bytes", s.cfg.MaxBodyBytes)
		return nil, false
	case ne != nil && ne.Timeout():
		w.Header().Set("Connection", "close")
		fail(w, http.StatusRequestTimeout, "the body did not arrive within %s; send it faster or raise --body-timeout", s.cfg.BodyTimeout)
		return nil, false
	case err != nil:
		fail(w, http.StatusBadRequest, "%v", err)
		return nil, false
	}
	return b, true
}

// identityBody refuses a request body sent with a content coding other
// than identity (Content-Encoding: gzip, …) with 415 and Accept-Encoding:
// identity (RFC 9110 §8.4, §15.5.16), answering itself. The log stores the
// bytes it is sent and serves them with the stream's Content-Type alone:
// a gzip body was stored compressed and read back as garbage. An empty
// body (a close) carries no data to decode and is let through.
func identityBody(w http.ResponseWriter, h http.Header, body []byte) bool {
	if len(body) == 0 {
		return true
	}
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				w.Header().Set("Accept-Encoding", "identity")
				fail(w, http.StatusUnsupportedMediaType, "Content-Encoding %q: the log stores the bytes it is sent; send the body uncompressed", c)
				return false
			}
		}
	}
	return true
}

// writeDeadline bounds the time the response now being written may take
// to reach the client: a client that stops reading loses its connection
// instead of holding it (and its goroutine) for ever.
func (s *Server) writeDeadline(w http.ResponseWriter) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
}

// Single-valued request headers (RFC 9110 §5.3: a field that is not a
// list may not be repeated), by canonical key, as each operation reads
// them. A repeated one is refused rather than read as its first value: a
// careless client or proxy that sends "Stream-Closed: false" and
// "Stream-Closed: true", or two Content-Types on a create, must learn that
// the request is ambiguous, not have the server guess. Headers an
// operation ignores may repeat: an append's Content-Type only counts when
// it has a body (§5.2: a close-only request is never refused for its
// Content-Type, which libraries attach by default).
var (
	createHeaders = canonical("Content-Type", hTTL, hExpiresAt, hClosed, hForkedFrom, hForkOffset, hForkSub)
	appendHeaders = canonical(hClosed, hSeq, hProducerID, hProducerEpoch, hProducerSeq)
	headHeaders   = canonical(hProducerID)
	authHeaders   = canonical("Authorization")
	ctHeaders     = canonical("Content-Type")
)

func canonical(names ...string) []string {
	for i, n := range names {
		names[i] = http.CanonicalHeaderKey(n)
	}
	return names
}

// checkRepeated returns an error naming the first of keys (canonical) that
// h repeats, in any letter case; nil if none.
func checkRepeated(h http.Header, keys []string) error {
	for _, k := range keys {
		if v := h[k]; len(v) > 1 {
			return fmt.Errorf("header %s is repeated (%d values); send it once", k, len(v))
		}
	}
	return nil
}

// producer holds parsed idempotent-producer headers.
type producer struct {
	present    bool
	id         string
	epoch, seq int64
}

// parseProducer reads Producer-Id, -Epoch and -Seq: all three or none
// (§5.2.1), the id non-empty, the numbers non-negative integers ≤ 2^53-1.
func parseProducer(h http.Header) (producer, error) {
	_, hasID := h[http.CanonicalHeaderKey(hProducerID)]
	_, hasEpoch := h[http.CanonicalHeaderKey(hProducerEpoch)]
	_, hasSeq := h[http.CanonicalHeaderKey(hProducerSeq)]
	if !hasID && !hasEpoch && !hasSeq {
		return producer{}, nil
	}
	if !hasID || !hasEpoch || !hasSeq {
		return producer{}, errors.New("Producer-Id, Producer-Epoch and Producer-Seq must be sent together")
	}
	p := producer{present: true, id: h.Get(hProducerID)}
	if p.id == "" {
		return producer{}, errors.New("Producer-Id is empty")
	}
	var err error
	if p.epoch, err = parseUint(h.Get(hProducerEpoch), fence.MaxValue); err != nil {
		return producer{}, fmt.Errorf("Producer-Epoch %q: %v", h.Get(hProducerEpoch), err)
	}
	if p.seq, err = parseUint(h.Get(hProducerSeq), fence.MaxValue); err != nil {
		return producer{}, fmt.Errorf("Producer-Seq %q: %v", h.Get(hProducerSeq), err)
	}
	return p, nil
}

// readPos is a parsed offset query parameter, and the read's size bound.
type readPos struct {
	given bool // offset was in the query
	from  kafkalog.Offset
	now   bool // offset=now
	// maxBytes is the max_bytes query parameter (a forklab extension,
	// protocol §11): the response's data is at most this many bytes, but
	// holds at least one record when any is available; 0 when absent.
	maxBytes int
}

// parseMaxBytes reads the optional max_bytes query parameter: a positive
// decimal integer. Reading with max_bytes=1 returns one record per
// response, so its Stream-Next-Offset is the offset right after that
// record (forklab log read --offsets).
func parseMaxBytes(r *http.Request) (int, error) {
	vals, ok := r.URL.Query()["max_bytes"]
	if !ok {
		return 0, nil
	}
	if len(vals) != 1 {
		return 0, errors.New("max_bytes given more than once")
	}
	n, err := parseUint(vals[0], 1<<30)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("max_bytes %q: want an integer in [1, 2^30]", vals[0])
	}
	return int(n), nil
}

// parseOffsetParam reads the offset query parameter: absent or "-1" for the
// beginning, "now" for the tail, else an offset this server issued (§8).
func parseOffsetParam(r *http.Request) (readPos, error) {
	vals, ok := r.URL.Query()["offset"]
	if !ok {
		return readPos{from: kafkalog.Start}, nil
	}
	if len(vals) != 1 {
		return readPos{}, errors.New("offset given more than once")
	}
	v := vals[0]
	switch v {
	case "":
		return readPos{}, errors.New("offset is empty")
	case "-1":
		return readPos{given: true, from: kafkalog.Start}, nil
	case "now":
		return readPos{given: true, now: true}, nil
	}
	o, err := kafkalog.ParseOffset(v)
	if err != nil {
		return readPos{}, fmt.Errorf("offset %q: %v", v, err)
	}
	return readPos{given: true, from: o}, nil
}

// Cursors (§10.1): 20-second intervals counted from 2024-10-09T00:00:00Z.
var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

const cursorInterval = 20 * time.Second

// nextCursor returns the cursor for a live response. A client cursor at or
// past the current interval gets a strictly greater one, advanced by a random
// 1-3600 s of jitter, so cursors never repeat.
// Client cursors are decimals of any length (a cursor near the int64 limit
// must still advance, not wrap).
func nextCursor(client string, now time.Time) string {
	cur := big.NewInt(int64(now.Sub(cursorEpoch) / cursorInterval))
	if c, ok := new(big.Int).SetString(client, 10); ok && c.Cmp(cur) >= 0 {
		jitter := 1 + rand.Int64N(3600)
		cur = c.Add(c, big.NewInt(max(1, jitter/int64(cursorInterval/time.Second))))
	}
	return cur.String()
}

// laterCursor returns the greater of two cursors nextCursor made (decimal,
// no sign or leading zeros), or b when a is "".
func laterCursor(a, b string) string {
	if len(a) > len(b) || (len(a) == len(b) && a > b) {
		return a
	}
	return b
}

// etag is the catch-up ETag (§5.6): stream generation, start and end
// offsets, and ":c" once the response shows the stream closed (§10.1).
func etag(res kafkalog.ReadResult) string {
	t := `"` + res.ID + ":" + res.From.String() + ":" + res.Next.String()
	if res.Closed {
		t += ":c"
	}
	return t + `"`
}

// matchesETag reports whether an If-None-Match header (a list: its
// values, each a comma-separated list of entity tags, RFC 9110 §13.1.2)
// names tag.
func matchesETag(inm []string, tag string) bool {
	for _, p := range strings.Split(strings.Join(inm, ","), ",") {
		p = strings.TrimPrefix(strings.TrimSpace(p), "W/")
		if p == tag || p == "*" {
			return true
		}
	}
	return false
}
