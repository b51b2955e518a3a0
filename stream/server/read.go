package server

import (
	"net/http"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
)

// get dispatches a GET to catch-up, long-poll or SSE by its live parameter.
func (s *Server) get(w http.ResponseWriter, r *http.Request, name string) {
	pos, err := parseOffsetParam(r)
	if err == nil {
		pos.maxBytes, err = parseMaxBytes(r)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	q := r.URL.Query()
	live := q.Get("live")
	if len(q["live"]) > 1 {
		fail(w, http.StatusBadRequest, "live given more than once")
		return
	}
	switch live {
	case "":
		s.catchUp(w, r, name, pos)
	case "long-poll":
		if !pos.given {
			fail(w, http.StatusBadRequest, "live=long-poll needs an offset (use -1 for the beginning)")
			return
		}
		s.longPoll(w, r, name, pos)
	case "sse":
		if !pos.given {
			fail(w, http.StatusBadRequest, "live=sse needs an offset (use -1 for the beginning)")
			return
		}
		s.sse(w, r, name, pos)
	default:
		fail(w, http.StatusBadRequest, "live=%q: want long-poll or sse", live)
	}
}

// readRequest is the log read of a GET: from pos, at most the server's
// chunk size or the request's max_bytes, whichever is smaller.
func (s *Server) readRequest(name string, pos readPos) kafkalog.ReadRequest {
	n := s.cfg.ReadChunkBytes
	if pos.maxBytes > 0 && pos.maxBytes < n {
		n = pos.maxBytes
	}
	return kafkalog.ReadRequest{Name: name, From: pos.from, FromTail: pos.now, MaxBytes: n}
}

// catchUp handles a catch-up read (§5.6): data from the offset up to the
// chunk limit, the next offset, and the up-to-date and closed signals.
func (s *Server) catchUp(w http.ResponseWriter, r *http.Request, name string, pos readPos) {
	res, err := s.cfg.Log.Read(r.Context(), s.readRequest(name, pos))
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away: nothing to answer or log
		}
		s.failRead(w, name, err)
		return
	}
	h := w.Header()
	s.dataHeaders(h, res)
	if pos.now {
		// offset=now (§8): no data, the tail, never cached, no ETag.
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if res.JSON {
			w.Write([]byte("[]"))
		}
		return
	}
	tag := etag(res)
	h.Set("ETag", tag)
	if res.Records == 0 && !res.Closed {
		// Nothing yet at an open stream's tail: the answer changes with
		// the next append or a close, so it is never cached (a cached
		// one hid new data and the close from a catch-up poller for a
		// minute, longer while stale), as offset=now's is not (§8).
		h.Set("Cache-Control", "no-store")
	} else {
		// Data, or a closed stream's end: the same answer for ever.
		// Session logs are per user: cacheable, but only privately
		// (§10.1).
		h.Set("Cache-Control", "private, max-age=60, stale-while-revalidate=300")
	}
	// A 304 carries the Cache-Control the 200 would (RFC 9110 §15.4.5),
	// or a cache keeps the one it stored.
	if inm := r.Header.Values("If-None-Match"); len(inm) > 0 && matchesETag(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(res.Data)
}

// dataHeaders sets the headers every data-bearing read response carries.
func (s *Server) dataHeaders(h http.Header, res kafkalog.ReadResult) {
	h.Set("Content-Type", res.ContentType)
	h.Set(hNextOffset, res.Next.String())
	if res.UpToDate {
		h.Set(hUpToDate, "true")
	}
	if res.Closed {
		h.Set(hClosed, "true")
	}
}

// failRead answers a read refusal; a 410 for retention names the first
// offset still retained.
func (s *Server) failRead(w http.ResponseWriter, name string, err error) {
	if kafkalog.KindOf(err) == kafkalog.Gone {
		if o, e := s.cfg.Log.EarliestOffset(name); e == nil {
			w.Header().Set(hEarliest, o.String())
		}
	}
	s.failErr(w, err)
}

// deadline is now plus d, for waits.
func deadline(d time.Duration) time.Time { return time.Now().Add(d) }
