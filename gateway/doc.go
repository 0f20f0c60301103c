// Package gateway is mcpgrain's HTTP front door. Every node serves it, and
// any node can serve any session: the gateway turns HTTP requests into grain
// requests routed by the cluster.
//
// It serves:
//
//	     /mcp                          the MCP endpoint, both protocol eras (mcp.go, modern.go; with Options.MCP)
//	GET  /sse                          the HTTP+SSE transport of 2024-11-05: a session's event stream (legacysse.go; with Options.MCP)
//	POST /messages                     ?sessionId=…&node=…&stream=… — that transport's messages, on any node (legacysse.go, legacysink.go)
//	GET  /.well-known/oauth-protected-resource…  OAuth protected resource metadata (with OAuth)
//	GET  /healthz                      the process is up (always 200 while serving)
//	GET  /readyz                       the node is a cluster member and its store answers, or failed < 5s (200/503)
//	GET  /metrics                      Prometheus metrics (mcpgrain_*, Go runtime, process)
//	POST /debug/probe/{id}             ?delta=N — call the built-in probe grain (only with --enable-probe; admin role)
//	POST /debug/probe/{id}/reminders   register durable reminders on a probe grain (same conditions)
//	GET  /debug/pprof/                 Go's profiler, without cmdline (only with --enable-pprof; admin role)
//
// Other routes are mounted on the same mux (Options.Mount): the approval
// API, page and inbox (gateway/approvals) and, in `mcpgrain dev`, the demo
// to-do API (/demo/).
//
// One rule for browsers guards the whole mux, every route above and
// every route added to it: on a loopback listener a Host that is not
// loopback is refused (DNS rebinding), and so is a cross-origin request
// with an unsafe method unless its origin is trusted
// ([Options.TrustedOrigins]); both answer 403 before any handler runs.
package gateway
