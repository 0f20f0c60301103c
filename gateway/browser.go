package gateway

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// browserGuard is the gateway's rule for browsers, applied in front of
// every route the mux serves (/mcp, /api/, /approve/, /approvals, /demo/,
// /debug/, /healthz, /readyz, /metrics, the OAuth metadata and the 404):
//
//   - a request that reached a loopback listener under a Host that is not
//     loopback is refused (DNS rebinding: a page of another site whose name
//     now resolves to 127.0.0.1 would otherwise be same-origin with the
//     node, so no Origin check could tell it apart);
//   - a cross-origin browser request with an unsafe method is refused
//     ([http.CrossOriginProtection]: Sec-Fetch-Site, else Origin against
//     Host), unless its origin is trusted.
//
// Both answer 403 before any handler runs: for /mcp as a JSON-RPC error
// (-32001), for the other routes as {"error": "forbidden", "message"}.
type browserGuard struct {
	next    http.Handler
	origins *http.CrossOriginProtection
}

// newBrowserGuard wraps next with the rule, trusting the given browser
// origins (e.g. "https://app.example.com") besides the node's own.
func newBrowserGuard(next http.Handler, trusted []string) (*browserGuard, error) {
	cop := http.NewCrossOriginProtection()
	for _, origin := range trusted {
		if err := cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("gateway: trusted origin %q: %w", origin, err)
		}
	}
	return &browserGuard{next: next, origins: cop}, nil
}

func (g *browserGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if reboundHost(la, r.Host) {
		refuse(w, r, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host))
		return
	}
	if err := g.origins.Check(r); err != nil {
		refuse(w, r, "Forbidden: cross-origin request")
		return
	}
	g.next.ServeHTTP(w, r)
}

// reboundHost reports whether a request that arrived on the listener
// address local names a Host the listener does not answer to: local is
// loopback and host is not (a DNS-rebinding page). A listener that is not
// loopback (or unknown) answers to any Host: a rebound name cannot reach
// it from the victim's own machine.
func reboundHost(local net.Addr, host string) bool {
	if local == nil {
		return false
	}
	if a, ok := local.(*net.TCPAddr); ok { // the usual listener: no text to format and parse per request
		return a.IP.IsLoopback() && !isLoopback(host)
	}
	return isLoopback(local.String()) && !isLoopback(host)
}

// isLoopback reports whether hostport (a host with or without a port)
// names the loopback interface: localhost or a loopback IP.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// refuse answers 403 in the form of the route: a JSON-RPC error for /mcp,
// the JSON error object of the other routes.
func refuse(w http.ResponseWriter, r *http.Request, msg string) {
	if r.URL.Path == "/mcp" {
		exchange.WriteError(w, http.StatusForbidden, nil, exchange.CodeServerError, msg)
		return
	}
	writeJSON(w, http.StatusForbidden, map[string]any{"error": "forbidden", "message": msg})
}
