// Package tasks is mcpgrain's server side of the MCP tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663) for the sessionless 2026-07-28
// era: a tools/call that the server turns into a task answers at once with
// a CreateTaskResult (resultType "task"), and the client follows the work
// with tasks/get, answers its input requests with tasks/update and stops
// it with tasks/cancel.
//
// Tasks are durable grain state, not process memory. Each task is a task
// grain (identity = the task id), placed by the cluster's hash like any
// grain: it writes its task to the store (fenced by its epoch) before the
// CreateTaskResult is answered, runs the tool, and records every status
// change there. Every node's gateway routes tasks/* to the task grain by
// the request's taskId, so a task created through one node is read,
// updated and cancelled through any other. While its work runs, the grain
// holds a durable lease reminder: if its node dies, the reminder fires on
// a survivor, whose new activation finds the task working with no work
// running: it runs the work again if the tool is safe to re-run (read-only
// or idempotent, by its annotations), else it ends the task failed with a
// clear error — never working forever. An activation that stops gracefully
// hands over instead: it takes a lease on its run in the task's row and
// drains it, and the new activation leaves the task to that run while the
// lease holds (handover, in state.go). A working task's changes are
// compare-and-sets on its attempt, not on the grain's epoch, so the
// drained run's outcome lands after the grain moved, and a late one never
// overwrites the new owner's decision.
// A task waiting for input runs nothing and survives anything: tasks/update
// re-runs the tool from its stored requestState and the responses.
//
// An SDK handler's Step and Ask work in a task's run (Config.Calls): the
// task's tool is one durable call of the task grain; an Ask's question is
// the task's input_required and a pause in the execution directory, owned
// by the task id, decided on every approval surface or by tasks/update
// (an approver's), or declined by the approval reminder when its window
// lapses; the next round re-runs the handler against the call's journal,
// after a node loss too (calls.go).
//
// Code mode's execute is task-supporting: the task grain runs it on an
// execution engine of its own, journaled under the grain, so a pause for
// approval is the task's input_required; tasks/update, or a decision on
// any approval surface (the pause is in the execution directory, owned by
// the task id), resumes it — from its journal after a node loss.
//
// A task's principal travels whole: the task row keeps its creator's
// user, organization and role, and every round runs as that user and
// organization (whose work it is). Answering a code-mode task's input
// requests decides its paused execution, so it takes a role that may
// decide (Config.MayDecide, the node's --approvers), on tasks/update as on
// every approval surface; a caller who may not is refused (-32003) and the
// task keeps waiting. The role of whoever answered is recorded with the
// responses, and the round that carries them runs with it (an admin's
// decision on a viewer's task runs as the admin decided), after a node
// loss too. Cancelling a task cancels its paused execution as the grain,
// not as a decision.
//
// The package has three parts:
//
//   - [Step], a pure state machine for status transitions, and the pure
//     decisions about lost work, handover and afterLoss (state.go);
//   - [Host.Middleware], a go-sdk receiving middleware for the
//     continuation grains' servers: it advertises the extension in
//     server/discover, decides which tools/call becomes a task (the tool's
//     [Support] and the request's client capabilities; -32021 when a tool
//     requires tasks and the client did not declare them) and starts the
//     task grain (middleware.go);
//   - the task grain, which answers tasks/get, tasks/update and
//     tasks/cancel — the extension's JSON-RPC methods, all in one place
//     (grain.go, rpc.go) — and runs the tool on a server of its own
//     (run.go; code mode: code.go).
//
// A node wires it in internal/app (process.grains): it hosts the task
// grain kind ([Host.Kind]) beside the session and continuation kinds, and
// gives [Host.Middleware] to the continuation server (continuation.Config).
package tasks
