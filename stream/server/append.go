package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
)

// vTrue is the shared value of a "true" header (Stream-Closed).
var vTrue = []string{"true"}

// append handles POST: append, close, or append-and-close (§5.2, §5.3),
// with idempotent producers (§5.2.1).
func (s *Server) append(w http.ResponseWriter, r *http.Request, name string) {
	var t0, t1, t2 time.Time
	if st := s.cfg.Stages; st != nil {
		t0 = time.Now()
		defer func() {
			if !t2.IsZero() {
				st.Requests.Add(1)
				st.HTTPIn.Add(int64(t1.Sub(t0)))
				st.Log.Add(int64(t2.Sub(t1)))
				st.HTTPOut.Add(int64(time.Since(t2)))
			}
		}()
	}
	h := r.Header
	p, err := parseProducer(h)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	closing := isTrue(h.Get(hClosed))
	body, ok := s.bodyOr413(w, r)
	if !ok || !identityBody(w, h, body) {
		return
	}
	ct := h.Get("Content-Type")
	if len(body) == 0 && !closing {
		fail(w, http.StatusBadRequest, "empty body: an append needs data (or Stream-Closed: true to close)")
		return
	}
	if len(body) > 0 {
		if err := checkRepeated(h, ctHeaders); err != nil {
			fail(w, http.StatusBadRequest, "%v", err)
			return
		}
		if ct == "" {
			fail(w, http.StatusBadRequest, "missing Content-Type: it must match the stream's")
			return
		}
	}
	req := kafkalog.AppendRequest{
		Name: name, ContentType: ct, Body: body, Close: closing, StreamSeq: h.Get(hSeq),
		HasProducer: p.present, ProducerID: p.id, Epoch: p.epoch, Seq: p.seq,
	}
	if s.cfg.Stages != nil {
		t1 = time.Now()
	}
	res, err := s.cfg.Log.Append(r.Context(), req)
	if s.cfg.Stages != nil {
		t2 = time.Now()
	}
	rh := w.Header()
	if res.HasProducer {
		rh[hProducerEpoch] = []string{strconv.FormatInt(res.ProducerEpoch, 10)}
		if err == nil || res.SeqGap {
			rh[hProducerSeq] = []string{strconv.FormatInt(res.ProducerSeq, 10)}
		}
	}
	if err != nil {
		switch kafkalog.KindOf(err) {
		case kafkalog.Conflict:
			if res.Closed {
				// §5.2: a closed stream's 409 names the final offset.
				rh.Set(hClosed, "true")
				rh.Set(hNextOffset, res.Tail.String())
			}
			if res.SeqGap {
				rh.Set(hExpectedSeq, strconv.FormatInt(res.ExpectedSeq, 10))
				rh.Set(hReceivedSeq, strconv.FormatInt(res.ReceivedSeq, 10))
			}
		}
		s.failErr(w, err)
		return
	}
	// Canonical keys set directly: the success path runs once per append.
	rh[hNextOffset] = []string{res.Tail.String()}
	if res.Closed {
		rh[hClosed] = vTrue
	}
	status := http.StatusNoContent
	if res.Outcome == kafkalog.Appended && p.present {
		status = http.StatusOK // new data from an idempotent producer (§5.2.1)
	}
	w.WriteHeader(status)
}
