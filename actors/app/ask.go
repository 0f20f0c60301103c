package app

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/jsonschema-go/jsonschema"
)

// Question is what a human is asked from a tool handler ([Call.Ask]): a
// summary, optional details, and an optional form (a JSON schema) whose
// values come back with the decision.
type Question struct {
	// Summary is the one line an approver sees first (required).
	Summary string
	// Details are shown with it (the approval surfaces' arguments).
	Details map[string]any
	// Form, if not nil, asks for input: the approver's accepted content
	// is returned in [Decision.Input].
	Form *jsonschema.Schema
	// ClientMayDecide lets the caller's own client decide the question in
	// band, beside the approval surfaces, if the caller's role may decide
	// (--approvers; [InBandFor]): in a stateful session the blocking Ask
	// also asks the client with a native elicitation, and a pending
	// question ([Later.AskLater]) may be decided by a later call of the
	// same user ([Decider.DecideAsk]). In the 2026-07-28 era and in tasks
	// the client is asked by the call's input_required round, and its
	// answer decides under the same role rule, whatever this says.
	ClientMayDecide bool
	// Continuation names the server's continuation ([Handlers.Continuations])
	// that a later call of the asker runs on the question's owner once it
	// is decided ([Continuer.ContinueAsk]). Only [Later.AskLater] uses it;
	// a session checks the name when asking ([ErrUnknownContinuation]); a
	// question asked in a 2026-07-28 request or a task's run keeps it but
	// is never continued ([ErrContinueNeedsSession]). "": none.
	Continuation string
}

// Decision is a human's answer to a [Question] (or the approval window's
// decline: Accepted false, Reason "approval_timeout", By "").
type Decision struct {
	// Accepted is true if the approver accepted.
	Accepted bool
	// Reason is why it was declined, if the approver said (or
	// "approval_timeout").
	Reason string
	// By is the user who decided.
	By string
	// Input is the form's values (nil without a Form).
	Input map[string]any
}

// Call is a tool call of a program's own server that can become a durable
// execution: the runtime binds one to the context of every tools/call it
// hands to the shared server's handlers of a session or of a continuation
// grain ([WithCall]).
type Call interface {
	// Step returns the journaled result of the call's next step, which
	// must be named name; the first time the call gets there it runs f
	// and journals its result (fenced by the owning grain's epoch) before
	// returning it. An error of f is returned and not journaled (f runs
	// again when the handler is run again).
	Step(ctx context.Context, name string, f func(context.Context) (json.RawMessage, error)) (json.RawMessage, error)
	// Ask pauses the call until a human decides its next question (or
	// returns the recorded decision if it was decided already).
	Ask(ctx context.Context, q Question) (Decision, error)
}

// ErrNoCall is returned by Step and Ask outside a tool call of a
// session, a continuation grain or a task (another method's handler, a
// schedule callback).
var ErrNoCall = errors.New("mcpgrain: Step and Ask need a tool call of a session or of a 2026-07-28 request")

// ErrDiverged is returned when a handler run again asks for a different
// step than its journal recorded at that position: the handler is not
// deterministic up to its steps (docs/sdk.md §4).
var ErrDiverged = errors.New("mcpgrain: the tool call's steps differ from its journal")

type callKey struct{}

// WithCall binds ctx to the tool call c.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallOf returns the tool call ctx is bound to, or [ErrNoCall].
func CallOf(ctx context.Context) (Call, error) {
	if c, ok := ctx.Value(callKey{}).(Call); ok && c != nil {
		return c, nil
	}
	return nil, ErrNoCall
}

type stepKey struct{}

// WithStepKey binds ctx, the context a Step's function runs with, to the
// step's idempotency key.
func WithStepKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, stepKey{}, key)
}

// StepKeyOf returns the idempotency key ctx is bound to ("" outside a
// Step's function).
func StepKeyOf(ctx context.Context) string {
	k, _ := ctx.Value(stepKey{}).(string)
	return k
}
