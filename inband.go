package mcpgrain

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/policy"
)

// InBand is what the caller's own client may do with a question in band
// ([InBandFor]): [InBandClosed], [InBandRefused] or [InBandOpen].
type InBand = app.InBand

// What the caller's own client may do with a question in band.
const (
	// InBandClosed: the question was not asked with
	// [Question.ClientMayDecide]: only the approval surfaces decide it.
	InBandClosed = app.InBandClosed
	// InBandRefused: the caller's role may not decide (--approvers): the
	// client is not asked, an answer of its is refused ([ErrMayNotDecide]).
	InBandRefused = app.InBandRefused
	// InBandOpen: the client may decide.
	InBandOpen = app.InBandOpen
)

// Approvers is who of an organization may decide a question (the node's
// --approvers): [ApproversMember] (admins and members, the default) or
// [ApproversAdmin] (admins only). A viewer never decides.
type Approvers = policy.Approvers

// The values of --approvers.
const (
	ApproversMember = policy.ApproversMember
	ApproversAdmin  = policy.ApproversAdmin
)

// InBandFor is the rule every in-band decision follows — [Ask]'s native
// elicitation, [DecideAsk], a 2026-07-28 retry's answer, and code mode's
// resume with an action — whether a caller with role may decide, in
// band, a question that lets its client decide (clientMayDecide) under
// approvers.
func InBandFor(clientMayDecide bool, role string, approvers Approvers) InBand {
	return app.InBandFor(clientMayDecide, role, approvers)
}

// Answer is a client's in-band answer to a pending question ([DecideAsk]):
// Accept (false declines), a decline's Reason, an accepted form's Input.
type Answer = app.Answer

// ErrMayNotDecide is returned by [DecideAsk] when the caller's role may
// not decide (--approvers; a viewer never): nothing was decided.
var ErrMayNotDecide = app.ErrMayNotDecide

// ErrClientMayNotDecide is returned by [DecideAsk] for a question not
// asked with [Question.ClientMayDecide]: only the approval surfaces
// decide it.
var ErrClientMayNotDecide = app.ErrClientMayNotDecide

// ErrAlreadyDecided is returned by [DecideAsk] for a question decided (or
// expired) already, with the status that holds the decision that stands.
var ErrAlreadyDecided = app.ErrAlreadyDecided

// ErrNoInput is returned by [DecideAsk] for an accept with [Answer.Input]
// of a code-mode execution's pause, which is a confirmation: nothing was
// decided.
var ErrNoInput = app.ErrNoInput

// DecideAsk decides pending question id ([AskLater]) in band, as the
// caller — the public form of code mode's resume with an action: the
// model relays its user's answer in a later tool call, of the session
// that asked or of another session of the same user. The question must
// have been asked with [Question.ClientMayDecide] ([ErrClientMayNotDecide]
// otherwise) and the caller's role must be one that may decide
// (--approvers; [ErrMayNotDecide] otherwise: a viewer never decides).
// The decision is routed to the session that owns the question (the
// execution directory names it; another user's question is
// [ErrForeignAsk], another organization's [ErrUnknownAsk]), which checks
// the role again and records it exactly as an approval surface's
// decision: once (a second decision, a surface's or an in-band one, is
// refused: [ErrAlreadyDecided]), durably, with the caller as
// [Decision.By]. The session's [AwaitAsk] wakes with it and [AskStatus]
// reads it from anywhere.
//
// id may also be a code-mode execution id (execute's executionId) of a
// pause of a stateful session of the same user ([AskStatus]): a code
// pause always lets its client decide, as code mode's own resume with an
// action does, under the same rule ([InBandFor]: a viewer never decides,
// [ErrMayNotDecide]); it is routed to the owning session grain (restored
// if it passivated) as an in-band decision, recorded there as an approval
// surface's decision of the pause, and the execution resumes as after an
// inbox or HTTP approval (a later resume by the model gets its outcome).
// A code pause is a confirmation: an accept with [Answer.Input] is
// refused and decides nothing.
func DecideAsk(ctx context.Context, req *mcp.CallToolRequest, id string, a Answer) (PendingStatus, error) {
	if req == nil {
		_, err := callOf(ctx, req)
		return PendingStatus{}, err
	}
	d, err := app.DeciderOf(ctx)
	if err != nil {
		return PendingStatus{}, err
	}
	return d.DecideAsk(ctx, id, a)
}
