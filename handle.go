package mcpgrain

import (
	"context"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// ErrUnknownHandle is the answer for a handle that does not exist, was
// dropped or expired, or belongs to another principal: one answer, so a
// client cannot probe for other principals' handles.
var ErrUnknownHandle = app.ErrUnknownHandle

// NewHandle mints a handle: an opaque string (128 random bits) naming a
// durable grain of its own, owned by the caller's principal. A tool
// returns it to its client, which passes it back as an argument of later
// calls: in the sessionless 2026-07-28 era, a handle is what keeps state
// between calls (MCP's replacement for sessions); a stateful session's
// tools may mint handles too. A handle lives until [DropHandle], or until
// it was not used for the node's --handle-ttl (30 days by default).
func NewHandle(ctx context.Context) (string, error) { return app.NewHandle(ctx) }

// OnHandle returns ctx bound to handle, so [State.Get], [State.Update] and
// the schedule calls ([ScheduleAt], [CancelSchedule], [Schedules]) made
// with it act on the handle rather than the session. The
// handle's grain may live on another node: OnHandle reads its states once
// (a request to its owner), Get reads that copy, and Update saves with a
// compare-and-set there — an Update that lost to another node's applies
// its function again to the stored value, so concurrent Updates lose
// nothing. A handle of another principal, an unknown, dropped or expired
// one is [ErrUnknownHandle].
func OnHandle(ctx context.Context, handle string) (context.Context, error) {
	return app.OnHandle(ctx, handle)
}

// DropHandle deletes handle and its state. An unknown or foreign handle,
// or one dropped already, is [ErrUnknownHandle].
func DropHandle(ctx context.Context, handle string) error { return app.DropHandle(ctx, handle) }

// ErrTooManyHandles is returned by [NewHandle] when the caller's principal
// has the node's --max-handles-per-principal live handles already (1000
// by default): nothing was minted; [DropHandle] (or an expiry) makes room.
var ErrTooManyHandles = app.ErrTooManyHandles

// ErrNoHandles is returned by the handle calls outside a request an
// mcpgrain node serves (a context that did not come from a handler).
var ErrNoHandles = app.ErrNoHandles

// HandleInfo describes one of the caller's live handles, as [Handles]
// lists it: its id, the tool whose call minted it, when it was minted,
// last used (opened or saved; an open is recorded at most once per
// thirtieth of --handle-ttl) and expires unless used before.
type HandleInfo = app.HandleInfo

// MaxListedHandles bounds what [Handles] returns: the most recently minted
// of the caller's handles (1000, the default --max-handles-per-principal).
const MaxListedHandles = app.MaxListedHandles

// Handles returns the caller's live handles, the most recently minted
// first: a tool can offer a client that lost its handle the ones it
// holds, or drop the ones it no longer needs. The caller is the principal
// of ctx's session or handle if it is bound to one, else the request's
// authenticated principal; another principal's handles are never listed.
// It reads the store's index of handles (any node answers, no handle is
// activated, and listing does not count as a use).
func Handles(ctx context.Context) ([]HandleInfo, error) { return app.ListHandles(ctx) }
