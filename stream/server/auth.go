package server

import (
	"bufio"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Scope is what a bearer token may do.
type Scope int

const (
	// ScopeRead allows GET and HEAD.
	ScopeRead Scope = iota + 1
	// ScopeReadWrite also allows PUT, POST and DELETE: creating, appending
	// to, closing and deleting streams.
	ScopeReadWrite
)

// Tokens is the set of bearer tokens the server accepts (RFC 6750). The
// protocol requires access control for creation, modification and deletion
// (§12.1); a read scope lets a token read without writing.
type Tokens struct {
	tokens []token
}

type token struct {
	secret []byte
	scope  Scope
}

// LoadTokens reads a token file: one token per line as "SCOPE TOKEN" with
// SCOPE "read" or "read-write"; blank lines and lines starting with # are
// ignored.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := &Tokens{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"SCOPE TOKEN\" (SCOPE read or read-write)", path, n)
		}
		var sc Scope
		switch fields[0] {
		case "read":
			sc = ScopeRead
		case "read-write":
			sc = ScopeReadWrite
		default:
			return nil, fmt.Errorf("%s:%d: unknown scope %q (want read or read-write)", path, n, fields[0])
		}
		if len(fields[1]) < 16 {
			return nil, fmt.Errorf("%s:%d: token is %d characters; use at least 16", path, n, len(fields[1]))
		}
		t.tokens = append(t.tokens, token{secret: []byte(fields[1]), scope: sc})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.tokens) == 0 {
		return nil, fmt.Errorf("%s: no tokens", path)
	}
	return t, nil
}

// NewTokens builds a token set in memory (tests, embedding).
func NewTokens(m map[string]Scope) *Tokens {
	t := &Tokens{}
	for k, v := range m {
		t.tokens = append(t.tokens, token{secret: []byte(k), scope: v})
	}
	return t
}

// scopeOf returns the scope of a presented token, 0 if unknown. Every
// token is compared in constant time.
func (t *Tokens) scopeOf(presented string) Scope {
	var got Scope
	for _, tk := range t.tokens {
		if subtle.ConstantTimeCompare(tk.secret, []byte(presented)) == 1 {
			got = tk.scope
		}
	}
	return got
}

// authorize checks the request's bearer token; it answers 401 (no or unknown
// token) or 403 (a read token asking to write) itself and returns false.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, write bool) bool {
	if s.cfg.Tokens == nil {
		return true
	}
	if err := checkRepeated(r.Header, authHeaders); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return false
	}
	// The scheme name is case-insensitive (RFC 7235 §2.1).
	scheme, presented, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	scope := Scope(0)
	if ok {
		scope = s.cfg.Tokens.scopeOf(strings.TrimSpace(presented))
	}
	if scope == 0 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="forklab"`)
		fail(w, http.StatusUnauthorized, "missing or unknown bearer token")
		return false
	}
	if write && scope < ScopeReadWrite {
		w.Header().Set("WWW-Authenticate", `Bearer realm="forklab", error="insufficient_scope"`)
		fail(w, http.StatusForbidden, "this token may only read")
		return false
	}
	return true
}
