package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Handles: server-minted handles (docs/sdk.md §2), the 2026-07-28 era's
// replacement for sessions. A handler mints one ([NewHandle]), returns it
// to the client, and gets it back as a tool argument; [OnHandle] binds a
// context to it so the state calls act on the handle's grain, which lives
// on whichever node owns it — not necessarily the node the request
// reached. The node binds its handle service to every request it hands a
// server ([WithHandles]); the service is the grain kind's (actors/handle).

// Handles is the node's handle service, as a request's context carries it.
type Handles interface {
	// Mint creates a handle owned by p and returns it, once stored.
	Mint(ctx context.Context, p *pb.Principal) (string, error)
	// Open returns the scope of handle for p: the handle's states as of
	// now. An unknown, dropped or expired handle, or one of another
	// principal, is [ErrUnknownHandle].
	Open(ctx context.Context, p *pb.Principal, handle string) (Scope, error)
	// Drop deletes handle (its state), as Open checks it.
	Drop(ctx context.Context, p *pb.Principal, handle string) error
	// List returns p's live handles, the most recently minted first, at
	// most [MaxListedHandles] of them.
	List(ctx context.Context, p *pb.Principal) ([]HandleInfo, error)
}

// HandleInfo describes one live handle, as [ListHandles] lists it.
type HandleInfo struct {
	// ID is the handle, as NewHandle returned it.
	ID string
	// Tool is the tool whose call minted it ("" if minted outside a
	// tools/call): what the handle is for.
	Tool string
	// Created is when it was minted.
	Created time.Time
	// LastUsed is when it was last opened or saved, at the resolution the
	// handle records it: a save always, an open at most once per
	// thirtieth of the idle TTL.
	LastUsed time.Time
	// Expires is when it is deleted unless used before: LastUsed plus the
	// node's idle TTL.
	Expires time.Time
}

// MaxListedHandles bounds what [ListHandles] returns: the default cap on
// a principal's live handles.
const MaxListedHandles = 1000

// ConditionalSaver is implemented by a [Scope] whose values several nodes
// may save at once (a handle's: a handler on any node may update it). Its
// [Scope.State] returns a value with its [Saved.Revision]; a save is a
// compare-and-set on that revision, and the SDK's Update applies its
// function again to the value a conflicting save stored.
type ConditionalSaver interface {
	// SaveStateIf stores s as the value named name if the stored value's
	// revision is still rev (0: none stored), and returns whether it did;
	// either way State returns the stored value afterwards. A fenced or
	// failed save returns an error wrapping [ErrRetry].
	SaveStateIf(ctx context.Context, name string, s Saved, rev uint64) (saved bool, err error)
}

// ErrUnknownHandle is the answer for a handle that does not exist, was
// dropped or expired, or belongs to another principal: one answer, so a
// caller cannot probe for other principals' handles.
var ErrUnknownHandle = errors.New("mcpgrain: unknown handle")

// ErrTooManyHandles is the answer of a mint by a principal that has the
// node's --max-handles-per-principal live handles already: nothing was
// created; dropping a handle (or its expiry) makes room.
var ErrTooManyHandles = errors.New("mcpgrain: too many live handles for this principal")

// ErrNoHandles is returned by the handle calls in a request the node did
// not bind to its handle service (a server the node did not build).
var ErrNoHandles = errors.New("mcpgrain: this request cannot reach handles (not served by an mcpgrain node)")

type handlesKey struct{}

// handlesCtx is a context bound to a handle service: the binding and the
// context in one object (context.WithValue would box the binding in a
// second; every request of a node's server is bound).
type handlesCtx struct {
	context.Context
	h Handles
	p *pb.Principal
}

// Value implements context.Context: the binding itself for handlesKey.
func (c *handlesCtx) Value(key any) any {
	if key == (handlesKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// WithHandles binds ctx to the node's handle service h, for a request of
// principal p (the caller when the request belongs to no scope).
func WithHandles(ctx context.Context, h Handles, p *pb.Principal) context.Context {
	return &handlesCtx{Context: ctx, h: h, p: p}
}

// handlesOf returns the service bound to ctx and the caller: the
// principal of ctx's scope if it has one (a session's, a handle's),
// otherwise the request's.
func handlesOf(ctx context.Context) (Handles, *pb.Principal, error) {
	b, ok := ctx.Value(handlesKey{}).(*handlesCtx)
	if !ok || b.h == nil {
		return nil, nil, ErrNoHandles
	}
	p := b.p
	if sc, err := ScopeOf(ctx); err == nil && sc.Principal() != nil {
		p = sc.Principal()
	}
	if p == nil {
		return nil, nil, fmt.Errorf("mcpgrain: the request has no principal: %w", ErrNoHandles)
	}
	return b.h, p, nil
}

// NewHandle mints a handle owned by the caller's principal and returns it
// once it is stored.
func NewHandle(ctx context.Context) (string, error) {
	h, p, err := handlesOf(ctx)
	if err != nil {
		return "", err
	}
	return h.Mint(ctx, p)
}

// OnHandle returns ctx bound to handle: the state calls made with it act on
// the handle. It reads the handle's states once (a request to the handle's
// owner); an Update brings them up to date where it conflicts.
func OnHandle(ctx context.Context, handle string) (context.Context, error) {
	h, p, err := handlesOf(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := h.Open(ctx, p, handle)
	if err != nil {
		return nil, err
	}
	return WithScope(ctx, sc), nil
}

// ListHandles returns the caller's live handles, the most recently minted
// first (at most [MaxListedHandles]); never another principal's.
func ListHandles(ctx context.Context) ([]HandleInfo, error) {
	h, p, err := handlesOf(ctx)
	if err != nil {
		return nil, err
	}
	return h.List(ctx, p)
}

// DropHandle deletes handle and its state. Dropping it again, or an
// unknown handle, is [ErrUnknownHandle].
func DropHandle(ctx context.Context, handle string) error {
	h, p, err := handlesOf(ctx)
	if err != nil {
		return err
	}
	return h.Drop(ctx, p, handle)
}
