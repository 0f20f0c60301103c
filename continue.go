package mcpgrain

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// Continuation is what a registered continuation ([ContinueFunc],
// [Server].Continuations) gets when [ContinueAsk] runs it: the question
// (ID, Name, Summary, Details), its State ([AskDecided] or [AskExpired])
// and recorded Decision, the caller's Input (JSON) and the Caller.
type Continuation = app.Continuation

// ContinueFunc is a registered continuation ([Server].Continuations). It
// runs on the session that owns the question — its ctx bound to that
// session ([State], [ScheduleAt] act on it) and to the question's durable
// call ([Step] journals there, [StepKey] works) — once: its result is
// recorded and answered to every later [ContinueAsk]. An error (or a
// panic) records nothing, and the next ContinueAsk runs it again (its
// completed Steps replay). [Ask] in it is [ErrNoCall].
type ContinueFunc = app.ContinueFunc

// ErrAskPending is returned by [ContinueAsk] for a question with no
// recorded decision yet: nothing ran. (The approval window's decline
// counts: the owning session records it at the deadline.)
var ErrAskPending = app.ErrAskPending

// ErrNoContinuation is returned by [ContinueAsk] for a question asked
// without [Question].Continuation.
var ErrNoContinuation = app.ErrNoContinuation

// ErrUnknownContinuation is returned by [AskLater] for a
// [Question].Continuation the server does not register, and by
// [ContinueAsk] when the owner's server does not (any more).
var ErrUnknownContinuation = app.ErrUnknownContinuation

// ErrContinuationFailed wraps a continuation's error (or panic): nothing
// was recorded, and [ContinueAsk] can run it again.
var ErrContinuationFailed = app.ErrContinuationFailed

// ErrContinueNeedsSession is returned by [ContinueAsk] for a question
// asked in a 2026-07-28 request or a task's run: its owner is a grain
// that runs no continuations (read it with [AskStatus] instead).
var ErrContinueNeedsSession = app.ErrContinueNeedsSession

// ContinueAsk continues pending question id ([AskLater], asked with
// [Question].Continuation) once it is decided: the call is routed to the
// session that owns the question — this one, or another session of the
// same user (the execution directory names it; another user's question is
// [ErrForeignAsk], another organization's [ErrUnknownAsk]) — which runs
// the named continuation there with the decision and input (any JSON
// value, at most 16 KiB; nil is null) and returns its result. It runs
// once: its result is recorded in the question's journal, fenced by the
// owner, and every later ContinueAsk — a retry, a second caller, after
// kill -9 of the owner — gets that result without running it again (the
// input of later calls is not used). An undecided question is
// [ErrAskPending]; a continuation that fails is [ErrContinuationFailed]
// (nothing recorded). It works in tool calls of stateful sessions
// ([ErrNoSessionCall] elsewhere), for questions asked in stateful
// sessions ([ErrContinueNeedsSession] for a 2026-07-28 request's or a
// task's), and waits at most 50 seconds for the
// owner (then a retryable error: the run goes on there and is recorded).
func ContinueAsk(ctx context.Context, req *mcp.CallToolRequest, id string, input any) (*mcp.CallToolResult, error) {
	if req == nil {
		_, err := callOf(ctx, req)
		return nil, err
	}
	k, err := app.ContinuerOf(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := app.ContinueInput(input)
	if err != nil {
		return nil, err
	}
	return k.ContinueAsk(ctx, id, raw)
}
