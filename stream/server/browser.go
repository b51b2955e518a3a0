package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The browser boundary. A web page the user visits can send requests to a
// service on the user's own machine: cross-origin ones (a fetch from
// https://evil.example to http://127.0.0.1:4437) and, through DNS
// rebinding, same-origin ones (evil.example first resolves to the
// attacker's server, then to 127.0.0.1, and the page's requests reach the
// service with "Host: evil.example:4437"). A browser sends a simple POST
// without asking first and only hides the answer from the page, so a
// missing Access-Control-Allow-Origin does not stop the write: the service
// refuses such requests before doing anything, as development servers do
// (Vite's server.cors and server.allowedHosts, Jupyter's allow_origin and
// local-host check).
//
//   - Origin: a request that carries one (every cross-origin request, and a
//     browser's POST, PUT and DELETE) is served only when the origin is a
//     loopback one (http or https, host localhost, a name under
//     .localhost, or a loopback address, any port) or one Config.CORSOrigins
//     names; "*" there allows every origin. Others get 403 and no CORS
//     headers, a preflight included. A request without Origin (curl, the Go
//     client, the SDKs) is not a browser's cross-origin request.
//   - Host: with Config.LoopbackHostsOnly (the service on a loopback
//     address without tokens), a request whose Host is not a loopback name
//     or address gets 403: a rebinding page's requests name the attacker's
//     domain.
//
// With bearer tokens a page has no credential to send (a browser attaches
// none by itself), so the Host check is off; the Origin rule is the same.

// LoopbackName reports whether host (a name or an address, without port
// or brackets) names this machine's loopback interface: localhost, a name
// under .localhost (RFC 6761 §6.3: resolvers answer them with a loopback
// address), or a loopback IPv4 or IPv6 address. A trailing dot is
// ignored.
func LoopbackName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a request's Host field (host[:port], an
// IPv6 address in brackets) names the loopback interface. An empty Host
// (HTTP/1.0 without one) is not a browser's: browsers always send it.
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return LoopbackName(host)
}

// ParseOrigin checks a --cors-origin value and returns it in the form
// browsers send (RFC 6454 §6.2: scheme "://" host [":" port], lower case,
// no default port, no path): "*" (every origin), "null" (sandboxed frames,
// file: pages), or an http or https origin.
func ParseOrigin(s string) (string, error) {
	if s == "*" || s == "null" {
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https (as a browser sends it in Origin, e.g. https://app.example:8443), * or null", s)
	}
	host, port := u.Hostname(), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	o := u.Scheme + "://" + strings.ToLower(host)
	if port != "" {
		o += ":" + port
	}
	return o, nil
}

// loopbackOrigin reports whether an Origin header value is an http or
// https origin on a loopback name or address.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return LoopbackName(u.Hostname())
}

// allowedOrigin reports whether a request from origin may be served.
func (s *Server) allowedOrigin(origin string) bool {
	if s.anyOrigin || loopbackOrigin(origin) {
		return true
	}
	o, err := ParseOrigin(origin)
	return err == nil && s.origins[o]
}

// checkBrowser applies the browser boundary to r and sets the CORS
// headers of its answer; it answers 403 itself and returns false for a
// request it refuses.
func (s *Server) checkBrowser(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	if s.cfg.LoopbackHostsOnly && !loopbackHost(r.Host) {
		fail(w, http.StatusForbidden, "Host %q is not a loopback name or address: without --token-file this service answers only requests for localhost, 127.0.0.1 or [::1] (another name is what a DNS rebinding web page sends); use one of those in the URL", r.Host)
		return false
	}
	if s.anyOrigin {
		h["Access-Control-Allow-Origin"] = vAnyOrigin
		return true
	}
	h["Vary"] = vVaryOrigin
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		return true
	}
	if len(origins) > 1 || !s.allowedOrigin(origins[0]) {
		fail(w, http.StatusForbidden, "Origin %q may not use this service: a page from it could read and change the session log; if you trust it, run forklab log serve --cors-origin %s (loopback origins are allowed by default)", strings.Join(origins, ", "), origins[0])
		return false
	}
	h["Access-Control-Allow-Origin"] = origins[:1:1]
	return true
}
