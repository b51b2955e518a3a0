package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/forklab/forklab/stream/service"
)

const (
	rwToken   = "rw-0123456789abcdef"
	readToken = "ro-0123456789abcdef"
)

// TestAuth checks bearer-token access control: unauthenticated requests get
// 401, read tokens may read but get 403 on writes, and refused requests
// change nothing.
func TestAuth(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	os.WriteFile(tf, []byte("# forklab tokens\nread-write "+rwToken+"\nread "+readToken+"\n"), 0o600)
	svc := start(t, filepath.Join(dir, "data"), func(c *service.Config) { c.TokenFile = tf })
	defer stop(svc)
	u := svc.URL + "/v1/stream/secret"
	bearer := func(tok string, h map[string]string) map[string]string {
		m := map[string]string{"Authorization": "Bearer " + tok}
		for k, v := range h {
			m[k] = v
		}
		return m
	}
	tp := map[string]string{"Content-Type": "text/plain"}
	steps := []struct {
		name   string
		method string
		h      map[string]string
		body   string
		status int
	}{
		{"create without token", "PUT", tp, "", 401},
		{"create with unknown token", "PUT", bearer("nope-nope-nope-nope", tp), "", 401},
		{"create with read token", "PUT", bearer(readToken, tp), "", 403},
		{"nothing was created", "HEAD", bearer(readToken, nil), "", 404},
		{"create with read-write token", "PUT", bearer(rwToken, tp), "hello", 201},
		{"read without token", "GET", nil, "", 401},
		{"read with read token", "GET", bearer(readToken, nil), "", 200},
		{"the scheme is case-insensitive (RFC 7235)", "GET", map[string]string{"Authorization": "BEARER " + readToken}, "", 200},
		{"another scheme", "GET", map[string]string{"Authorization": "Basic " + readToken}, "", 401},
		{"append with read token", "POST", bearer(readToken, tp), " world", 403},
		{"close with read token", "POST", bearer(readToken, map[string]string{"Stream-Closed": "true"}), "", 403},
		{"delete with read token", "DELETE", bearer(readToken, nil), "", 403},
		{"delete without token", "DELETE", nil, "", 401},
		{"append with read-write token", "POST", bearer(rwToken, tp), " world", 204},
	}
	for _, s := range steps {
		r := do(t, s.method, u, s.h, s.body)
		if r.status != s.status {
			t.Fatalf("%s: %d, want %d (%s)", s.name, r.status, s.status, r.body)
		}
		if s.status == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s: 401 without WWW-Authenticate", s.name)
		}
	}
	if r := do(t, "GET", u, bearer(readToken, nil), ""); r.body != "hello world" || r.header.Get("Stream-Closed") != "" {
		t.Fatalf("stream after refused writes: %q closed=%q", r.body, r.header.Get("Stream-Closed"))
	}
}

// TestRefuseOpenListen checks that without tokens the service refuses to
// listen beyond loopback.
func TestRefuseOpenListen(t *testing.T) {
	_, err := service.Start(context.Background(), service.Config{Addr: "0.0.0.0:0", DataDir: t.TempDir()})
	if !errors.Is(err, service.ErrUnsafeListen) {
		t.Fatalf("listen on 0.0.0.0 without tokens: %v, want ErrUnsafeListen", err)
	}
	_, err = service.Start(context.Background(), service.Config{Addr: "[::]:0", DataDir: t.TempDir()})
	if !errors.Is(err, service.ErrUnsafeListen) {
		t.Fatalf("listen on [::] without tokens: %v, want ErrUnsafeListen", err)
	}
}
