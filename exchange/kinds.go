package exchange

import "strings"

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

// TaskIDPrefix starts every task id, and no session id (those are
// rand.Text: upper-case base32).
const TaskIDPrefix = "task-"

// ContinuationIDPrefix starts the identity of every continuation grain
// that serves requests ("c-<node>-<k>"), and no session or task id.
const ContinuationIDPrefix = "c-"

// OwnerKind is the kind of the grain that owns a paused execution whose
// directory row names owner: a task grain for a task id (code mode's
// execute run as a task), a continuation grain for a continuation id (a
// 2026-07-28 sessionless execution), else a session grain.
func OwnerKind(owner string) string {
	switch {
	case strings.HasPrefix(owner, TaskIDPrefix):
		return KindTask
	case strings.HasPrefix(owner, ContinuationIDPrefix):
		return KindContinuation
	}
	return KindSession
}
