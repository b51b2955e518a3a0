package kafkalog

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"strings"
	"time"
)

// DefaultContentType is a stream's content type when the creator names none
// (protocol §5.1 allows the server to choose it).
const DefaultContentType = "application/octet-stream"

// CreateRequest is a parsed PUT (protocol §5.1, §4.2 for forks).
type CreateRequest struct {
	Name        string
	ContentType string // "" when the request has none
	Body        []byte // initial content
	Closed      bool   // Stream-Closed: true
	TTL         int64  // Stream-TTL in seconds; -1 when absent
	ExpiresAt   time.Time
	// ForkedFrom names the source stream of a fork; "" creates a root.
	ForkedFrom string
	// ForkOffset is the divergence point; nil means the source's tail.
	ForkOffset *Offset
	// ForkSub is Stream-Fork-Sub-Offset: bytes (or JSON messages) of the
	// record at ForkOffset the fork also inherits.
	ForkSub int64
}

// CreateResult reports a create.
type CreateResult struct {
	// Created is false when the stream already existed with the same
	// configuration (HTTP 200 rather than 201).
	Created bool
	Info    Info
}

// mediaType is the lower-cased media type of a Content-Type value, without
// parameters; "" when it does not parse.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return strings.ToLower(mt)
}

// IsMediaType reports whether a Content-Type value is a media type: a type
// and a subtype, each non-empty, separated by one "/", with optional
// parameters (RFC 9110 §8.3.1). mime.ParseMediaType alone accepts a bare
// token such as "garbage".
func IsMediaType(ct string) bool {
	typ, sub, ok := strings.Cut(mediaType(ct), "/")
	return ok && typ != "" && sub != "" && !strings.Contains(sub, "/")
}

// SameContentType reports whether two Content-Type values name the same
// media type (case-insensitive, parameters ignored).
func SameContentType(a, b string) bool {
	ma, mb := mediaType(a), mediaType(b)
	return ma != "" && ma == mb
}

func isJSON(ct string) bool { return mediaType(ct) == "application/json" }

// jsonInner returns the text a JSON-mode record contributes to a read: the
// elements of a top-level array without its brackets (protocol §9.1.2
// flattens one level), or the single value itself.
func jsonInner(v []byte) []byte {
	t := bytes.TrimSpace(v)
	if len(t) >= 2 && t[0] == '[' {
		return bytes.TrimSpace(t[1 : len(t)-1])
	}
	return t
}

// jsonEnds returns, for the inner text of a record, the byte offset just
// past each message.
func jsonEnds(inner []byte) []int {
	if len(inner) == 0 {
		return nil
	}
	buf := make([]byte, 0, len(inner)+2)
	buf = append(append(append(buf, '['), inner...), ']')
	dec := json.NewDecoder(bytes.NewReader(buf))
	if _, err := dec.Token(); err != nil {
		return []int{len(inner)}
	}
	var ends []int
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		ends = append(ends, int(dec.InputOffset())-1)
	}
	return ends
}

// ValidateJSONAppend checks a JSON-mode append body: valid JSON, and not an
// empty array (protocol §9.1.3, §9.1.4).
func ValidateJSONAppend(body []byte) error {
	if !json.Valid(body) {
		return errf(BadRequest, "body is not valid JSON")
	}
	t := bytes.TrimSpace(body)
	if t[0] == '[' && len(jsonInner(t)) == 0 {
		return errf(BadRequest, "empty JSON array: an append must carry at least one message")
	}
	return nil
}

// Create creates a stream or a fork, or confirms an identical one.
func (l *Log) Create(ctx context.Context, req CreateRequest) (CreateResult, error) {
	adm, err := l.lockAdmin(ctx)
	if err != nil {
		return CreateResult{}, err
	}
	defer adm.release()

	l.mu.RLock()
	existing := l.streams[req.Name]
	l.mu.RUnlock()
	if existing != nil {
		if existing.snapshot().soft {
			return CreateResult{}, errf(Conflict, "stream was deleted but is retained for its forks; the name cannot be reused yet")
		}
		if existing.expired(time.Now()) {
			if err := l.expireNow(ctx, adm, existing); err != nil {
				return CreateResult{}, err
			}
			existing = nil
		}
	}

	// Resolve the fork source and what the fork inherits.
	var src *stream
	var srcView view
	forkPos, forkCutKoff, forkCut := int64(0), int64(-1), int64(-1)
	ct := req.ContentType
	ttl, expiresAt := req.TTL, req.ExpiresAt
	forkOffset := ""
	if req.ForkedFrom != "" {
		var err error
		src, err = l.lookup(req.ForkedFrom)
		if err != nil {
			if KindOf(err) == Gone {
				return CreateResult{}, errf(Conflict, "fork source %q was deleted", req.ForkedFrom)
			}
			return CreateResult{}, errf(NotFound, "fork source %q not found", req.ForkedFrom)
		}
		srcView = src.snapshot()
		if ct == "" {
			ct = src.meta.contentType
		} else if !SameContentType(ct, src.meta.contentType) {
			return CreateResult{}, errf(Conflict, "content type %q differs from the source's %q", ct, src.meta.contentType)
		}
		forkPos = srcView.tail
		if req.ForkOffset != nil {
			var err error
			forkPos, err = src.resolve(*req.ForkOffset, srcView, l.parts[src.meta.part].logStart.Load())
			if err != nil {
				return CreateResult{}, err
			}
		}
		off := Zero
		if forkPos >= 0 {
			off = src.mint(forkPos)
		}
		forkOffset = off.String()
		if req.ForkSub > 0 {
			i := firstAtOrAfter(srcView.entries, forkPos)
			if i >= len(srcView.entries) {
				return CreateResult{}, errf(BadRequest, "fork sub-offset %d: no data at or after the fork offset", req.ForkSub)
			}
			e := srcView.entries[i]
			vals, err := l.values(ctx, src.meta.part, srcView.entries[i:i+1], 0)
			if err != nil {
				return CreateResult{}, err
			}
			v := vals[0]
			if src.meta.json {
				inner := jsonInner(v)
				if e.cut >= 0 {
					inner = inner[:e.cut]
				}
				ends := jsonEnds(inner)
				if req.ForkSub > int64(len(ends)) {
					return CreateResult{}, errf(BadRequest, "fork sub-offset %d is past the %d messages of the record at the fork offset", req.ForkSub, len(ends))
				}
				forkCut = int64(ends[req.ForkSub-1])
			} else {
				n := int64(len(v))
				if e.cut >= 0 {
					n = int64(e.cut)
				}
				if req.ForkSub > n {
					return CreateResult{}, errf(BadRequest, "fork sub-offset %d is past the %d bytes of the record at the fork offset", req.ForkSub, n)
				}
				forkCut = req.ForkSub
			}
			forkCutKoff = e.koff
		}
		// TTL and expiry of a fork (protocol §4.2 table): its own if
		// given, else the source's.
		if ttl < 0 && expiresAt.IsZero() {
			ttl, expiresAt = src.meta.ttl, src.meta.expiresAt
		}
	}
	if ct == "" {
		ct = DefaultContentType
	}
	if !IsMediaType(ct) {
		return CreateResult{}, errf(BadRequest, "Content-Type %q is not a media type (type/subtype, e.g. text/plain)", ct)
	}
	body := req.Body
	if isJSON(ct) && len(bytes.TrimSpace(body)) > 0 {
		if !json.Valid(body) {
			return CreateResult{}, errf(BadRequest, "initial body is not valid JSON")
		}
		if t := bytes.TrimSpace(body); t[0] == '[' && len(jsonInner(t)) == 0 {
			body = nil // "[]" creates an empty stream (§9.1.3)
		}
	}

	if existing != nil {
		m := existing.meta
		same := SameContentType(m.contentType, ct) && m.ttl == ttl && m.expiresAt.Equal(expiresAt) &&
			existing.snapshot().closed == req.Closed && m.forkedFrom == req.ForkedFrom &&
			(req.ForkedFrom == "" || (m.forkOffset == forkOffset && m.forkSub == req.ForkSub))
		if !same {
			return CreateResult{}, errf(Conflict, "stream exists with a different configuration")
		}
		existing.touch()
		return CreateResult{Created: false, Info: existing.info()}, nil
	}

	l.mu.RLock()
	gen := max(l.gens[req.Name], l.removed[req.Name]) + 1
	l.mu.RUnlock()
	part := l.rootPartition(req.Name)
	r := &record{
		op: opCreate, stream: req.Name, gen: gen, rec: 0, contentType: ct, value: body,
		closed: req.Closed, ttl: ttl, expiresAt: expiresAt, forkCutKoff: -1, forkCut: -1,
	}
	if src != nil {
		part = src.meta.part
		r.forkedFrom, r.forkGen, r.forkOffset, r.forkSub = src.meta.name, src.meta.gen, forkOffset, req.ForkSub
		r.forkCutKoff, r.forkCut = forkCutKoff, forkCut
	}
	p := l.parts[part]
	var created *stream
	err = adm.submit(ctx, p, &op{size: len(body) + 512, decide: func(t *tx) *pending {
		if src != nil && src.w.deleted {
			return nil // deleted since: the op answers with created == nil
		}
		return &pending{rec: r, commit: func(koff int64) {
			created = l.installCreate(part, r, koff)
		}}
	}})
	if err != nil {
		// The create may still land: its generation is burnt, so that
		// a retry creates the next one and the late record, older, is
		// ignored.
		l.mu.Lock()
		l.gens[req.Name] = max(l.gens[req.Name], gen)
		l.mu.Unlock()
		return CreateResult{}, err
	}
	if created == nil {
		return CreateResult{}, errf(NotFound, "fork source %q was deleted", req.ForkedFrom)
	}
	return CreateResult{Created: true, Info: created.info()}, nil
}

// applyCreate folds a create record read back from Kafka into the state.
func (l *Log) applyCreate(part int32, r *record, koff int64) {
	l.mu.RLock()
	existing := l.streams[r.stream]
	removed := l.removed[r.stream]
	l.mu.RUnlock()
	if existing != nil && existing.meta.gen == r.gen {
		existing.moveDuplicate(0, koff, existing.w.fold(r) == foldCopyOfLatest)
		if len(r.value) > 0 && !l.starting {
			l.cache.put(part, koff, r.value)
		}
		return
	}
	if (existing != nil && existing.meta.gen > r.gen) || r.gen <= removed {
		return
	}
	if existing != nil {
		// An older generation, in another partition: it is over.
		l.supersede(existing)
	}
	l.installCreate(part, r, koff)
}

// installCreate makes the stream a create record describes, written at koff.
func (l *Log) installCreate(part int32, r *record, koff int64) *stream {
	m := meta{name: r.stream, gen: r.gen, part: part, contentType: r.contentType, json: isJSON(r.contentType),
		ttl: r.ttl, expiresAt: r.expiresAt, forkedFrom: r.forkedFrom, forkOffset: r.forkOffset, forkSub: r.forkSub}
	var src *stream
	if r.forkedFrom != "" {
		l.mu.RLock()
		src = l.streams[r.forkedFrom]
		l.mu.RUnlock()
		if src == nil || src.meta.gen != r.forkGen || src.meta.part != part {
			l.cfg.Logf("kafkalog: fork %q: source %q gen %d is not in partition %d; the fork inherits nothing", r.stream, r.forkedFrom, r.forkGen, part)
			src = nil
		}
	}
	m.source, m.forkPos = src, -1
	var v view
	if src != nil {
		v = src.snapshot()
		// The fork point: positions up to it are the source's.
		m.forkPos = forkPoint(r, v.tail)
	}
	s := newStream(m)
	s.w.nextRec = 1
	s.w.closed = r.closed
	s.createKoff = koff
	if src != nil {
		i := firstAtOrAfter(v.entries, m.forkPos)
		es := v.entries[:i:i]
		if r.forkCut >= 0 && i < len(v.entries) && v.entries[i].koff == r.forkCutKoff {
			e := v.entries[i]
			e.cut = int32(r.forkCut)
			es = append(es, e)
		}
		s.entries = es
		src.w.refs++
	}
	s.own = len(s.entries)
	if len(r.value) > 0 {
		s.entries = append(s.entries, entry{koff: koff, rec: 0, cut: -1})
		if !l.starting {
			l.cache.put(part, koff, r.value)
		}
	}
	s.tail = koff + 1
	s.closed = r.closed
	l.mu.Lock()
	l.streams[r.stream] = s
	if r.gen > l.gens[r.stream] {
		l.gens[r.stream] = r.gen
	}
	if p := l.parts[part]; r.gen > p.gens[r.stream] {
		p.gens[r.stream] = r.gen
	}
	l.mu.Unlock()
	return s
}
