package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionlessEra is the first protocol version without server-initiated
// requests: from it on, a server asks for input with an input_required
// result (multi-round-trip requests, SEP-2322) instead of
// elicitation/create.
const sessionlessEra = "2026-07-28"

// ErrInputRequired marks the error [Elicit] returns in the 2026-07-28
// (sessionless) era: the answer comes with the client's retry of the tool
// call. The handler returns it (wrapped or not) as its error; the servers
// a node builds turn it into the call's input_required result
// ([InputRequiredMiddleware]), and the retry re-runs the handler, whose
// Elicit then returns the answer.
var ErrInputRequired = errors.New("mcpgrain: the tool call needs the client's input; return this error from the handler")

// ErrCannotElicit marks the error [Elicit] returns when the client can be
// asked in no way: it declared no form elicitation, and no fallback is
// bound to the request ([WithElicitFallback]).
var ErrCannotElicit = errors.New("mcpgrain: the client cannot be asked for input")

// InputRequiredError is the error [Elicit] returns in the 2026-07-28 era
// (errors.Is(err, ErrInputRequired)): the input requests of the call's
// input_required result and the requestState that result carries.
type InputRequiredError struct {
	// Requests are the result's input requests, by key.
	Requests mcp.InputRequestMap
	// State is the result's requestState: the answers of earlier rounds,
	// which the client's retry brings back.
	State string
}

// Error implements error.
func (e *InputRequiredError) Error() string {
	keys := make([]string, 0, len(e.Requests))
	for k := range e.Requests {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	return fmt.Sprintf("%v (input requests %s)", ErrInputRequired, strings.Join(keys, ", "))
}

// Is reports whether target is [ErrInputRequired].
func (e *InputRequiredError) Is(target error) bool { return target == ErrInputRequired }

// ElicitFallback asks for input on the client's behalf when the client can
// elicit in neither way (no form elicitation declared): the seam where a
// durable pause on the node's approval surfaces (the one Ask builds)
// answers instead of the client. It gets Elicit's key and the elicitation
// it would have sent.
type ElicitFallback func(ctx context.Context, req *mcp.CallToolRequest, key string, params *mcp.ElicitParams) (*mcp.ElicitResult, error)

type fallbackKey struct{}

// WithElicitFallback binds f to ctx: an [Elicit] of a request served with
// ctx calls f when the client cannot be asked. The runtime binds it, as it
// binds the request's [Scope].
func WithElicitFallback(ctx context.Context, f ElicitFallback) context.Context {
	return context.WithValue(ctx, fallbackKey{}, f)
}

// Elicit asks the client's user to fill in a form (message and the
// requested schema: a flat object of primitive properties) and returns the
// answer, in every protocol era:
//
//   - a stateful session (protocol before 2026-07-28) whose client
//     declared form elicitation: elicitation/create on the session, and the
//     client's answer;
//   - the 2026-07-28 era (no server-initiated requests): an
//     [*InputRequiredError] naming the form under key. The handler returns
//     it; the client answers and retries the call with the answer, which
//     re-runs the handler from the start, and this time Elicit returns
//     the answer. Work done before Elicit runs again on the retry, so it
//     must be idempotent. Several Elicit calls in one handler need
//     distinct keys; each retry brings back the answers of earlier rounds
//     (in the result's requestState, which Elicit owns).
//   - a client that can be asked in neither way: the fallback bound to
//     ctx ([WithElicitFallback]), else an error wrapping [ErrCannotElicit].
//
// An accepted answer is checked against schema. key names the form in the
// input requests and responses ("" is an error).
func Elicit(ctx context.Context, req *mcp.CallToolRequest, key, message string, schema *jsonschema.Schema) (*mcp.ElicitResult, error) {
	if key == "" {
		return nil, errors.New("mcpgrain: Elicit needs a key")
	}
	if req == nil || req.Params == nil {
		return nil, errors.New("mcpgrain: Elicit needs the tool call's request")
	}
	params := &mcp.ElicitParams{Message: message, RequestedSchema: schema}
	answers, err := answersOf(req.Params)
	if err != nil {
		return nil, err
	}
	if r, ok := answers[key]; ok {
		return checkAnswer(key, r, schema)
	}
	if err := canElicitForm(req.ClientCapabilities()); err != nil {
		if f, ok := ctx.Value(fallbackKey{}).(ElicitFallback); ok && f != nil {
			return f(ctx, req, key, params)
		}
		return nil, err
	}
	if !Sessionless(req) {
		r, err := req.Session.Elicit(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("mcpgrain: eliciting %q: %w", key, err)
		}
		return r, nil
	}
	state, err := encodeAnswers(answers)
	if err != nil {
		return nil, err
	}
	return nil, &InputRequiredError{Requests: mcp.InputRequestMap{key: params}, State: state}
}

// Sessionless reports whether req is served in the 2026-07-28 era: no
// session initialized at an older protocol version, so the server cannot
// send the client requests and asks with input_required results instead.
func Sessionless(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return true
	}
	p := req.Session.InitializeParams()
	return p == nil || p.ProtocolVersion >= sessionlessEra
}

// canElicitForm is nil when caps declare form elicitation (an empty
// elicitation capability is form elicitation), else an error wrapping
// [ErrCannotElicit] that says why.
func canElicitForm(caps *mcp.ClientCapabilities) error {
	switch {
	case caps == nil || caps.Elicitation == nil:
		return fmt.Errorf("%w: the client did not declare the elicitation capability", ErrCannotElicit)
	case caps.Elicitation.Form == nil && caps.Elicitation.URL != nil:
		return fmt.Errorf("%w: the client supports only URL elicitation, not forms", ErrCannotElicit)
	}
	return nil
}

// checkAnswer checks an answer from the client's retry: an elicitation
// result whose accepted content matches schema.
func checkAnswer(key string, r *mcp.ElicitResult, schema *jsonschema.Schema) (*mcp.ElicitResult, error) {
	switch r.Action {
	case "accept":
	case "decline", "cancel":
		return r, nil
	default:
		return nil, fmt.Errorf("mcpgrain: the answer to %q has the unknown action %q", key, r.Action)
	}
	if schema == nil {
		return r, nil
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("mcpgrain: the form %q: %w", key, err)
	}
	content := r.Content
	if content == nil {
		content = map[string]any{}
	}
	if err := resolved.Validate(content); err != nil {
		return nil, fmt.Errorf("mcpgrain: the answer to %q does not match its form: %w", key, err)
	}
	return r, nil
}
