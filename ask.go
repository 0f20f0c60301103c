package mcpgrain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// Question is what a human is asked by [Ask]: a summary (required),
// optional details, and an optional form (a JSON schema) whose values
// come back in [Decision.Input].
type Question = app.Question

// Decision is a human's answer to a [Question]: Accepted, the Reason of a
// decline ("approval_timeout" when the approval window lapsed), the user
// who decided (By) and the form's values (Input).
type Decision = app.Decision

// ErrNoCall is returned by [Ask] and [Step] outside a tool call of a
// stateful session, of a 2026-07-28 request or of a task (another
// method's handler, a schedule callback).
var ErrNoCall = app.ErrNoCall

// ErrDiverged is returned by [Step] when a handler run again reaches a
// step other than the one its journal recorded at that position.
var ErrDiverged = app.ErrDiverged

// StepKey returns the idempotency key of the [Step] whose function runs
// with ctx ("" elsewhere): the call's id, the step's position and its
// name, the same in every run of the durable call. A completed step runs
// once; a step interrupted between its function's effect and its journal
// write (the node lost, the session moved) runs again on the client's
// retry, with the same key: an effect that must be visible once
// deduplicates by it (docs/sdk.md §4).
func StepKey(ctx context.Context) string { return app.StepKeyOf(ctx) }

// callOf is the durable tool call req's handler runs. A continuation's
// run ([ContinueFunc]) has no request: there req is nil.
func callOf(ctx context.Context, req *mcp.CallToolRequest) (app.Call, error) {
	if req == nil {
		if c, err := app.CallOf(ctx); err == nil {
			if _, ok := c.(app.ContinuationCall); ok {
				return c, nil
			}
		}
		return nil, errors.New("mcpgrain: Ask and Step need the handler's *mcp.CallToolRequest")
	}
	return app.CallOf(ctx)
}

// Ask pauses the tool call until a human decides q, and returns the
// decision. The pause is an execution paused for approval like code
// mode's: it is listed and decided on every approval surface (the inbox
// and page, the HTTP API, gRPC, the CLI's approve), by a role that may
// decide (--approvers; a viewer never), within the approval window
// (--approval-window; then it is declined with Reason
// "approval_timeout"). While the handler waits, the session stays
// resident.
//
// The call becomes a durable execution (docs/sdk.md §4): the question is
// journaled before it is published, and if the handler's node is lost
// before the decision, the client's retry of the same call (same session,
// tool and arguments) runs the handler again from the start on the new
// owner, where each [Step] returns its journaled result and Ask the
// recorded decision (or waits for it). Work before Ask must be idempotent
// or wrapped in a Step. Ask fails with an error when the call is
// interrupted (the client went away, the session moved): the client's
// retry continues it.
//
// In the sessionless 2026-07-28 era the handler cannot wait: Ask
// publishes the question on the approval surfaces and returns an error
// (errors.Is(err, [ErrInputRequired])) that the handler returns as it is;
// the call's result is then input_required, asking the client for the
// "approval" (the form, or a confirmation) under a requestState that
// names the call. The client's retry runs the handler again against the
// journal, and Ask returns the decision taken first: an approval
// surface's, the window's decline, or the retry's answer if the caller's
// role may decide; without one it asks again. See docs/sdk.md §4.
func Ask(ctx context.Context, req *mcp.CallToolRequest, q Question) (Decision, error) {
	c, err := callOf(ctx, req)
	if err != nil {
		return Decision{}, err
	}
	return c.Ask(ctx, q)
}

// Step runs f once per tool call and journals its result (as JSON) in the
// store, fenced by the session's owner, before returning it: when the
// handler is run again for the same call (the client's retry after a
// node loss), Step returns the journaled result without calling f. Steps
// are matched by position and name: a handler must reach its steps in the
// same order (else [ErrDiverged]). An error of f is returned and not
// journaled: f runs again on the next run. What Step returns is always
// the decoded journal entry, on the first run too, so both runs see the
// same value. In a continuation ([ContinueFunc]) req is nil: its steps
// journal in the question's journal.
func Step[T any](ctx context.Context, req *mcp.CallToolRequest, name string, f func(context.Context) (T, error)) (T, error) {
	var out T
	c, err := callOf(ctx, req)
	if err != nil {
		return out, err
	}
	raw, err := c.Step(ctx, name, func(ctx context.Context) (json.RawMessage, error) {
		v, err := f(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("mcpgrain: step %q: encode its result: %w", name, err)
		}
		return b, nil
	})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("mcpgrain: step %q: decode its journaled result: %w", name, err)
	}
	return out, nil
}
