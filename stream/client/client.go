// Package client is a Go client for the session log's Durable Streams
// protocol. The server's URL is all it needs.
//
// An Appender writes as one idempotent producer (§5.2.1 of the protocol): it
// carries a producer id, an epoch (the worker incarnation) and a seq, retries
// a failed append with the same seq so a retry can never write twice, and on
// a 403 either reports that a newer incarnation has fenced it or, if asked,
// claims a new epoch. A Reader resumes from an offset in catch-up or
// long-poll mode and always knows the offset to resume from next.
//
// Offsets are opaque strings: store them, compare them, hand them back;
// never compute with them.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Start is the offset of the beginning of every stream.
const Start = "-1"

// Client talks to one session-log server.
type Client struct {
	base  string // e.g. http://127.0.0.1:4437/v1/stream/
	http  *http.Client
	token string
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends a bearer token with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient replaces the default http.Client (which has no overall
// timeout, as long-polls wait).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// New returns a client for the server at serverURL, e.g.
// "http://127.0.0.1:4437". A URL that already ends in /v1/stream/ is used as
// the stream base as it is.
func New(serverURL string, opts ...Option) *Client {
	base := strings.TrimRight(serverURL, "/")
	if !strings.HasSuffix(base, "/v1/stream") {
		base += "/v1/stream"
	}
	c := &Client{base: base + "/", http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// URL is the stream's URL.
func (c *Client) URL(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return c.base + strings.Join(segs, "/")
}

// StatusError is a refusal from the server: the protocol's status code and
// the server's one-line reason.
type StatusError struct {
	Code   int
	Reason string
	Header http.Header
}

// Error renders the status and the server's reason.
func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Reason)
}

// FencedError is a 403 on an append: a newer epoch of the producer has
// taken over and this writer is a zombie.
type FencedError struct {
	Producer     string
	Epoch        int64 // the epoch the writer used
	CurrentEpoch int64 // the epoch now in force
}

// Error names the producer, its epoch and the epoch that fenced it.
func (e *FencedError) Error() string {
	return fmt.Sprintf("producer %q epoch %d is fenced: epoch %d has taken over", e.Producer, e.Epoch, e.CurrentEpoch)
}

// GapError is a 409 sequence gap: the server expected another seq.
type GapError struct {
	Expected, Received int64
}

// Error names the expected and the received seq.
func (e *GapError) Error() string {
	return fmt.Sprintf("producer seq gap: server expected %d, got %d", e.Expected, e.Received)
}

// StatusCode returns the HTTP status of a refusal, 0 for other errors.
func StatusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	var fe *FencedError
	if errors.As(err, &fe) {
		return http.StatusForbidden
	}
	var ge *GapError
	if errors.As(err, &ge) {
		return http.StatusConflict
	}
	return 0
}

// Unreachable reports whether err is a failure to reach the log at all —
// the connection refused (nothing listens there), the host unknown, the
// dial timed out — rather than an answer from it. A command tells its user
// to start the log, or to point --log at it, on such an error.
func Unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial"
}

// isJSONType reports whether a Content-Type is application/json.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && strings.EqualFold(mt, "application/json")
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsGone reports a 410: the stream is deleted but kept for its forks, or
// the offset read from is gone: older than what the log retains, or an
// offset of an earlier generation of a stream that was deleted and created
// again. GoneReason tells them apart; EarliestOffset names where a reader
// can resume.
func IsGone(err error) bool { return StatusCode(err) == http.StatusGone }

// Why a 410 refuses: the values of its Forklab-Gone-Reason header.
const (
	// GoneDeleted: the stream is deleted (its data kept for its forks).
	GoneDeleted = "deleted"
	// GoneGeneration: the offset belongs to an earlier generation of the
	// stream, which was deleted and created again: read the current
	// generation from Start.
	GoneGeneration = "generation"
	// GoneRetention: the offset is older than what the log retains: read
	// from EarliestOffset.
	GoneRetention = "retention"
)

// GoneReason says why a 410 refuses (GoneDeleted, GoneGeneration,
// GoneRetention, from the server's Forklab-Gone-Reason header); "" for
// any other error, or a server that does not say.
func GoneReason(err error) string {
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusGone && se.Header != nil {
		return se.Header.Get("Forklab-Gone-Reason")
	}
	return ""
}

// EarliestOffset is the Forklab-Earliest-Offset of a 410 for an offset:
// the first offset of the stream a read can start from; "" when the
// refusal names none.
func EarliestOffset(err error) string {
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusGone && se.Header != nil {
		return se.Header.Get("Forklab-Earliest-Offset")
	}
	return ""
}

func (c *Client) do(ctx context.Context, method, u string, h http.Header, body []byte) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, io.EOF) {
			// net/http's error for a connection closed before an
			// answer wraps io.EOF, the error with which a Reader
			// ends: a caller reading errors.Is(err, io.EOF) as "the
			// stream is read" took a half-read stream for a whole one.
			return nil, nil, fmt.Errorf("%s %s: %w (%v)", method, u, ErrConnClosed, err)
		}
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res, nil, err
	}
	return res, b, nil
}

// ErrConnClosed is wrapped by the error of a request whose connection
// closed before the log answered (the log restarted, a proxy cut it): no
// status, worth retrying, and never io.EOF, which a Reader returns only at
// the end of a stream.
var ErrConnClosed = errors.New("the log closed the connection before answering")

func statusErr(res *http.Response, body []byte) error {
	return &StatusError{Code: res.StatusCode, Reason: strings.TrimSpace(string(body)), Header: res.Header}
}

// Info is a stream's metadata.
type Info struct {
	ContentType string
	// Tail is the offset after the last data: where the next append goes.
	Tail      string
	Closed    bool
	TTL       time.Duration // 0 when none
	ExpiresAt time.Time
	// Topic and Partition locate the stream's records in Kafka.
	Topic     string
	Partition int
}

// CreateOptions are the optional settings of a new stream.
type CreateOptions struct {
	ContentType string // default application/octet-stream
	Data        []byte // initial content
	Closed      bool   // create it closed
	TTL         time.Duration
	ExpiresAt   time.Time
}

// Create creates a stream, or confirms an identical existing one (created is
// then false). A different existing configuration is a 409.
func (c *Client) Create(ctx context.Context, name string, o CreateOptions) (info Info, created bool, err error) {
	h := http.Header{}
	if o.ContentType != "" {
		h.Set("Content-Type", o.ContentType)
	}
	if o.Closed {
		h.Set("Stream-Closed", "true")
	}
	if o.TTL > 0 {
		h.Set("Stream-TTL", strconv.FormatInt(int64(o.TTL/time.Second), 10))
	}
	if !o.ExpiresAt.IsZero() {
		h.Set("Stream-Expires-At", o.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	return c.put(ctx, name, h, o.Data)
}

// ForkOptions choose where a fork diverges from its source.
type ForkOptions struct {
	// At is the source offset the fork diverges at; "" is the source's tail.
	At string
	// Sub inherits this many more bytes (JSON: messages) of the record at At.
	Sub         int64
	ContentType string // default: the source's
	TTL         time.Duration
	ExpiresAt   time.Time
}

// Fork creates stream name as a fork of source (§4.2): it reads as the
// source's data up to the fork offset, then its own appends. Producers on
// the fork start fresh (a new epoch history).
func (c *Client) Fork(ctx context.Context, name, source string, o ForkOptions) (Info, error) {
	h := http.Header{}
	h.Set("Stream-Forked-From", source)
	if o.At != "" {
		h.Set("Stream-Fork-Offset", o.At)
	}
	if o.Sub > 0 {
		h.Set("Stream-Fork-Sub-Offset", strconv.FormatInt(o.Sub, 10))
	}
	if o.ContentType != "" {
		h.Set("Content-Type", o.ContentType)
	}
	if o.TTL > 0 {
		h.Set("Stream-TTL", strconv.FormatInt(int64(o.TTL/time.Second), 10))
	}
	if !o.ExpiresAt.IsZero() {
		h.Set("Stream-Expires-At", o.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	info, _, err := c.put(ctx, name, h, nil)
	return info, err
}

func (c *Client) put(ctx context.Context, name string, h http.Header, body []byte) (Info, bool, error) {
	res, b, err := c.do(ctx, http.MethodPut, c.URL(name), h, body)
	if err != nil {
		return Info{}, false, err
	}
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		return Info{}, false, statusErr(res, b)
	}
	return infoFrom(res.Header), res.StatusCode == http.StatusCreated, nil
}

func infoFrom(h http.Header) Info {
	i := Info{ContentType: h.Get("Content-Type"), Tail: h.Get("Stream-Next-Offset"), Closed: strings.EqualFold(h.Get("Stream-Closed"), "true"),
		Topic: h.Get("Forklab-Kafka-Topic")}
	if v, err := strconv.ParseInt(h.Get("Stream-TTL"), 10, 64); err == nil {
		i.TTL = time.Duration(v) * time.Second
	}
	if t, err := time.Parse(time.RFC3339Nano, h.Get("Stream-Expires-At")); err == nil {
		i.ExpiresAt = t
	}
	i.Partition, _ = strconv.Atoi(h.Get("Forklab-Kafka-Partition"))
	return i
}

// Head returns a stream's metadata.
func (c *Client) Head(ctx context.Context, name string) (Info, error) {
	res, b, err := c.do(ctx, http.MethodHead, c.URL(name), nil, nil)
	if err != nil {
		return Info{}, err
	}
	if res.StatusCode != http.StatusOK {
		return Info{}, statusErr(res, b)
	}
	return infoFrom(res.Header), nil
}

// ProducerState asks for a producer's current epoch and highest accepted
// seq on a stream (a forklab extension: HEAD with a Producer-Id header).
// known is false for a producer the stream has not seen.
func (c *Client) ProducerState(ctx context.Context, name, producerID string) (epoch, seq int64, known bool, err error) {
	h := http.Header{}
	h.Set("Producer-Id", producerID)
	res, b, err := c.do(ctx, http.MethodHead, c.URL(name), h, nil)
	if err != nil {
		return 0, 0, false, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, 0, false, statusErr(res, b)
	}
	e, err1 := strconv.ParseInt(res.Header.Get("Producer-Epoch"), 10, 64)
	s, err2 := strconv.ParseInt(res.Header.Get("Producer-Seq"), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, nil
	}
	return e, s, true, nil
}

// Delete deletes a stream.
func (c *Client) Delete(ctx context.Context, name string) error {
	res, b, err := c.do(ctx, http.MethodDelete, c.URL(name), nil, nil)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusNoContent {
		return statusErr(res, b)
	}
	return nil
}

// Close closes a stream without appending (§5.3); closing a closed stream
// succeeds.
func (c *Client) Close(ctx context.Context, name string) error {
	h := http.Header{}
	h.Set("Stream-Closed", "true")
	res, b, err := c.do(ctx, http.MethodPost, c.URL(name), h, nil)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusNoContent {
		return statusErr(res, b)
	}
	return nil
}

// Chunk is one read response.
type Chunk struct {
	// Data is the bytes read; for JSON streams a JSON array of messages.
	Data []byte
	// Offset is where the chunk was read from; Next where to read next.
	Offset, Next string
	// UpToDate: the chunk reached the tail. Closed: and the stream is
	// closed, so nothing will follow.
	UpToDate, Closed bool
	// ContentType is the stream's content type.
	ContentType string
	// Cursor is the server's Stream-Cursor, echoed on the next live read.
	Cursor string
}

// Messages splits a JSON stream's chunk into its messages.
func (ch Chunk) Messages() ([]json.RawMessage, error) {
	if len(ch.Data) == 0 {
		return nil, nil
	}
	var ms []json.RawMessage
	if err := json.Unmarshal(ch.Data, &ms); err != nil {
		return nil, fmt.Errorf("chunk is not a JSON array: %w", err)
	}
	return ms, nil
}

// Read reads one catch-up chunk from offset (Start for the beginning).
func (c *Client) Read(ctx context.Context, name, offset string) (Chunk, error) {
	return c.read(ctx, name, offset, "", "", 0)
}

// ReadMax reads one catch-up chunk from offset of at most maxBytes of data,
// but at least one record when any is available (the forklab log's
// max_bytes extension). With maxBytes 1 the chunk holds one record (one
// append), so its Next is the offset right after that record.
func (c *Client) ReadMax(ctx context.Context, name, offset string, maxBytes int) (Chunk, error) {
	return c.read(ctx, name, offset, "", "", maxBytes)
}

func (c *Client) read(ctx context.Context, name, offset, live, cursor string, maxBytes int) (Chunk, error) {
	q := url.Values{}
	if offset == "" {
		offset = Start
	}
	if maxBytes > 0 {
		q.Set("max_bytes", strconv.Itoa(maxBytes))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if live != "" {
		q.Set("live", live)
	}
	q.Set("offset", offset)
	res, b, err := c.do(ctx, http.MethodGet, c.URL(name)+"?"+q.Encode(), nil, nil)
	if err != nil {
		return Chunk{}, err
	}
	switch res.StatusCode {
	case http.StatusOK, http.StatusNoContent:
	default:
		return Chunk{}, statusErr(res, b)
	}
	ch := Chunk{Data: b, Offset: offset, Next: res.Header.Get("Stream-Next-Offset"),
		UpToDate: res.Header.Get("Stream-Up-To-Date") == "true", Closed: res.Header.Get("Stream-Closed") == "true",
		ContentType: res.Header.Get("Content-Type"), Cursor: res.Header.Get("Stream-Cursor")}
	if res.StatusCode == http.StatusNoContent {
		ch.Data = nil
	}
	if ch.Next == "" {
		return Chunk{}, fmt.Errorf("read %s: response has no Stream-Next-Offset", name)
	}
	return ch, nil
}

// ReadAll reads from offset to the tail as of the last response and returns
// the data and the offset to resume from. For JSON streams it returns the
// messages of every chunk joined into one JSON array.
func (c *Client) ReadAll(ctx context.Context, name, offset string) (data []byte, next string, err error) {
	var buf bytes.Buffer
	var msgs []json.RawMessage
	isJSON := false
	for {
		ch, err := c.Read(ctx, name, offset)
		if err != nil {
			return nil, offset, err
		}
		if isJSONType(ch.ContentType) {
			isJSON = true
			ms, err := ch.Messages()
			if err != nil {
				return nil, offset, err
			}
			msgs = append(msgs, ms...)
		} else {
			buf.Write(ch.Data)
		}
		offset = ch.Next
		if ch.UpToDate {
			break
		}
	}
	if isJSON {
		if msgs == nil {
			msgs = []json.RawMessage{}
		}
		b, err := json.Marshal(msgs)
		return b, offset, err
	}
	return buf.Bytes(), offset, nil
}

// List returns the names of the streams whose names start with prefix,
// sorted (a forklab extension: GET on the base path with ?prefix=).
func (c *Client) List(ctx context.Context, prefix string) ([]string, error) {
	res, b, err := c.do(ctx, http.MethodGet, c.base+"?"+url.Values{"prefix": {prefix}}.Encode(), nil, nil)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, statusErr(res, b)
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return names, nil
}
