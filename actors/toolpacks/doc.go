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
//     notifications) and ask_confirmation (elicitation). It is its own
//     package (actors/toolpacks/demo), written on the public SDK API only.
//   - "conformance": the server fixture that the official MCP conformance
//     suite (@modelcontextprotocol/conformance) drives in its server
//     scenarios, written from those scenarios' requirements. It is its own
//     package (actors/toolpacks/conformance), written on the public SDK
//     API only; which of its tools run as tasks is [TaskSupport].
//
// A pack is a [Pack] value (an alias of app.Pack, with its [Env] and
// [Handlers], so that a pack written on the public API needs nothing of
// this package): the built-in ones are listed by [Builtin],
// and a program may know packs of its own ([Options].Packs, checked with
// [ValidateWith]); the names given to [NewServer] select among both. The
// public SDK (the module root package mcpgrain, docs/sdk.md) turns a
// user's server into such a pack, so a user's tools go through the same
// mechanism as the built-ins.
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
//
// Not to be confused with actors/tools: a pack's tools are MCP tools, in
// the client's tools/list and called with tools/call; actors/tools holds
// the tool sources (OpenAPI, upstream MCP, the demo to-do API) that
// code-mode code calls as tools.<source>.<op> inside an execution of the
// "code" pack's execute tool, which the client never lists. The pack
// "demo" here (echo, add, …) is not the source "demo" there (the to-do
// API). The tools/ directory at the repository root is build tooling.
package toolpacks
