package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// fuzzMethods are the methods FuzzRequest sends (index mod len).
var fuzzMethods = []string{"GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH"}

// FuzzRequest sends the protocol handler requests made of any method,
// path, query (offset, live, cursor, max_bytes), headers (Content-Type,
// the TTL, expiry, fork, closing, Stream-Seq and producer headers,
// If-None-Match, Origin, Host, Authorization) and body, against a log on
// the embedded broker that keeps the streams earlier inputs made. Every
// request is answered — no panic, no 500 (a failure the handler did not
// classify) — with the browser security headers, and every refusal is a
// one-line text/plain reason.
func FuzzRequest(f *testing.F) {
	seeds := []struct {
		method           uint8
		path, query, hdr string
		body             []byte
	}{
		{2, "s", "", "Content-Type: text/plain\nStream-TTL: 60", []byte("a")},
		{3, "s", "", "Content-Type: text/plain\nProducer-Id: w\nProducer-Epoch: 0\nProducer-Seq: 0", []byte("b")},
		{3, "s", "", "Stream-Closed: true", nil},
		{0, "s", "offset=-1&max_bytes=1", "", nil},
		{0, "s", "offset=now&live=long-poll&cursor=99999999999999999999", "", nil},
		{0, "s", "offset=0000000000000000_0000000000000001_1_00000000&live=sse", "", nil},
		{2, "j/x", "", "Content-Type: application/json\nStream-Expires-At: 2030-01-01t00:00:00z", []byte(`[{"a":1},[2]]`)},
		{2, "f", "", "Content-Type: text/plain\nStream-Forked-From: s\nStream-Fork-Offset: 0000000000000000_0000000000000000\nStream-Fork-Sub-Offset: 1", nil},
		{0, "s", "", "If-None-Match: \"x\", W/\"y\"\nOrigin: http://localhost:5173", nil},
		{5, "s", "", "Origin: http://evil.example\nAccess-Control-Request-Method: DELETE", nil},
		{4, "s", "", "Host: evil.example:4437", nil},
		{1, "s", "", "Producer-Id: w", nil},
		{0, "", "prefix=s", "", nil},
		{0, "__ds/x", "", "", nil},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.hdr, s.body)
	}
	svc, err := service.Start(context.Background(), service.Config{Addr: "127.0.0.1:0", DataDir: f.TempDir(), NoSync: true,
		Log: kafkalog.Config{Logf: func(string, ...any) {}, WriteTimeout: 5 * time.Second}})
	if err != nil {
		f.Fatal(err)
	}
	defer svc.Close(context.Background())
	h, err := server.New(server.Config{Log: svc.Log, LongPollTimeout: time.Millisecond, SSEMaxDuration: time.Millisecond,
		MaxBodyBytes: 4096, LoopbackHostsOnly: true, CORSOrigins: []string{"https://example.com"},
		Logf: func(format string, args ...any) { f.Logf(format, args...) }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method uint8, path, query, hdr string, body []byte) {
		req := &http.Request{Method: fuzzMethods[int(method)%len(fuzzMethods)], Header: http.Header{}, Host: "127.0.0.1",
			URL: &url.URL{Path: "/v1/stream/" + path, RawQuery: query}, Body: io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, RemoteAddr: "127.0.0.1:1"}
		for _, line := range strings.Split(hdr, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if k == "Host" {
				req.Host = strings.TrimSpace(v)
				continue
			}
			req.Header.Add(k, strings.TrimSpace(v))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		res := rec.Result()
		if res.StatusCode == 500 {
			t.Fatalf("%s %s?%s: 500 %q", req.Method, req.URL.Path, query, rec.Body.String())
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s %s?%s: %d without X-Content-Type-Options", req.Method, req.URL.Path, query, res.StatusCode)
		}
		if res.StatusCode >= 400 {
			b := rec.Body.String()
			if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") || req.Method != "HEAD" && (!strings.HasSuffix(b, "\n") || strings.Count(b, "\n") != 1) {
				t.Fatalf("%s %s?%s: %d with %q: want a one-line text/plain reason", req.Method, req.URL.Path, query, res.StatusCode, b)
			}
		}
	})
}
