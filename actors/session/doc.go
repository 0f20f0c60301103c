// Package session is the MCP session grain: one virtual grain per stateful
// MCP session (protocol eras 2025-03-26 to 2025-11-25), identity = the
// Mcp-Session-Id, placed on a node by consistent hashing. Any node's
// gateway reaches it through the cluster; the grain is where the session's
// state lives while it is in memory and where it is restored from the store
// when it is not.
//
// What the grain holds (session.go). What happens to it is decided by a
// pure machine (machine.go, machine_admit.go) — an exchange's admission,
// the session's creation, parked streams, builds, approval leases, the
// idle alarm, cap evictions, disposal, expiry, the end, passivation —
// whose actions the grain carries out (executor.go):
//   - the session record (owner principal, the go-sdk handshake state,
//     last activity, approval decisions, the event log's untrimmed bytes:
//     pb.SessionRecord), created in one store transaction before
//     the initialize answer goes out, so a session the client knows of
//     always exists;
//   - ownership: every request carries the caller's principal, and a
//     session answers only its owner (403 otherwise);
//   - its runtime (Runtime, built by a Builder: actors/mcpruntime): the
//     session's go-sdk handler (on the node's one shared server), event
//     log and code-mode executions. A runtime is resident in memory or
//     not; a request to a session without one restores it from the
//     record (a cold build);
//   - the idle policy (actors/alarm): an in-memory timer asks the pure
//     policy whether to keep, extend a lease, or dispose of the runtime;
//     disposal keeps the record, so disposal is hibernation;
//   - the session's lifetime: idle past SessionTTL it ends (a tombstone,
//     then the grain row is deleted); DELETE /mcp ends it at once;
//   - exchanges (exchange.go): the machine admits each forwarded HTTP
//     request (creates the session, refuses it, parks a standalone stream
//     of a session without a runtime, or serves it, building the runtime
//     first); a served one is started with exchange.Start and served by
//     the runtime's handler (the standalone stream's wire details are
//     exchange's: exchange/standalone.go);
//   - executions (executions.go): a paused code-mode execution holds an
//     approval lease (its deadline is a durable reminder); only a pause
//     that lives in memory keeps the runtime resident, a durable
//     (journaled) one does not; decisions forwarded from other
//     sessions (remote.go) and approvals arrive as grain messages.
//
// A Host (host.go) is what the session grains of one node share: the
// runtime builder, the residency registry (actors/residency: a soft cap
// derived from a memory budget, LRU eviction of idle runtimes), and the
// metrics (metrics.go).
//
// "executor's X" in comments names the behaviour of the TypeScript project
// mcpgrain reproduces (docs/design.md, "Executor").
package session
