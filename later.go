package mcpgrain

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// Pending is a question published by [AskLater]: its execution id (ID),
// its approval page (URL) and when its approval window lapses
// (Deadline).
type Pending = app.Pending

// PendingStatus is where a pending question stands ([AskStatus]): its
// State, the recorded Decision once decided or expired, the question's
// Summary and Details, and its Deadline.
type PendingStatus = app.PendingStatus

// AskState is a pending question's state: [AskWaiting], [AskDecided] or
// [AskExpired].
type AskState = app.AskState

// The states of a pending question.
const (
	// AskWaiting: no decision yet.
	AskWaiting = app.AskWaiting
	// AskDecided: a human accepted or declined it.
	AskDecided = app.AskDecided
	// AskExpired: the approval window lapsed first (its Decision is the
	// window's decline, Reason "approval_timeout").
	AskExpired = app.AskExpired
)

// ErrNoSessionCall is returned by [AskLater], [AskStatus] and [AwaitAsk]
// outside a tool call: of a stateful session, of a 2026-07-28 request, or
// a task's run. errors.Is it [ErrNoCall].
var ErrNoSessionCall = app.ErrNoSessionCall

// ErrUnknownAsk is returned by [AskStatus], [AwaitAsk], [DecideAsk] and
// [ContinueAsk] for an id that names no pending question of the caller's
// organization.
var ErrUnknownAsk = app.ErrUnknownAsk

// ErrForeignAsk is returned by [AskStatus], [AwaitAsk], [DecideAsk] and
// [ContinueAsk] for another user's pending question: only the user who
// asked reads (or continues) it.
var ErrForeignAsk = app.ErrForeignAsk

// ErrAwaitElsewhere is returned by [AwaitAsk] for an undecided question of
// another session of the caller, and in a 2026-07-28 request or a task's
// run for any undecided question (there is no session to wait in):
// [AskStatus] reads it from any tool call.
var ErrAwaitElsewhere = app.ErrAwaitElsewhere

// ErrTooManyPendingAsks is returned by [AskLater] when the caller's
// principal (user and organization) has --max-pending-asks-per-principal
// undecided questions asked with AskLater already (100 unless configured;
// 0: unlimited): nothing is published until one is decided or its
// approval window lapses. Other principals are not affected.
var ErrTooManyPendingAsks = app.ErrTooManyPendingAsks

// AskLater publishes q as [Ask] does — the same execution paused for
// approval on every approval surface (the inbox and page, the HTTP API,
// gRPC, the CLI's approve), decided by a role that may decide
// (--approvers), declined when the approval window lapses — but returns
// at once, so that the tool can answer now ("waiting for approval at
// URL") and a later tool call reads the decision with [AskStatus]. The
// question outlives the call: it is journaled and published in one
// transaction, it keeps nothing resident (the session may passivate),
// and it survives the loss of the session's node.
//
// AskLater is journaled as a step of the call (named
// "mcpgrain.ask_later", see [Step]): the client's retry of an
// interrupted call returns the same question instead of asking again. It
// works in tool calls of stateful sessions, of 2026-07-28 requests (the
// question is owned by the request's continuation grain, also on a ctx
// bound to a handle with [OnHandle]) and in a task's run (owned by the
// task grain; the task goes on and may complete with the question's id),
// [ErrNoSessionCall] elsewhere. A principal holds at most
// --max-pending-asks-per-principal undecided questions
// ([ErrTooManyPendingAsks] past it), in every era together.
func AskLater(ctx context.Context, req *mcp.CallToolRequest, q Question) (Pending, error) {
	l, err := laterOf(ctx, req)
	if err != nil {
		return Pending{}, err
	}
	return l.AskLater(ctx, q)
}

// AskStatus returns where pending question id ([Pending.ID]) stands:
// waiting, decided (the human's [Decision]) or expired (the window's
// decline, or its deadline passed with no decision recorded). It reads a
// question asked in this session or in any other tool call of the same
// user and organization — another session, a 2026-07-28 request, a
// task's run (the execution directory names its owner, whose journal
// holds the decision): another user's question is [ErrForeignAsk],
// another organization's [ErrUnknownAsk].
//
// id may also be a code-mode execution id (execute's executionId) of a
// pause of a stateful session of the same user: its status is read from
// what code mode stores already — the execution directory's row (its
// owner, a surface's decision and who took it) and the engine's journal
// (what the execution did with the pause: accepted, declined, the
// window's decline is expired) — with [PendingStatus.Summary] the
// approval prompt and [PendingStatus.Details] the call's "address" and
// "args". The same access rules hold; a pause no session holds (a
// 2026-07-28 request's, a task's) is [ErrUnknownAsk]. A read writes
// nothing.
func AskStatus(ctx context.Context, req *mcp.CallToolRequest, id string) (PendingStatus, error) {
	l, err := laterOf(ctx, req)
	if err != nil {
		return PendingStatus{}, err
	}
	return l.AskStatus(ctx, id)
}

// AwaitAsk waits until pending question id is decided or expired and
// returns its status, holding the tool call meanwhile as [Ask] does. It
// waits only in the session that asked: an undecided question of another
// session, and any undecided question in a 2026-07-28 request or a
// task's run (no session to wait in), is [ErrAwaitElsewhere] at once (a
// decided or expired one's status is returned from anywhere, as by
// [AskStatus]). A code-mode execution id ([AskStatus]) is read, not waited
// for: its status once decided or expired, else [ErrAwaitElsewhere] (code
// mode's engine, not the session's questions, holds the pause).
func AwaitAsk(ctx context.Context, req *mcp.CallToolRequest, id string) (PendingStatus, error) {
	l, err := laterOf(ctx, req)
	if err != nil {
		return PendingStatus{}, err
	}
	return l.AwaitAsk(ctx, id)
}

// laterOf is the tool call req's handler runs, if it can ask without
// waiting.
func laterOf(ctx context.Context, req *mcp.CallToolRequest) (app.Later, error) {
	if req == nil {
		_, err := callOf(ctx, req)
		return nil, err
	}
	return app.LaterOf(ctx)
}
