// Package gateway is mcpgrain's HTTP front door. Every node serves it, and
// any node can serve any session: the gateway turns HTTP requests into grain
// requests routed by the cluster.
//
// This package currently serves the operational endpoints:
//
//	GET  /healthz            the process is up (always 200 while serving)
//	GET  /readyz             the node is a cluster member and its store answers, or failed < 5s (200/503)
//	GET  /metrics            Prometheus metrics (mcpgrain_*, Go runtime, process)
//	POST /debug/probe/{id}   ?delta=N — call the built-in probe grain (only with --enable-probe; admin role)
//	GET  /debug/pprof/       Go's profiler, without cmdline (only with --enable-pprof; admin role)
//
// The MCP endpoint (/mcp) and the approval routes are added on top of these.
//
// One rule for browsers guards the whole mux, every route above and
// every route added to it: on a loopback listener a Host that is not
// loopback is refused (DNS rebinding), and so is a cross-origin request
// with an unsafe method unless its origin is trusted
// ([Options.TrustedOrigins]); both answer 403 before any handler runs.
package gateway
