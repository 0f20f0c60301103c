// Package conformance is the built-in "conformance" pack: the server
// side of the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in tools/conformance): the
// tools, resources and prompts its server scenarios call by name, each
// answering as the scenario's requirements say. It is written from those
// requirements (each scenario's description in the suite) and from the
// specification, not from another project's fixture.
//
// The pack lives on servers that many sessions share (a node runs one
// server for all its stateful sessions; see actors/mcpruntime). So nothing
// a session does is kept on the server: what the fixture remembers of a
// session (its resource subscriptions) is keyed by the request's
// *mcp.ServerSession and dropped when that session ends
// ([conformanceFixture.sessions]), and go-sdk keeps each session's log
// level and negotiated version on the session itself. What is the server's
// is done once per server: the watched resource changes on one timer for
// all its subscribers, armed only while someone subscribes.
//
// The files, by concept:
//
//   - conformance.go: the fixture, its Setup, the test media.
//   - sessions.go: per-session state.
//   - tools.go: tools that answer by themselves (content types,
//     errors, logging, progress, schemas, headers, stream closing,
//     list changes).
//   - client.go: tools that need the client (sampling,
//     elicitation) and the capability check they share.
//   - input_required.go: the 2026-07-28 multi-round-trip
//     (input_required) tools and prompt, and their requestState.
//   - resources.go: resources, the template, subscriptions and
//     the watched resource.
//   - prompts.go: prompts and completion.
//   - tasks.go: the tasks extension's tools (greet,
//     slow_compute, failing_job, protocol_error_job, confirm_delete,
//     multi_input, test_tool_with_task); which of them run as tasks is
//     the node's table (toolpacks.TaskSupport).
//
// It is written as a user's server is, on the public API only: go-sdk,
// and the SDK's pack mechanism and handler calls (app.Pack's Setup with
// its Env and Handlers, app.Clock, Elicit), the implementation the root
// package mcpgrain exports. The package imports nothing of mcpgrain but
// actors/app, the SDK's runtime side, and only names the root package
// re-exports; internal/layers (TestConformanceIsWrittenOnThePublicAPI)
// keeps it so.
package conformance
