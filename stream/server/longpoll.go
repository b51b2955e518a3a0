package server

import (
	"net/http"
	"time"
)

// longPoll handles live=long-poll (§5.7): data at once if there is any,
// else wait up to LongPollTimeout; 204 with the tail on timeout, at once on a
// closed stream's end. Every answer carries a Stream-Cursor while the stream
// is open (§10.1).
func (s *Server) longPoll(w http.ResponseWriter, r *http.Request, name string, pos readPos) {
	ctx, cancel := s.liveContext(r.Context())
	defer cancel()
	res, err := s.cfg.Log.Wait(ctx, s.readRequest(name, pos), s.cfg.LongPollTimeout)
	if err != nil && r.Context().Err() == nil && ctx.Err() != nil {
		// The server is shutting down: answer as a timeout would.
		res, err = s.cfg.Log.Wait(r.Context(), s.readRequest(name, pos), 0)
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		s.failRead(w, name, err)
		return
	}
	s.writeDeadline(w) // from the end of the wait
	h := w.Header()
	s.dataHeaders(h, res)
	if !res.Closed {
		h.Set(hCursor, nextCursor(r.URL.Query().Get("cursor"), time.Now()))
	}
	if res.Records == 0 {
		h.Set(hUpToDate, "true")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.Set("ETag", etag(res))
	h.Set("Cache-Control", "private, max-age=60, stale-while-revalidate=300")
	w.WriteHeader(http.StatusOK)
	w.Write(res.Data)
}
