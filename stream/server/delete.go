package server

import "net/http"

// delete handles DELETE (§5.4): 204, or 404 / 410 for a missing or
// soft-deleted stream.
func (s *Server) delete(w http.ResponseWriter, r *http.Request, name string) {
	if err := s.cfg.Log.Delete(r.Context(), name); err != nil {
		s.failErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
