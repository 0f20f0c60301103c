package codemode

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// The executor's host tool spans (docs/metrics.md, "Tracing"). Its
// mcp.host.tool.execute and mcp.host.tool.resume are the tools' own
// execute_tool spans here (mcpruntime.TraceTools, per the gen-ai
// conventions), which a pause annotates as the executor annotates its
// own; the browser-mode wait for a decision and its user_approval_required
// answer have the executor's spans.
const (
	// BrowserApprovalSpan is a browser-mode resume waiting for the user's
	// decision on an approval surface (up to the approval window).
	BrowserApprovalSpan = "mcp.host.tool.resume.browser_approval"
	// BrowserApprovalStartSpan marks the wait's start at once: a span is
	// exported when it ends, the wait's only after minutes.
	BrowserApprovalStartSpan = BrowserApprovalSpan + ".start"
	// UserApprovalRequiredSpan is a browser-mode resume that found no
	// decision: it answers user_approval_required again.
	UserApprovalRequiredSpan = "mcp.host.tool.resume.user_approval_required"
)

// The executor's attributes of the tool spans.
const (
	PausedKey          = engine.PausedKey
	PausedExecutionKey = engine.PausedExecutionKey
	// PauseSourceKey is where the pause a tool answered with came from:
	// execute, resume (a decision that led to a further pause) or
	// browser_resume (the same after a browser-mode wait).
	PauseSourceKey = attribute.Key("mcp.execute.pause_source")
	executionKey   = attribute.Key("mcp.execution.id")
	decidedKey     = attribute.Key("mcpgrain.approval.decided")
)

// The pause sources (PauseSourceKey).
const (
	sourceExecute       = "execute"
	sourceResume        = "resume"
	sourceBrowserResume = "browser_resume"
)

// tracePause annotates ctx's span (the tool's execute_tool span) with the
// pause out answered, as the executor annotates its host tool span.
func tracePause(ctx context.Context, out engine.Outcome, source string) {
	if !tracing.On() || out.Status != engine.StatusPaused || out.Pause == nil {
		return
	}
	trace.SpanFromContext(ctx).SetAttributes(PausedKey.Bool(true),
		PausedExecutionKey.String(out.Pause.ID), PauseSourceKey.String(source))
}

// startBrowserWait starts the span of a browser-mode resume's wait for
// execution id's decision, after the instant start marker; end records
// whether a decision came.
func startBrowserWait(ctx context.Context, id string) (end func(decided bool)) {
	if !tracing.On() {
		return func(bool) {}
	}
	attrs := trace.WithAttributes(executionKey.String(id))
	_, mark := tracing.Start(ctx, BrowserApprovalStartSpan, attrs)
	mark.End()
	_, span := tracing.Start(ctx, BrowserApprovalSpan, attrs)
	return func(decided bool) {
		span.SetAttributes(decidedKey.Bool(decided))
		span.End()
	}
}

// traceUserApprovalRequired records a browser-mode resume's answer that
// the user has still to decide on execution id.
func traceUserApprovalRequired(ctx context.Context, id string) {
	if !tracing.On() {
		return
	}
	_, span := tracing.Start(ctx, UserApprovalRequiredSpan, trace.WithAttributes(executionKey.String(id)))
	span.End()
}
