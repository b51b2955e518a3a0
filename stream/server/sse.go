package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
)

// control is the payload of an SSE control event (§5.8).
type control struct {
	StreamNextOffset string `json:"streamNextOffset"`
	StreamCursor     string `json:"streamCursor,omitempty"`
	UpToDate         bool   `json:"upToDate,omitempty"`
	StreamClosed     bool   `json:"streamClosed,omitempty"`
}

// sse handles live=sse (§5.8): a data event per chunk, each followed by a
// control event with the next offset; text and JSON streams as UTF-8 lines,
// others base64. The connection ends when the stream is closed and fully
// sent, or after SSEMaxDuration for the client to reconnect.
func (s *Server) sse(w http.ResponseWriter, r *http.Request, name string, pos readPos) {
	ctx, cancel := s.liveContext(r.Context())
	defer cancel()
	req := s.readRequest(name, pos)
	// The first event answers at once: catch-up data, or a control event
	// with the tail when there is none. Read it before committing to a 200,
	// so a bad offset is a 400 and a retention gap a 410, as for the other
	// read modes, rather than an empty event stream.
	res, err := s.cfg.Log.Read(ctx, req)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away: nothing to answer or log
		}
		s.failRead(w, name, err)
		return
	}
	binary := !textual(res.ContentType)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	if binary {
		h.Set(hSSEEncoding, "base64")
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	bw := bufio.NewWriter(w)
	flush := func() {
		s.writeDeadline(w) // each event gets the write timeout
		bw.Flush()
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	end := deadline(s.cfg.SSEMaxDuration)
	cursor := r.URL.Query().Get("cursor")
	last := "" // the cursor of the previous control event
	first := true
	for {
		if !first {
			left := time.Until(end)
			if left <= 0 {
				return
			}
			if res, err = s.cfg.Log.Wait(ctx, req, left); err != nil {
				return // deleted, retention, or the client left: end the stream
			}
		}
		if res.Records == 0 && !res.Closed && !first && res.Next == req.From {
			return // timed out at the same position
		}
		s.writeDeadline(w) // the event's writes count from now
		if res.Records > 0 {
			writeData(bw, res.Data, binary)
		}
		c := control{StreamNextOffset: res.Next.String(), UpToDate: res.UpToDate, StreamClosed: res.Closed}
		if !res.Closed {
			// From the client's cursor, as a long-poll would answer it,
			// never below the previous event's: fed back its own
			// cursors, nextCursor added jitter at every event, and a
			// busy connection's cursor ran days ahead of the clock,
			// a key no other client shares (§10.1 collapsing).
			last = laterCursor(last, nextCursor(cursor, time.Now()))
			c.StreamCursor = last
		}
		b, _ := json.Marshal(c)
		bw.WriteString("event: control\ndata:")
		bw.Write(b)
		bw.WriteString("\n\n")
		flush()
		if res.Closed {
			return
		}
		first = false
		req = kafkalog.ReadRequest{Name: name, From: res.Next, MaxBytes: req.MaxBytes}
	}
}

// writeData writes one data event. Text is split at every line break (CR,
// LF or CRLF) into data: lines, so bytes in the payload can never end the
// event or start another (§5.8, SSE injection). It writes from data as it
// is, without copies: with many readers catching up at once, a copy of
// every chunk (and of its lines) kept the garbage collector busy enough to
// stall appends (docs/session-log.md, "Readers and writers").
func writeData(bw *bufio.Writer, data []byte, binary bool) {
	bw.WriteString("event: data\n")
	if binary {
		bw.WriteString("data:")
		enc := base64.NewEncoder(base64.StdEncoding, bw)
		enc.Write(data)
		enc.Close()
		bw.WriteString("\n\n")
		return
	}
	for {
		line, rest := data, []byte(nil)
		i := bytes.IndexAny(data, "\r\n")
		if i >= 0 {
			line, rest = data[:i], data[i+1:]
			if data[i] == '\r' && len(rest) > 0 && rest[0] == '\n' {
				rest = rest[1:] // CRLF is one line break
			}
		}
		if len(line) > 0 && line[0] == ' ' {
			bw.WriteString("data: ") // the parser strips one leading space
		} else {
			bw.WriteString("data:")
		}
		bw.Write(line)
		bw.WriteByte('\n')
		if i < 0 {
			break
		}
		data = rest
	}
	bw.WriteString("\n")
}

// textual reports whether SSE carries a content type as text: text/* and
// application/json (§5.8); everything else is base64.
func textual(ct string) bool {
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}
