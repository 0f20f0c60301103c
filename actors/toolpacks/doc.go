// Package toolpacks builds the go-sdk MCP servers that mcpgrain sessions run,
// from the node's configured tool packs: named, built-in sets of tools,
// resources and prompts.
//
// The packs are:
//
//   - "code": code mode's execute and resume tools, registered by the
//     session runtime that owns the execution engine (Options.CodeMode).
//   - "demo": small, safe tools that make a node useful before real tool
//     sources exist: echo, add (structured output), now, count_to (progress
//     notifications) and ask_confirmation (elicitation).
//   - "conformance": the server fixture that the official MCP conformance
//     suite (@modelcontextprotocol/conformance) drives in its server
//     scenarios, written from those scenarios' requirements (see
//     conformance.go for its files and what is still missing).
//
// One server serves many sessions: a node builds one server from
// [NewServer] for all its stateful sessions (actors/mcpruntime), so a pack
// keeps nothing a session does on the server. What a pack remembers of a
// session is keyed by the request's *mcp.ServerSession and dropped when the
// session ends; what belongs to the server (the conformance pack's watched
// resource, which changes on a timer while someone subscribes) runs once
// per server. The closer NewServer returns stops that work and must be
// called when the server is retired.
//
// See the package example for validating a flag once, building the node's
// server, and serving it with go-sdk's Streamable HTTP handler.
//
// Only the conformance pack sets server-level handlers (CompletionHandler,
// SubscribeHandler, UnsubscribeHandler). A handler set by two sources (two
// packs, or a pack and [Options].ServerOptions) is a conflict that NewServer
// reports as an error.
package toolpacks
