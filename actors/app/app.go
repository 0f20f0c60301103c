// Package app is the runtime side of the public SDK (the module's root
// package, mcpgrain): what a handler of a program's own MCP server reaches
// through its request's context — the grain the request belongs to (a
// stateful session, or in the 2026-07-28 era a server-minted handle), and
// that grain's durable state, schedules and pauses.
//
// The node's runtimes bind every request they hand to the shared server to
// its grain ([WithScope]); the SDK's calls find it again ([ScopeOf]). The
// built-in packs use the same calls as a user's server: a lower layer
// cannot import the root package, so what the root package exports is
// implemented here and aliased there.
package app

import (
	"context"
	"errors"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Scope is the grain a handler's request belongs to. Its methods act on
// that grain, on the node that owns it (the handler runs there), and are
// safe for concurrent use.
type Scope interface {
	// Kind is "session" (a stateful MCP session) or "handle" (a
	// server-minted handle of the 2026-07-28 era).
	Kind() string
	// ID is the grain's id: the session id the client knows, or the
	// handle.
	ID() string
	// Principal owns the grain.
	Principal() *pb.Principal
	// State returns the saved value named name (ok false: never saved).
	// The returned bytes must not be modified.
	State(name string) (s Saved, ok bool)
	// SaveState stores the value named name in the grain's record, fenced
	// by the owner's epoch, and returns once it is stored: after
	// passivation, a restart or the loss of the node, the next activation
	// (on any node) has it. A fenced or failed save stores nothing and
	// returns an error wrapping [ErrRetry].
	SaveState(ctx context.Context, name string, s Saved) error
}

// Saved is one saved state value: its schema version and its encoding.
type Saved struct {
	Version int
	Value   []byte
	// Revision is the value's revision in a [ConditionalSaver] scope
	// (0 elsewhere).
	Revision uint64
}

// Kinds of [Scope].
const (
	KindSession = "session"
	KindHandle  = "handle"
)

// ErrNoScope is returned by an SDK call made outside a request bound to a
// grain: a request of a server the node did not build, a task's run, or a
// sessionless request without a handle.
var ErrNoScope = errors.New("mcpgrain: this request belongs to no session or handle")

// ErrRetry marks a failure the client should retry: the grain moved to
// another node (its save was fenced) or the store failed. The client's
// retry reaches the grain's new owner, which has every saved value.
var ErrRetry = errors.New("mcpgrain: the session moved or the store failed; retry the request")

type scopeKey struct{}

// WithScope binds ctx to s: the runtime calls it for every request it
// hands to a server's handlers.
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeOf returns the grain ctx is bound to, or [ErrNoScope].
func ScopeOf(ctx context.Context) (Scope, error) {
	if s, ok := ctx.Value(scopeKey{}).(Scope); ok && s != nil {
		return s, nil
	}
	return nil, ErrNoScope
}
