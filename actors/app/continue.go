package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Continuations (docs/sdk.md §4, "Continuing on the owner"): a function a
// server registers by name ([Handlers.Continuations]) and a pending
// question names when it is asked ([Question.Continuation]). A later tool
// call of the same user, in any session, continues the decided question
// ([Continuer.ContinueAsk]): the call is routed to the session that owns
// the question, which runs the function there once — with the decision,
// bound to that session's scope — records its result in the question's
// journal, and answers it to every caller from then on.

// MaxContinueInput bounds the input a caller hands a continuation, in
// bytes of JSON.
const MaxContinueInput = 16 << 10

// Continuation is what a registered continuation gets: the question it
// continues, its decision, and the caller's input.
type Continuation struct {
	// ID is the question's execution id ([Pending.ID]).
	ID string
	// Name is the continuation's name ([Question.Continuation]).
	Name string
	// Summary and Details are the question's, as it was asked.
	Summary string
	Details map[string]any
	// State is [AskDecided] or [AskExpired] (the window's decline).
	State AskState
	// Decision is the recorded decision.
	Decision Decision
	// Input is the JSON the continuing call passed (null: none). A
	// continuation that completed keeps the result of the input it ran
	// with: later callers' input is not seen.
	Input json.RawMessage
	// Caller is the user whose call runs it (the question's asker: only
	// the user who asked continues a question).
	Caller string
}

// ContinueFunc is a registered continuation. Its ctx is bound to the
// owning session's scope (State, schedules) and to the continuation's own
// durable call: [Step] journals in the question's journal, so a run again
// (after an error, or the loss of the owner mid-run) replays the
// completed steps. Its result is recorded and returned to every caller;
// an error (or a panic) records nothing: the next ContinueAsk runs it
// again.
type ContinueFunc func(ctx context.Context, c Continuation) (*mcp.CallToolResult, error)

// Continuer is implemented by a [Call] that can continue a pending
// question on its owner: the tool call of a stateful session.
type Continuer interface {
	// ContinueAsk runs the continuation of decided question id on the
	// session that owns it (once: its recorded result after that) and
	// returns its result.
	ContinueAsk(ctx context.Context, id string, input json.RawMessage) (*mcp.CallToolResult, error)
}

// ErrAskPending is returned by ContinueAsk for a question with no
// recorded decision yet (a surface's, an in-band one, or the window's
// decline that the owner records at the deadline): nothing ran.
var ErrAskPending = errors.New("mcpgrain: the question is not decided yet: nothing to continue")

// ErrNoContinuation is returned by ContinueAsk for a question asked
// without [Question.Continuation].
var ErrNoContinuation = errors.New("mcpgrain: the question was asked without a Continuation")

// ErrUnknownContinuation is returned by AskLater for a
// [Question.Continuation] the server does not register, and by
// ContinueAsk when the owner's server does not (any more).
var ErrUnknownContinuation = errors.New("mcpgrain: no continuation with this name is registered on the server")

// ErrContinuationFailed wraps the error (or panic) of a continuation's
// run: nothing was recorded, and the question can be continued again.
var ErrContinuationFailed = errors.New("mcpgrain: the continuation failed")

// ErrContinueNeedsSession is returned by ContinueAsk for a question asked
// outside a stateful session (in a 2026-07-28 request or a task's run):
// its owner is a continuation or task grain, which runs no
// continuations (read it with AskStatus and act in the calling handler).
var ErrContinueNeedsSession = errors.New("mcpgrain: the question's continuation runs only on a stateful session: it was asked in a 2026-07-28 request or a task (read it with AskStatus)")

// ContinuationCall is the [Call] a continuation runs with: it has no
// tool call's request (the root's Step takes a nil one there).
type ContinuationCall interface {
	Call
	// ContinuationRun marks the call as a continuation's run.
	ContinuationRun()
}

// ContinuerOf returns ctx's tool call if it can continue a pending
// question, or [ErrNoSessionCall].
func ContinuerOf(ctx context.Context) (Continuer, error) {
	c, err := CallOf(ctx)
	if err != nil {
		return nil, ErrNoSessionCall
	}
	k, ok := c.(Continuer)
	if !ok {
		return nil, ErrNoSessionCall
	}
	return k, nil
}

// ContinueInput is input as the JSON a continuation gets: null for nil, a
// json.RawMessage as it is, anything else marshalled; at most
// [MaxContinueInput] bytes.
func ContinueInput(input any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch v := input.(type) {
	case nil:
		raw = json.RawMessage("null")
	case json.RawMessage:
		raw = v
	default:
		b, err := json.Marshal(input)
		if err != nil {
			return nil, fmt.Errorf("mcpgrain: encode the continuation's input: %w", err)
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, errors.New("mcpgrain: the continuation's input is not JSON")
	}
	if len(raw) > MaxContinueInput {
		return nil, fmt.Errorf("mcpgrain: continuation input of %d bytes: at most %d", len(raw), MaxContinueInput)
	}
	return raw, nil
}

// continuations holds the continuations of the live servers
// ([BindContinuations]).
var continuations sync.Map // *mcp.Server -> map[string]ContinueFunc

// BindContinuations records the continuations of the packs on s (what
// toolpacks.NewServer does for the server it builds), until unbind.
func BindContinuations(s *mcp.Server, fs map[string]ContinueFunc) (unbind func()) {
	if len(fs) == 0 {
		return func() {}
	}
	continuations.Store(s, fs)
	return func() { continuations.Delete(s) }
}

// ContinuationsOf returns the continuations bound to s, by name (nil:
// none). The caller must not modify the map.
func ContinuationsOf(s *mcp.Server) map[string]ContinueFunc {
	v, ok := continuations.Load(s)
	if !ok {
		return nil
	}
	return v.(map[string]ContinueFunc)
}
