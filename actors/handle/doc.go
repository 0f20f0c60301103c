// Package handle hosts server-minted handles: the grain kind "handle",
// the 2026-07-28 era's replacement for sessions (docs/sdk.md §2,
// "Handles"). A handler mints a handle (mcpgrain.NewHandle), returns it
// to its client, and gets it back as a tool argument; mcpgrain.OnHandle
// binds the handler's context to it so mcpgrain.State acts on it.
//
// Each handle is a grain (Kind.CreatedByWrite): minting writes its record
// under a fresh random identity (128 bits) with a fenced store write, and
// a guessed or dropped identity costs no store row. The handler runs on
// whichever node received the request; the handle's scope (an app.Scope
// and app.ConditionalSaver) is a client of the grain, its calls grain
// requests to the handle's owner (local or remote): open (the principal
// check and a snapshot of the states, each with a revision), save-if (a
// compare-and-set by revision, whose conflict answer carries the stored
// value) and drop. So concurrent Updates of one handle from different
// nodes lose nothing, and a save of a stale activation (a frozen owner)
// is fenced by the store.
//
// A handle lives until it is dropped or was not used (opened or saved)
// for Config.IdleTTL: a reminder of the grain deletes it then
// ([Expiry] decides). An unknown, dropped, expired or foreign handle gets
// one answer, app.ErrUnknownHandle, so handles cannot be probed.
//
// Usage (a node): build a [Host] with the node's grain.Cluster, host its
// [Host.Kind], and add its [Host.Middleware] to every server the node
// builds; the SDK's calls then find the host through the request's
// context (app.WithHandles).
package handle
