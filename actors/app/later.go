package app

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pending is a question published by [Later.AskLater]: the tool call that
// asked it has returned, and the question waits on the approval surfaces
// for a decision that a later call reads ([Later.AskStatus]).
type Pending struct {
	// ID is the question's execution id: what the approval surfaces list,
	// and what AskStatus takes.
	ID string
	// URL is the question's approval page (the browser mode's approval
	// URL of code mode's user_approval_required).
	URL string
	// Deadline is when the approval window lapses: then it is declined
	// ("approval_timeout").
	Deadline time.Time
}

// AskState is where a pending question stands.
type AskState string

// The states of a pending question ([PendingStatus.State]).
const (
	// AskWaiting: no decision yet, within the approval window.
	AskWaiting AskState = "pending"
	// AskDecided: a human accepted or declined it ([PendingStatus.Decision]).
	AskDecided AskState = "decided"
	// AskExpired: the approval window lapsed first (the decision is the
	// window's decline: Reason "approval_timeout", By "").
	AskExpired AskState = "expired"
)

// PendingStatus is what a pending question came to.
type PendingStatus struct {
	// ID is the question's execution id.
	ID string
	// State is pending, decided or expired.
	State AskState
	// Decision is the recorded decision (decided, expired; zero while
	// pending).
	Decision Decision
	// Summary and Details are the question's, as it was asked.
	Summary string
	Details map[string]any
	// Deadline is when its approval window lapses (or lapsed).
	Deadline time.Time
}

// Later is implemented by a [Call] that can publish a question without
// waiting for its decision: the tool call of a stateful session, of a
// 2026-07-28 request (its continuation grain owns the question) and a
// task's run (its task grain owns it).
type Later interface {
	// AskLater publishes q on the approval surfaces and returns at once;
	// it is journaled as a step of the call, so a run of the call again
	// returns the same question.
	AskLater(ctx context.Context, q Question) (Pending, error)
	// AskStatus returns where question id stands: one of the caller's
	// pending questions, asked in this call's session or in another tool
	// call of the same principal (any session, 2026-07-28 request or
	// task), or a code-mode execution's pause of a session of the same
	// principal.
	AskStatus(ctx context.Context, id string) (PendingStatus, error)
	// AwaitAsk waits until question id, one of the session's own, is
	// decided or expired, and returns its status (elsewhere: a decided or
	// expired question's status, else ErrAwaitElsewhere).
	AwaitAsk(ctx context.Context, id string) (PendingStatus, error)
}

// ErrNoSessionCall is returned by AskLater, AskStatus and AwaitAsk
// outside a tool call (of a stateful session, a 2026-07-28 request or a
// task's run; errors.Is it [ErrNoCall]).
var ErrNoSessionCall = fmt.Errorf("%w: AskLater, AskStatus and AwaitAsk need a tool call (of a session, a 2026-07-28 request or a task)", ErrNoCall)

// ErrUnknownAsk is returned by AskStatus and AwaitAsk for an id that
// names no pending question of the caller's organization (unknown,
// pruned, another organization's, or a question a handler waits for
// with Ask).
var ErrUnknownAsk = errors.New("mcpgrain: no pending question with this id")

// ErrForeignAsk is returned by AskStatus and AwaitAsk for a pending
// question of another user of the caller's organization: only the user
// who asked reads it (approvers decide it on the approval surfaces).
var ErrForeignAsk = errors.New("mcpgrain: the pending question is another user's")

// ErrAwaitElsewhere is returned by AwaitAsk for an undecided question of
// another session of the caller, and for any undecided question in a
// 2026-07-28 request or a task's run (no session there to wait in): only
// the session that asked waits for it (AskStatus reads it from anywhere).
var ErrAwaitElsewhere = errors.New("mcpgrain: the pending question belongs to another session: read it with AskStatus")

// ErrTooManyPendingAsks is returned by AskLater when the caller's
// principal (user and organization) has the node's
// --max-pending-asks-per-principal undecided questions already: nothing
// was published. A decision, or the lapse of a question's approval
// window, frees a slot.
var ErrTooManyPendingAsks = errors.New("mcpgrain: too many pending questions for this principal")

// LaterOf returns ctx's tool call if it can ask without waiting, or
// [ErrNoSessionCall].
func LaterOf(ctx context.Context) (Later, error) {
	c, err := CallOf(ctx)
	if err != nil {
		return nil, ErrNoSessionCall
	}
	l, ok := c.(Later)
	if !ok {
		return nil, ErrNoSessionCall
	}
	return l, nil
}
