// Package tools defines the tool sources that code-mode executions call.
//
// An agent's TypeScript calls tools.<source>.<name>(args). Each <source> is a
// [Source]: an OpenAPI document (package openapi), an upstream MCP server
// (package mcpupstream), or anything else that can look a tool up by name
// and call it. A [Registry] holds the sources of one catalog by name and
// resolves the dotted path "<source>.<name>" the sandbox hands it.
//
// Sources answer point lookups: [Source.Lookup] finds one tool by name
// without listing the catalog, so an OpenAPI document of 10,000 operations
// costs one map lookup per call, not a scan. Only [Source.Search] looks at
// many tools, over text the source precomputed, and it returns at most a
// caller-chosen number of them.
//
// Each [Tool] carries its source's approval default: RequiresApproval and
// the ApprovalText shown to the human (for OpenAPI, every method other than
// GET, HEAD and OPTIONS, with text "<METHOD> <pathTemplate>"; for MCP,
// every tool not marked readOnlyHint true, with text "Call upstream tool
// <name>": both fail closed, only reads run unasked). The execution engine
// combines the default with policies; this package does not pause anything
// itself. Idempotent marks tools that are safe to retry after a crash
// (OpenAPI GET/HEAD/OPTIONS, MCP readOnlyHint or idempotentHint).
//
// A source may be without its tools for a while (an upstream MCP server
// that was down when the node started and is connected in the background):
// it implements [Availability], and [Registry.Unavailable] tells code
// calling one of its tools why it is missing.
//
// [Declarations] renders the operations ([Registry.Operations]) as
// TypeScript declarations within a byte budget, for the execute tool's
// description; a source whose tools change at run time implements
// [ChangeNotifier], and [Registry.OnChange] hears of it so the description
// can be rendered again.
//
// Errors from [Registry.Call] and [Source.Call] are written to be shown to
// the calling code: they name the tool or the HTTP request, never the
// configured credentials, and they truncate response bodies (see
// [TruncateText]). An unknown source, tool or malformed path wraps
// [ErrUnknownTool].
//
// The context of a call carries its [Caller], the execution's owner
// ([WithCaller], [CallerFrom]), for sources that answer per organization.
//
// Three things in the repository are called "tools"; this package is the
// one code-mode code calls. A tool here is an operation of a source
// (tools.github.createIssue), reached only from inside an execution of the
// MCP tool "execute"; the MCP client never sees it in tools/list.
//   - actors/tools (this package, subpackages openapi, mcpupstream, demo):
//     the sources behind the sandbox's tools.<source>.<op> calls.
//   - actors/toolpacks: the MCP tools, resources and prompts a session's
//     client lists and calls (the packs "code", "demo", "conformance").
//     The "code" pack's execute and resume are the door to this package.
//   - tools/ at the repository root: build and test tooling (protobuf
//     generation, pinned Consul, Hydra, Prometheus, staticcheck), no MCP.
//
// Also distinct: the pack "demo" (echo, add, … as MCP tools) is not the
// source "demo" (subpackage demo, the to-do API code calls).
package tools
