package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Unreachable tells a log nobody started (connection refused, an unknown
// host) from an answer of the log (a 404, a 503): only the first makes a
// command say "start it with forklab log serve, or set --log" (issue 26).
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	ctx := context.Background()
	_, _, err = New(down).ReadAll(ctx, "s", "-1")
	if err == nil || !Unreachable(err) {
		t.Errorf("a log nobody listens for: %v, Unreachable %v", err, Unreachable(err))
	}
	_, _, err = New("http://no-such-host.invalid:4437").ReadAll(ctx, "s", "-1")
	if err == nil || !Unreachable(err) {
		t.Errorf("an unknown host: %v, Unreachable %v", err, Unreachable(err))
	}
	for _, code := range []int{http.StatusNotFound, http.StatusServiceUnavailable} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
		_, _, err = New(srv.URL).ReadAll(ctx, "s", "-1")
		srv.Close()
		if err == nil || Unreachable(err) {
			t.Errorf("a log that answered %d: %v, Unreachable %v", code, err, Unreachable(err))
		}
	}
}
