// Package toolpacks builds the go-sdk MCP servers that mcpgrain sessions run,
// from the node's configured tool packs: named, built-in sets of tools,
// resources and prompts.
//
// The packs are:
//
//   - "demo": small, safe tools that make a node useful before real tool
//     sources exist: echo, add (structured output), now, count_to (progress
//     notifications) and ask_confirmation (elicitation).
//   - "conformance": the server fixture that the official MCP conformance
//     suite (@modelcontextprotocol/conformance) drives in its server
//     scenarios, ported from go-sdk's conformance everything-server with
//     every tool, resource, prompt and handler unchanged.
//
// Each MCP session gets its own server from [NewServer]; packs keep
// per-server state (the conformance pack's transient tools and its
// watched-resource updater), so servers are not shared between sessions.
// The closer NewServer returns stops the server's background goroutines and
// must be called when the session's runtime is released.
//
// Usage, validating a flag once and building a server per session:
//
//	packs := strings.Split(*toolPacks, ",")
//	if err := toolpacks.Validate(packs); err != nil {
//		return err // unknown tool pack "x" (known: demo, conformance)
//	}
//	...
//	server, closeServer, err := toolpacks.NewServer(
//		&mcp.Implementation{Name: "mcpgrain", Version: version},
//		packs, toolpacks.Options{Logger: logger})
//	if err != nil {
//		return err
//	}
//	defer closeServer()
//	session, err := server.Connect(ctx, transport, nil)
//
// Only the conformance pack sets server-level handlers (CompletionHandler,
// SubscribeHandler, UnsubscribeHandler). A handler set by two sources (two
// packs, or a pack and [Options].ServerOptions) is a conflict that NewServer
// reports as an error.
package toolpacks
