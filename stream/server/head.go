package server

import (
	"net/http"
	"strconv"
	"time"
)

// head handles HEAD (§5.5): metadata without a body, never cached, without
// resetting the stream's TTL. Forklab-Kafka-Topic and -Partition say where
// the stream's records are, for replay with Kafka tools.
func (s *Server) head(w http.ResponseWriter, r *http.Request, name string) {
	info, err := s.cfg.Log.Head(name)
	if err != nil {
		s.failErr(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", info.ContentType)
	h.Set(hNextOffset, info.Tail.String())
	h.Set("Cache-Control", "no-store")
	if info.TTL >= 0 {
		h.Set(hTTL, strconv.FormatInt(info.TTL, 10))
	}
	if !info.ExpiresAt.IsZero() {
		h.Set(hExpiresAt, info.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	if info.Closed {
		h.Set(hClosed, "true")
	}
	// Extension: a Producer-Id request header asks for that producer's
	// epoch and highest seq, so a new incarnation can claim the next epoch.
	if id := r.Header.Get(hProducerID); id != "" {
		if e, q, known, err := s.cfg.Log.ProducerState(name, id); err == nil && known {
			h.Set(hProducerEpoch, strconv.FormatInt(e, 10))
			h.Set(hProducerSeq, strconv.FormatInt(q, 10))
		}
	}
	if topic, part, err := s.cfg.Log.Location(name); err == nil {
		h.Set(hKafkaTopic, topic)
		h.Set(hKafkaPartition, strconv.Itoa(int(part)))
	}
	w.WriteHeader(http.StatusOK)
}
