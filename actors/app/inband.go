package app

import (
	"context"
	"errors"

	"github.com/mcpgrain/mcpgrain/actors/policy"
)

// In-band decisions: a question decided by the caller's own client in a
// tool call — a native elicitation's answer, a later call's DecideAsk, a
// 2026-07-28 retry's answer, code mode's resume with an action — instead
// of on an approval surface. Every one of them follows [InBandFor], and
// the grain that owns the question checks it again when it records the
// decision (a surface that skipped the check is refused there too).

// InBand is what the caller's own client may do with a question in band.
type InBand int

const (
	// InBandClosed: the question does not let the client decide (it was
	// not asked with [Question.ClientMayDecide]); only the approval
	// surfaces decide it.
	InBandClosed InBand = iota
	// InBandRefused: the question lets the client decide, but the
	// caller's role may not decide (--approvers: a viewer never; a member
	// not under "admin"). The client is not asked; an answer it gives is
	// refused ([ErrMayNotDecide]) and the question keeps waiting for an
	// approver.
	InBandRefused
	// InBandOpen: the client may decide; the first decision recorded
	// stands (a surface's, the window's decline, or the client's).
	InBandOpen
)

// InBandFor is the one rule of every in-band decision: whether a caller
// with role may decide, in band, a question that lets its client decide
// (clientMayDecide) under the node's approvers (--approvers). It is pure:
// the same answer in every era and for code mode's pauses (which always
// let the client decide).
func InBandFor(clientMayDecide bool, role string, approvers policy.Approvers) InBand {
	switch {
	case !clientMayDecide:
		return InBandClosed
	case !approvers.MayDecide(role):
		return InBandRefused
	}
	return InBandOpen
}

// Answer is a client's in-band answer to a pending question
// ([Decider.DecideAsk]).
type Answer struct {
	// Accept accepts the question; false declines it.
	Accept bool
	// Reason is why it was declined (optional; at most 1,000 bytes are
	// kept).
	Reason string
	// Input is the form's values of an accepted question asked with a
	// Form (checked against it).
	Input map[string]any
}

// Decider is implemented by a [Call] that can decide a pending question
// in band: the tool call of a stateful session.
type Decider interface {
	// DecideAsk decides pending question id as the caller, on the session
	// that owns it, and returns its status with the decision that stands
	// (a code-mode execution's pause of a session of the caller's user
	// too).
	DecideAsk(ctx context.Context, id string, a Answer) (PendingStatus, error)
}

// ErrMayNotDecide is returned by an in-band decision of a caller whose
// role may not decide (--approvers): nothing was decided, and the
// question keeps waiting for an approver.
var ErrMayNotDecide = errors.New("mcpgrain: your role may not decide this question (--approvers): an approver decides it on an approval surface")

// ErrClientMayNotDecide is returned by an in-band decision of a question
// not asked with [Question.ClientMayDecide]: only the approval surfaces
// decide it.
var ErrClientMayNotDecide = errors.New("mcpgrain: this question is decided on the approval surfaces only (it was not asked with ClientMayDecide)")

// ErrAlreadyDecided is returned by an in-band decision of a question
// decided (or expired) already: the status returned with it holds the
// decision that stands.
var ErrAlreadyDecided = errors.New("mcpgrain: the question was decided already")

// ErrNoInput is returned by an in-band decision that accepts with input a
// pause that takes none (a code-mode execution's approval is a
// confirmation): nothing was decided.
var ErrNoInput = errors.New("mcpgrain: this pause takes no input (a code-mode execution's approval is a confirmation): accept or decline it")

// DeciderOf returns ctx's tool call if it can decide a pending question
// in band, or [ErrNoSessionCall].
func DeciderOf(ctx context.Context) (Decider, error) {
	c, err := CallOf(ctx)
	if err != nil {
		return nil, ErrNoSessionCall
	}
	d, ok := c.(Decider)
	if !ok {
		return nil, ErrNoSessionCall
	}
	return d, nil
}
