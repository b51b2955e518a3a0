package server

import (
	"encoding/json"
	"net/http"
	"strings"
)

// list handles GET on the base path itself, a forklab extension the
// protocol does not define: the names of the live streams, as a JSON array
// sorted by name, optionally only those starting with the query parameter
// prefix. forklab log export --prefix uses it. It needs read access.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, false) {
		return
	}
	prefix := r.URL.Query().Get("prefix")
	names := []string{}
	for _, n := range s.cfg.Log.Names() {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	b, err := json.Marshal(names)
	if err != nil {
		fail(w, http.StatusInternalServerError, "list: %v", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}
