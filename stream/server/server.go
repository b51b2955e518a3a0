// Package server serves the Durable Streams protocol over HTTP on top of a
// kafkalog.Log. Each protocol operation has its own file, in the way franz-go's
// kfake has one file per Kafka request: create.go (PUT, including forks),
// append.go (POST, including close), delete.go, head.go, read.go (catch-up
// GET), longpoll.go, sse.go; auth.go holds bearer-token access control and
// params.go the header and query parsing every operation shares.
//
// Streams live under one base path (default /v1/stream/); the rest of the
// URL path is the stream name. Every refusal is the status code the protocol
// names with a one-line plain-text reason, and changes nothing.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
)

// Config configures a Server.
type Config struct {
	// Log stores the streams.
	Log *kafkalog.Log
	// BasePath is the URL path prefix of every stream; default "/v1/stream/".
	BasePath string
	// LongPollTimeout is how long a long-poll waits for data before answering
	// 204; default 20s.
	LongPollTimeout time.Duration
	// SSEMaxDuration is how long an SSE connection stays open before the
	// server closes it for the client to reconnect (protocol §10.2 suggests
	// about 60s); default 60s.
	SSEMaxDuration time.Duration
	// MaxBodyBytes bounds a request body; larger bodies get 413. Default,
	// and upper bound, the log's MaxRecordBytes.
	MaxBodyBytes int64
	// ReadChunkBytes bounds the data of one catch-up response; default 1 MiB.
	ReadChunkBytes int
	// BodyTimeout bounds the time a client may take to send a request
	// body, from the end of its headers; a slower one gets 408 and its
	// connection is closed. Default 30s.
	BodyTimeout time.Duration
	// WriteTimeout bounds the time each response (each event of an SSE
	// stream) may take to reach the client; a client that does not read
	// loses its connection. Default 30s.
	WriteTimeout time.Duration
	// Tokens turns on bearer-token authentication; nil serves everyone.
	Tokens *Tokens
	// CORSOrigins are the origins, besides loopback ones, whose pages
	// may use the service from a browser (--cors-origin), each as
	// ParseOrigin accepts it; "*" allows every origin. A request from any
	// other origin is refused with 403 (browser.go).
	CORSOrigins []string
	// LoopbackHostsOnly refuses with 403 a request whose Host is not a
	// loopback name or address (DNS rebinding; browser.go). The service
	// sets it when it listens on loopback without tokens.
	LoopbackHostsOnly bool
	// Logf logs failures; nil discards them.
	Logf func(format string, args ...any)
	// Stages, when set, accumulates where append requests spend their
	// time (the HTTP fields; the log fills in the rest).
	Stages *kafkalog.Stages
}

// Server is the protocol's HTTP handler.
type Server struct {
	cfg       Config
	closing   chan struct{}
	closeOnce sync.Once
	// origins are Config.CORSOrigins as ParseOrigin returns them;
	// anyOrigin: one of them is "*".
	origins   map[string]bool
	anyOrigin bool
}

// Shutdown makes waiting long-polls answer at once (204 with the tail) and
// open SSE streams end, so an http.Server can shut down gracefully. Register
// it with http.Server.RegisterOnShutdown.
func (s *Server) Shutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

// liveContext is ctx, also cancelled when the server shuts down.
func (s *Server) liveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// New returns a Server for cfg; an origin of cfg.CORSOrigins that
// ParseOrigin refuses is an error.
func New(cfg Config) (*Server, error) {
	origins := map[string]bool{}
	for _, o := range cfg.CORSOrigins {
		p, err := ParseOrigin(o)
		if err != nil {
			return nil, err
		}
		origins[p] = true
	}
	if cfg.BasePath == "" {
		cfg.BasePath = "/v1/stream/"
	}
	if !strings.HasSuffix(cfg.BasePath, "/") {
		cfg.BasePath += "/"
	}
	if cfg.LongPollTimeout <= 0 {
		cfg.LongPollTimeout = 20 * time.Second
	}
	if cfg.SSEMaxDuration <= 0 {
		cfg.SSEMaxDuration = 60 * time.Second
	}
	if max := int64(cfg.Log.MaxRecordBytes()); cfg.MaxBodyBytes <= 0 || cfg.MaxBodyBytes > max {
		cfg.MaxBodyBytes = max
	}
	if cfg.ReadChunkBytes <= 0 {
		cfg.ReadChunkBytes = 1 << 20
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Server{cfg: cfg, closing: make(chan struct{}), origins: origins, anyOrigin: origins["*"]}, nil
}

// Protocol header names (§13.2, §5.2.1).
const (
	hNextOffset    = "Stream-Next-Offset"
	hUpToDate      = "Stream-Up-To-Date"
	hClosed        = "Stream-Closed"
	hCursor        = "Stream-Cursor"
	hTTL           = "Stream-TTL"
	hExpiresAt     = "Stream-Expires-At"
	hSeq           = "Stream-Seq"
	hForkedFrom    = "Stream-Forked-From"
	hForkOffset    = "Stream-Fork-Offset"
	hForkSub       = "Stream-Fork-Sub-Offset"
	hProducerID    = "Producer-Id"
	hProducerEpoch = "Producer-Epoch"
	hProducerSeq   = "Producer-Seq"
	hExpectedSeq   = "Producer-Expected-Seq"
	hReceivedSeq   = "Producer-Received-Seq"
	hSSEEncoding   = "Stream-Sse-Data-Encoding"
	// Extensions: where the stream's records are in Kafka, for replay with
	// Kafka tools, and the first retained offset on a 410.
	hKafkaTopic     = "Forklab-Kafka-Topic"
	hKafkaPartition = "Forklab-Kafka-Partition"
	hEarliest       = "Forklab-Earliest-Offset"
	// hGoneReason says why a 410 refuses: deleted (the stream), generation
	// (an offset of a generation deleted and created again), retention.
	hGoneReason = "Forklab-Gone-Reason"
)

var exposed = strings.Join([]string{hNextOffset, hUpToDate, hClosed, hCursor, hTTL, hExpiresAt,
	hProducerEpoch, hProducerSeq, hExpectedSeq, hReceivedSeq, hSSEEncoding, hKafkaTopic, hKafkaPartition,
	hEarliest, hGoneReason, "ETag", "Location", "Content-Type", "Retry-After", "WWW-Authenticate", "Allow"}, ", ")

// Values of the headers every response carries, shared by all responses:
// capacity equals length, so an Add on one copies rather than writes into it.
var (
	vNosniff     = []string{"nosniff"}
	vCrossOrigin = []string{"cross-origin"}
	vAnyOrigin   = []string{"*"}
	vVaryOrigin  = []string{"Origin"}
	vExposed     = []string{exposed}
)

// CommonHeaders returns the headers every response carries, the browser
// security headers (§12.7) and CORS, as "Name: value" lines each ended by
// CRLF, for answers written outside the handler: the service's refusals of
// connections over its limits (429, 503). Without them a browser client
// sees a CORS failure, not the status and its Retry-After. These answers
// are written before the request is read, so they cannot name its origin:
// they allow every origin to see the refusal, which carries no stream data
// and did nothing.
func CommonHeaders() string {
	return "X-Content-Type-Options: " + vNosniff[0] + "\r\n" +
		"Cross-Origin-Resource-Policy: " + vCrossOrigin[0] + "\r\n" +
		"Access-Control-Allow-Origin: " + vAnyOrigin[0] + "\r\n" +
		"Access-Control-Expose-Headers: " + vExposed[0] + "\r\n"
}

// ServeHTTP routes a request to its operation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Browser security headers on every response (§12.7).
	// The keys are canonical and the values shared (net/http only reads
	// them; Set and Del replace the slice), so no allocation per response.
	h["X-Content-Type-Options"] = vNosniff
	h["Cross-Origin-Resource-Policy"] = vCrossOrigin
	h["Access-Control-Expose-Headers"] = vExposed
	s.writeDeadline(w)
	if !s.checkBrowser(w, r) {
		return
	}

	if !strings.HasPrefix(r.URL.Path, s.cfg.BasePath) {
		fail(w, http.StatusNotFound, "not found: streams live under %s", s.cfg.BasePath)
		return
	}
	name := r.URL.Path[len(s.cfg.BasePath):]
	if r.Method == http.MethodOptions {
		s.options(w, r)
		return
	}
	if name == "" && r.Method == http.MethodGet {
		s.list(w, r) // extension: GET /v1/stream/?prefix=P lists streams
		return
	}
	if err := checkName(name); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if name == "__ds" || strings.HasPrefix(name, "__ds/") {
		fail(w, http.StatusNotImplemented, "the reserved subscription APIs (__ds) are not implemented by this server")
		return
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	if !s.authorize(w, r, write) {
		return
	}
	var single []string
	switch r.Method {
	case http.MethodPut:
		single = createHeaders
	case http.MethodPost:
		single = appendHeaders
	case http.MethodHead:
		single = headHeaders
	}
	if err := checkRepeated(r.Header, single); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	switch r.Method {
	case http.MethodPut:
		s.create(w, r, name)
	case http.MethodPost:
		s.append(w, r, name)
	case http.MethodDelete:
		s.delete(w, r, name)
	case http.MethodHead:
		s.head(w, r, name)
	case http.MethodGet:
		s.get(w, r, name)
	default:
		h.Set("Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
		fail(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
	}
}

// options answers CORS preflight requests.
func (s *Server) options(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", strings.Join([]string{"Authorization", "Content-Type", "If-None-Match",
		hTTL, hExpiresAt, hSeq, hClosed, hForkedFrom, hForkOffset, hForkSub, hProducerID, hProducerEpoch, hProducerSeq}, ", "))
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// fail writes a refusal: the status and a one-line plain-text reason.
func fail(w http.ResponseWriter, status int, format string, args ...any) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(status)
	fmt.Fprintf(w, format+"\n", args...)
}

// failErr maps a kafkalog refusal to its status code.
func (s *Server) failErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch kafkalog.KindOf(err) {
	case kafkalog.BadRequest:
		status = http.StatusBadRequest
	case kafkalog.NotFound:
		status = http.StatusNotFound
	case kafkalog.Gone:
		status = http.StatusGone
		if why := kafkalog.GoneReason(err); why != "" {
			w.Header().Set(hGoneReason, why)
		}
	case kafkalog.Conflict:
		status = http.StatusConflict
	case kafkalog.Fenced:
		status = http.StatusForbidden
	case kafkalog.Unavailable:
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	default:
		s.cfg.Logf("server: %v", err)
		if errors.Is(err, errBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
	}
	fail(w, status, "%s", err.Error())
}

// streamURL is the absolute URL of a stream, for Location.
func (s *Server) streamURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}
