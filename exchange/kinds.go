package exchange

// The grain kinds the gateway exchanges with. The grains are registered
// under these names by actors/session, actors/continuation and
// actors/tasks; the gateway addresses them by name only, so it links none
// of their code (the sandbox, esbuild, go-sdk's server).
const (
	// KindSession is the kind of session grains: one per stateful MCP
	// session (protocol eras 2025-03-26 to 2025-11-25), identity = the
	// Mcp-Session-Id.
	KindSession = "session"
	// KindContinuation is the kind of continuation grains: they serve
	// 2026-07-28 (sessionless) requests, identity "c-<node>-<k>".
	KindContinuation = "continuation"
	// KindTask is the kind of task grains (MCP tasks extension): one per
	// task, identity = the task id (actors/tasks).
	KindTask = "task"
)
