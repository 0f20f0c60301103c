package session

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// The executor's lifecycle spans, emitted where the grain carries out what
// the machine decided (executor.go), never in the machine. With tracing
// off every function here returns after one atomic load, allocating
// nothing (TestLifecycleTracingOffAllocatesNothing).

// The executor's span names (docs/metrics.md, "Tracing", maps each to
// what it covers here).
const (
	// InitSpan is a runtime's build: a creation, or a restore after
	// passivation, a cap eviction or a move.
	InitSpan = "McpSessionDO.init"
	// DisposeSpan is a runtime's disposal, whatever the reason (the
	// executor's name is kept for every reason: dashboards query it).
	DisposeSpan = "mcp.session.idle_runtime_dispose"
	// CapEvictionSpan is a cap eviction request handled by its candidate.
	CapEvictionSpan = "McpSessionDO.requestCapEviction"
	// RestoreForApprovalSpan is a passivated session's runtime built for
	// its durable pauses (an approval surface, a forwarded resume, an
	// approval deadline): the restore replays their journals.
	RestoreForApprovalSpan = "McpSessionDO.restore_runtime_for_approval"
	// The pending-approval lease of one paused execution: taken, its
	// decision handed over, released once the execution settled, and the
	// deadline's decline.
	LeaseStartSpan       = "McpSessionDO.pending_approval_lease.start"
	LeaseBeginResumeSpan = "McpSessionDO.pending_approval_lease.begin_resume"
	LeaseFinishSpan      = "McpSessionDO.pending_approval_lease.finish"
	LeaseExpireSpan      = "McpSessionDO.pending_approval_lease.expire"
	// MarkActivitySpan is the durable part of the executor's
	// markActivity: the session's last activity written to its record.
	// Here activity is kept in memory on every request (no I/O, no span)
	// and written when the idle alarm finds the session active, so the
	// span marks that write: a root, as the idle alarm's disposal is.
	MarkActivitySpan = "McpSessionDO.markActivity"
)

// The executor's attributes of those spans, and mcpgrain's additions.
const (
	CapOverflowKey        = attribute.Key("mcp.isolate.cap_overflow")
	ResidentKey           = attribute.Key("mcp.isolate.resident_runtimes")
	PeakResidentKey       = attribute.Key("mcp.isolate.peak_resident_runtimes")
	ResidentEvictableKey  = attribute.Key("mcp.isolate.resident_evictable")
	ResidentPinnedKey     = attribute.Key("mcp.isolate.resident_pinned")
	EvictionPendingKey    = attribute.Key("mcp.isolate.resident_eviction_pending")
	InFlightBuildsKey     = attribute.Key("mcp.isolate.in_flight_cold_builds")
	IdleMsKey             = attribute.Key("mcp.session.idle_ms")
	PausedCountKey        = attribute.Key("mcp.session.paused_execution_count")
	StreamCountKey        = attribute.Key("mcp.session.active_stream_count")
	DisposeReasonKey      = attribute.Key("mcp.session.dispose_reason")
	ExecutionKey          = attribute.Key("mcp.execution.id")
	RestoreKey            = attribute.Key("mcp.session.restore")
	DurablePausedKey      = attribute.Key("mcpgrain.session.durable_paused_executions")
	RunningCountKey       = attribute.Key("mcpgrain.session.running_execution_count")
	EvictionCandidateKey  = attribute.Key("mcpgrain.residency.eviction_candidate")
	EvictedKey            = attribute.Key("mcpgrain.residency.evicted")
	DurableKey            = attribute.Key("mcpgrain.execution.durable")
	DecisionKey           = attribute.Key("mcpgrain.approval.outcome")
	LeaseDeadlineMsKey    = attribute.Key("mcpgrain.approval.deadline_ms")
	errorTypeKey          = attribute.Key("error.type")
	buildFailedErrorValue = "build_failed"
)

// residencyAttrs are the registry's counts as the executor's
// mcp.isolate.* attributes.
func residencyAttrs(c residency.Counts) []attribute.KeyValue {
	return []attribute.KeyValue{
		ResidentKey.Int(c.Resident), PeakResidentKey.Int(c.Peak),
		ResidentEvictableKey.Int(c.Evictable), ResidentPinnedKey.Int(c.Pinned),
		EvictionPendingKey.Int(c.EvictionPending), InFlightBuildsKey.Int(c.InFlightBuilds),
	}
}

// startInit starts the init span of a build admitted as adm (tracing on
// only: the caller checks).
func (s *session) startInit(ctx context.Context, adm residency.Admission, restore bool) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{tracing.SessionKey.String(s.id), RestoreKey.Bool(restore),
		CapOverflowKey.Bool(adm.Overflow)}
	if adm.Evict != "" {
		attrs = append(attrs, EvictionCandidateKey.String(adm.Evict))
	}
	return tracing.Start(ctx, InitSpan, trace.WithAttributes(attrs...))
}

// endInit ends the init span: the residency counts with the new runtime
// registered (or not, when the build failed), and the durable pauses the
// new runtime restored.
func (s *session) endInit(span trace.Span, built bool) {
	span.SetAttributes(residencyAttrs(s.h.registry.Counts(s.now()))...)
	if !built {
		span.SetAttributes(errorTypeKey.String(buildFailedErrorValue))
		span.SetStatus(codes.Error, "session runtime failed to start")
	} else if s.rt != nil {
		span.SetAttributes(DurablePausedKey.Int(s.rt.DurablePausedExecutions()))
	}
	span.End()
}

// startDispose starts the disposal span of the resident runtime for
// reason, with the counts that explained the decision (read before the
// runtime stops serving; tracing on only: the caller checks).
func (s *session) startDispose(ctx context.Context, reason string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{tracing.SessionKey.String(s.id), DisposeReasonKey.String(reason),
		IdleMsKey.Int64(s.now().Sub(s.last).Milliseconds())}
	if s.rt != nil {
		attrs = append(attrs, PausedCountKey.Int(s.rt.PausedExecutions()),
			DurablePausedKey.Int(s.rt.DurablePausedExecutions()), RunningCountKey.Int(s.rt.RunningExecutions()))
	}
	if s.res != nil {
		attrs = append(attrs, StreamCountKey.Int(s.res.streams()))
	}
	return tracing.Start(ctx, DisposeSpan, trace.WithAttributes(attrs...))
}

// endDispose ends the disposal span with the residency counts after the
// release (as the executor annotates them).
func (s *session) endDispose(span trace.Span) {
	span.SetAttributes(residencyAttrs(s.h.registry.Counts(s.now()))...)
	span.End()
}

// startCapEviction starts the candidate's span of a cap eviction request:
// a root of its own, linked to the evicting build's span whose context the
// request carries (link, when tracing is on and it has one).
func (s *session) startCapEviction(ctx context.Context, link map[string]string) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithNewRoot(),
		trace.WithAttributes(tracing.SessionKey.String(s.id))}
	if sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), link)); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return tracing.Start(ctx, CapEvictionSpan, opts...)
}

// traceLease records one step of an execution's pending-approval lease
// (the action a carried out) as the executor's span: an instant span with
// the session, the execution and what the step knew. It returns ctx with
// that span, for what the step does next to link to it (the deadline's
// reminder).
func (s *session) traceLease(ctx context.Context, a action) context.Context {
	if !tracing.On() {
		return ctx
	}
	var name string
	attrs := []attribute.KeyValue{tracing.SessionKey.String(s.id), ExecutionKey.String(a.exec)}
	switch a.kind {
	case actSetDeadline:
		name = LeaseStartSpan
		attrs = append(attrs, LeaseDeadlineMsKey.Int64(a.at.UnixMilli()))
		if s.rt != nil {
			attrs = append(attrs, DurableKey.Bool(s.rt.DurablePause(a.exec)))
		}
	case actCountApproval:
		name = LeaseBeginResumeSpan
		attrs = append(attrs, DecisionKey.String(a.label))
	case actReleaseLease:
		name = LeaseFinishSpan
	case actRecordTimeout:
		name = LeaseExpireSpan
	default:
		return ctx
	}
	ctx, span := tracing.Start(ctx, name, trace.WithAttributes(attrs...))
	span.End()
	return ctx
}

// traceMarkActivity starts the span of the last activity's write; end
// records the write's failure, if any (its kind, not its text).
func (s *session) traceMarkActivity(ctx context.Context) (context.Context, func(error)) {
	if !tracing.On() {
		return ctx, func(error) {}
	}
	ctx, span := tracing.Start(ctx, MarkActivitySpan, trace.WithAttributes(tracing.SessionKey.String(s.id),
		IdleMsKey.Int64(s.now().Sub(s.last).Milliseconds())))
	return ctx, func(err error) {
		if err != nil {
			span.SetAttributes(errorTypeKey.String("store_write_failed"))
			span.SetStatus(codes.Error, "persist last activity failed")
		}
		span.End()
	}
}
