package mcpgrain

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// Elicit asks the client's user to fill in a form and returns the answer
// (accept with the form's content, decline or cancel), in both protocol
// eras. message is what the user reads; schema is the form, a flat object
// of primitive properties (an accepted answer is checked against it); key
// names this form among the call's questions and must not be empty.
//
//   - In a stateful session whose client declared form elicitation, Elicit
//     sends elicitation/create and waits for the answer.
//   - In the 2026-07-28 (sessionless) era a server cannot send requests:
//     Elicit returns an error wrapping [ErrInputRequired], which the
//     handler returns (as it returns any error); the node turns it into the
//     call's input_required result. The client answers and retries the
//     call, which runs the handler again from the start, and this time
//     Elicit returns the answer. Whatever the handler does before Elicit
//     is done again on the retry, so it must be idempotent. Each Elicit in
//     a handler needs its own key; a retry brings the answers of the
//     earlier rounds back (in the result's requestState, which Elicit
//     owns: a handler that calls Elicit sets no RequestState of its own).
//   - A client that declared no form elicitation gets an error wrapping
//     [ErrCannotElicit] (a durable pause on the node's approval surfaces,
//     as Ask makes, is the planned fallback: docs/sdk.md).
//
// Why a key and an error: in 2026-07-28 the answer arrives in another
// request, matched to its question by key, and the handler has to stop
// where the question is asked; returning the error is how a Go handler
// stops, and it keeps the handler's code the same in both eras.
func Elicit(ctx context.Context, req *mcp.CallToolRequest, key, message string, schema *jsonschema.Schema) (*mcp.ElicitResult, error) {
	return app.Elicit(ctx, req, key, message, schema)
}

// ErrInputRequired marks the error [Elicit] returns in the 2026-07-28 era:
// return it from the handler; the client's retry brings the answer.
var ErrInputRequired = app.ErrInputRequired

// ErrCannotElicit marks the error [Elicit] returns when the client cannot
// be asked (it declared no form elicitation).
var ErrCannotElicit = app.ErrCannotElicit

// InputRequiredError is the error [Elicit] returns in the 2026-07-28 era:
// the input requests and requestState of the call's input_required result.
type InputRequiredError = app.InputRequiredError

// InputRequiredMiddleware turns a tool handler's [ErrInputRequired] into
// the call's input_required result. Every server a node builds has it;
// add it (mcp.Server.AddReceivingMiddleware) only to serve your handlers
// on a go-sdk server of your own, such as in a unit test.
func InputRequiredMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return app.InputRequiredMiddleware(next)
}
