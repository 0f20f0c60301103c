package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// The engine's spans (docs/metrics.md, "Tracing"): the executor's engine
// span names and attributes where it has them. With tracing off every
// function here returns after one atomic load, allocating nothing
// (TestEngineTracingOffAllocatesNothing). No span carries the code, a
// tool's arguments or results, or an error message (which may quote
// them): only names, ids, counts and kinds.
const (
	// ExecuteSpan is one execute call: from the code's start to its
	// completion, failure or first pause.
	ExecuteSpan = "mcp.execute"
	// ResumeSpan is one decision of a paused execution, up to what
	// follows (the next pause or the end).
	ResumeSpan = "mcp.execute.resume"
	// DispatchSpan is one tools.* call of the code, in the node.
	DispatchSpan = "mcp.tool.dispatch"
	// ReplaySpan is a durable execution re-run from its journal to where it
	// waits (a dormant pause decided, or a pause restored on demand).
	ReplaySpan = "mcpgrain.execution.replay"
)

// The attributes of the engine's spans: the executor's, then mcpgrain's.
const (
	ModeKey            = attribute.Key("mcp.execute.mode")
	OutcomeKey         = attribute.Key("mcp.execute.outcome")
	PausedKey          = attribute.Key("mcp.execute.paused")
	PausedExecutionKey = attribute.Key("mcp.execute.paused_execution_id")
	ResumeReplayedKey  = attribute.Key("mcp.execute.resume.replayed")
	ResumeJoinedKey    = attribute.Key("mcp.execute.resume.joined_inflight")
	ExecutionKey       = attribute.Key("mcp.execution.id")
	DurableKey         = attribute.Key("mcpgrain.execution.durable")
	JournalReplayKey   = attribute.Key("mcpgrain.execution.journal_replay")
	ReplayedCallsKey   = attribute.Key("mcpgrain.execution.journal_calls")
	DecisionKey        = attribute.Key("mcpgrain.approval.outcome")
	PolicyKey          = attribute.Key("mcpgrain.policy.action")
	CallReplayedKey    = attribute.Key("mcpgrain.tool.replayed")
	errorTypeKey       = attribute.Key("error.type")
)

// Execute modes (ModeKey).
const (
	modePausable = "pausable"
	modeInline   = "inline"
)

// startExecute starts the span of an execute call in mode.
func (e *Engine) startExecute(ctx context.Context, mode string) (context.Context, trace.Span) {
	return tracing.Start(ctx, ExecuteSpan, trace.WithAttributes(ModeKey.String(mode),
		tracing.SessionKey.String(e.cfg.Session), DurableKey.Bool(e.cfg.Journal != nil)))
}

// endOutcome ends span with what the execution came to: the executor's
// outcome (ok, fail, paused), the pause's id, and for a failure its kind
// (error.type: syntax, runtime, timeout, limit, busy, or internal), never
// its message.
func endOutcome(span trace.Span, out Outcome) {
	switch out.Status {
	case StatusCompleted:
		span.SetAttributes(OutcomeKey.String("ok"), PausedKey.Bool(false))
	case StatusPaused:
		span.SetAttributes(OutcomeKey.String("paused"), PausedKey.Bool(true))
		if out.Pause != nil {
			span.SetAttributes(PausedExecutionKey.String(out.Pause.ID))
		}
	default:
		kind := out.ErrorKind
		if out.Status == StatusInternal || kind == "" {
			kind = string(StatusInternal)
		}
		span.SetAttributes(OutcomeKey.String("fail"), PausedKey.Bool(false), errorTypeKey.String(kind))
		span.SetStatus(codes.Error, "execution failed: "+kind)
	}
	span.End()
}

// How a Resume found its execution (the resume span's attributes).
type resumePath uint8

const (
	resumeDecided  resumePath = iota // the decision went to the paused code
	resumeReplayed                   // a settled outcome answered again
	resumeJoined                     // joined a decision being applied
	resumeWoken                      // a dormant pause re-run by replay, then decided
	resumeMissed                     // not found here
)

// endResume ends a resume span.
func endResume(span trace.Span, how resumePath, out Outcome, found bool) {
	span.SetAttributes(ResumeReplayedKey.Bool(how == resumeReplayed), ResumeJoinedKey.Bool(how == resumeJoined),
		JournalReplayKey.Bool(how == resumeWoken))
	if !found {
		span.SetAttributes(errorTypeKey.String("execution_not_found"))
		span.End()
		return
	}
	endOutcome(span, out)
}

// traceRun returns runCtx carrying ctx's span, so that the sandbox run and
// the tool calls under it are its children (runCtx derives from the
// engine's base, not from the caller's context, which the execution may
// outlive).
func traceRun(runCtx, ctx context.Context) context.Context {
	if !tracing.On() {
		return runCtx
	}
	if sp := trace.SpanFromContext(ctx); sp.SpanContext().IsValid() {
		return trace.ContextWithSpan(runCtx, sp)
	}
	return runCtx
}

// startDispatch starts the span of a tools.* call (tracing on only: the
// caller checks). Its attributes name the tool, never its arguments.
func startDispatch(ctx context.Context, path string) (context.Context, trace.Span) {
	return tracing.Start(ctx, DispatchSpan, trace.WithAttributes(tracing.ToolNameKey.String(path)))
}

// endDispatch ends a dispatch span: a failed call records error.type
// (tool_error), not the error's text.
func endDispatch(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(errorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "tool call failed")
	}
	span.End()
}

// noteCall adds kv to the dispatch span of ctx, if tracing is on.
func noteCall(ctx context.Context, kv attribute.KeyValue) {
	if tracing.On() {
		trace.SpanFromContext(ctx).SetAttributes(kv)
	}
}

// startReplay starts the span of a durable run's replay to its pause id.
func startReplay(ctx context.Context, id string, calls int) (context.Context, trace.Span) {
	return tracing.Start(ctx, ReplaySpan, trace.WithAttributes(ExecutionKey.String(id), ReplayedCallsKey.Int(calls)))
}
