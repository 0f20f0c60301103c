// Package actors is the home of mcpgrain's grains and of the libraries
// they run. Grains implement cluster/grain.Grain; the cluster layer
// activates them on their owner node (the built-in probe grain,
// cluster/probe, is the smallest example).
//
// Grains:
//   - session/: the MCP session grain (stateful eras);
//   - continuation/: the grains serving sessionless 2026-07-28 requests;
//   - tasks/: the task grains of the MCP tasks extension (SEP-2663).
//
// The other packages hold no actor. They live here because only grains
// use them, and they are what a grain runs:
//   - alarm/, residency/, policy/: pure decisions (the idle policy, the
//     node's residency cap and eviction pick, approval rules and who may
//     decide), table-tested;
//   - mcpruntime/: a session's MCP runtime (the node's shared go-sdk
//     server, the store-backed event log, code mode wiring);
//   - toolpacks/: the MCP tools, resources and prompts a client lists
//     and calls (the packs code, demo, conformance);
//   - tools/: the tool sources code-mode code calls as
//     tools.<source>.<op> (OpenAPI, upstream MCP, the demo to-do API);
//     the client never lists them (see tools' package doc for the three
//     things called "tools");
//   - codemode/, engine/, sandbox/: code mode's execute and resume tools,
//     the execution engine (pauses, approvals, durable replay) and the
//     TypeScript sandbox in worker processes.
//
// Nothing here imports gateway or internal; the gateway reaches grains
// only through the exchange package and grain messages.
package actors
