package server

import (
	"net/http"
	"strings"

	"github.com/forklab/forklab/stream/kafkalog"
)

// create handles PUT: create a stream, a closed stream, or a fork (§5.1,
// §4.2); an identical existing stream answers 200.
func (s *Server) create(w http.ResponseWriter, r *http.Request, name string) {
	h := r.Header
	req := kafkalog.CreateRequest{Name: name, ContentType: h.Get("Content-Type"), TTL: -1, Closed: isTrue(h.Get(hClosed))}
	if v, ok := h[http.CanonicalHeaderKey(hTTL)]; ok {
		n, err := parseUint(v[0], 1<<40)
		if err != nil {
			fail(w, http.StatusBadRequest, "Stream-TTL %q: %v (want whole seconds, e.g. 3600)", v[0], err)
			return
		}
		req.TTL = n
	}
	if v := h.Get(hExpiresAt); v != "" {
		t, err := parseRFC3339(v)
		if err != nil {
			fail(w, http.StatusBadRequest, "Stream-Expires-At %q is not an RFC 3339 timestamp", v)
			return
		}
		req.ExpiresAt = t
	}
	if req.TTL >= 0 && !req.ExpiresAt.IsZero() {
		fail(w, http.StatusBadRequest, "Stream-TTL and Stream-Expires-At are exclusive; send one")
		return
	}
	if !s.parseFork(w, r, &req) {
		return
	}
	body, ok := s.bodyOr413(w, r)
	if !ok || !identityBody(w, h, body) {
		return
	}
	req.Body = body
	res, err := s.cfg.Log.Create(r.Context(), req)
	if err != nil {
		s.failErr(w, err)
		return
	}
	rh := w.Header()
	rh.Set("Content-Type", res.Info.ContentType)
	rh.Set(hNextOffset, res.Info.Tail.String())
	if res.Info.Closed {
		rh.Set(hClosed, "true")
	}
	status := http.StatusOK
	if res.Created {
		rh.Set("Location", s.streamURL(r))
		status = http.StatusCreated
	}
	w.WriteHeader(status)
}

// parseFork reads the fork headers (§4.2) into req, answering 400 itself.
func (s *Server) parseFork(w http.ResponseWriter, r *http.Request, req *kafkalog.CreateRequest) bool {
	h := r.Header
	from := h.Get(hForkedFrom)
	_, hasOff := h[http.CanonicalHeaderKey(hForkOffset)]
	_, hasSub := h[http.CanonicalHeaderKey(hForkSub)]
	if from == "" {
		if hasOff || hasSub {
			fail(w, http.StatusBadRequest, "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From")
			return false
		}
		return true
	}
	// The source is named by its URL path; a bare name is accepted too.
	src := from
	if strings.HasPrefix(src, s.cfg.BasePath) {
		src = src[len(s.cfg.BasePath):]
	} else if strings.HasPrefix(src, "/") {
		fail(w, http.StatusBadRequest, "Stream-Forked-From %q is not a stream path under %s", from, s.cfg.BasePath)
		return false
	}
	if err := checkName(src); err != nil {
		fail(w, http.StatusBadRequest, "Stream-Forked-From: %v", err)
		return false
	}
	req.ForkedFrom = src
	if hasOff {
		v := h.Get(hForkOffset)
		o, err := kafkalog.ParseOffset(v)
		if err != nil {
			// -1 and now are read offsets, not fork points: say what a
			// fork takes.
			fail(w, http.StatusBadRequest, "Stream-Fork-Offset %q is not a fork point: want an offset the server returned for the source (a Stream-Next-Offset); leave the header out to fork at the source's tail", v)
			return false
		}
		req.ForkOffset = &o
	}
	if hasSub {
		v := h.Get(hForkSub)
		n, err := parseUint(v, 1<<40)
		if err != nil {
			fail(w, http.StatusBadRequest, "Stream-Fork-Sub-Offset %q: %v", v, err)
			return false
		}
		req.ForkSub = n
	}
	return true
}
