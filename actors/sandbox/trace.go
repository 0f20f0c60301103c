package sandbox

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// An execution's spans (docs/metrics.md, "Tracing"). The parent records
// ExecSpan around Run; the worker process has no exporter (and no
// network), so it times its own part when the start frame carries the
// run's traceparent and sends the records back in its done frame, which
// the parent records as spans under that traceparent, with the worker's
// timestamps: the trace keeps the worker's part, parent and child. With
// tracing off the start frame carries no traceparent and the worker
// reads no clock for it.
const (
	// ExecSpan is one execution in the sandbox, from its admission to its
	// end (the executor's code execution span).
	ExecSpan = "executor.code.exec"
	// WorkerSpan is the worker process's part of an execution: from the
	// start frame to the done frame (the executor's sandbox span).
	WorkerSpan = "executor.code.untrusted-sandbox"
	// CompileSpan is the worker's compilation of the code (esbuild, then
	// sobek), a child of WorkerSpan.
	CompileSpan = "mcpgrain.sandbox.compile"
)

// The attributes of the sandbox's spans.
const (
	WorkerPIDKey = attribute.Key("mcpgrain.sandbox.worker_pid")
	ToolCallsKey = attribute.Key("mcpgrain.sandbox.tool_calls")
	HeapKey      = attribute.Key("mcpgrain.sandbox.heap_bytes")
	ReplayKey    = attribute.Key("mcpgrain.sandbox.replay")
	errorTypeKey = attribute.Key("error.type")
)

// wireSpan is one span the worker timed, as it travels in the done frame.
type wireSpan struct {
	Name  string `json:"name"`
	Start int64  `json:"start"` // Unix nanoseconds
	End   int64  `json:"end"`
	// Parent is the index in the frame's spans of this span's parent;
	// -1 for the run's span (the start frame's traceparent).
	Parent int `json:"parent"`
}

// runTrace is what the parent keeps of a traced execution.
type runTrace struct {
	parent string // the run span's traceparent, sent in the start frame
	pid    int
	heap   uint64
	spans  []wireSpan // the worker's, from its done frame
	// cancelled: the run was stopped by its caller (which gave up, or
	// gave the worker back while the run waited), not failed.
	cancelled bool
}

// startExec starts the span of an execution (tracing on only: the caller
// checks) and the record that collects the worker's part.
func startExec(ctx context.Context, lim Limits) (context.Context, trace.Span, *runTrace) {
	ctx, span := tracing.Start(ctx, ExecSpan, trace.WithAttributes(ReplayKey.Bool(lim.WaitForSlot)))
	return ctx, span, &runTrace{parent: tracing.Inject(ctx)["traceparent"]}
}

// endExec records the worker's spans under span and ends it: the tool
// calls made, the worker, and for a failure its kind (error.type: syntax,
// runtime, timeout, limit, busy, or internal; cancelled for a run its
// caller stopped, without an error status), never its message.
func endExec(ctx context.Context, span trace.Span, tr *runTrace, res Result, err error) {
	span.SetAttributes(ToolCallsKey.Int(res.ToolCalls))
	if tr.pid != 0 {
		span.SetAttributes(WorkerPIDKey.Int(tr.pid))
	}
	recordWorker(ctx, tr)
	if err != nil && tr.cancelled {
		span.SetAttributes(errorTypeKey.String("cancelled")) // not a failure: no error status
	} else if err != nil {
		kind := "internal"
		var se *Error
		if errors.As(err, &se) {
			kind = se.Kind
		}
		span.SetAttributes(errorTypeKey.String(kind))
		span.SetStatus(codes.Error, "execution failed: "+kind)
	}
	span.End()
}

// recordWorker records the worker's timed spans under ctx's span, each
// with the worker's timestamps.
func recordWorker(ctx context.Context, tr *runTrace) {
	ctxs := make([]context.Context, len(tr.spans))
	for i, ws := range tr.spans {
		parent := ctx
		if ws.Parent >= 0 && ws.Parent < i {
			parent = ctxs[ws.Parent]
		}
		var attrs []attribute.KeyValue
		if i == 0 {
			attrs = []attribute.KeyValue{WorkerPIDKey.Int(tr.pid), HeapKey.Int64(int64(tr.heap))}
		}
		c, span := tracing.Start(parent, ws.Name, trace.WithTimestamp(time.Unix(0, ws.Start)), trace.WithAttributes(attrs...))
		span.End(trace.WithTimestamp(time.Unix(0, ws.End)))
		ctxs[i] = c
	}
}

// workerTimer times a worker's part of one traced execution (nil: the
// execution is not traced).
type workerTimer struct {
	spans []wireSpan
}

// newWorkerTimer starts timing when the start frame carries a traceparent.
func newWorkerTimer(f frame) *workerTimer {
	if f.Trace == "" {
		return nil
	}
	return &workerTimer{spans: []wireSpan{{Name: WorkerSpan, Start: time.Now().UnixNano(), Parent: -1}}}
}

// compiled records the compilation, which began at began.
func (t *workerTimer) compiled(began time.Time) {
	if t != nil {
		t.spans = append(t.spans, wireSpan{Name: CompileSpan, Start: began.UnixNano(), End: time.Now().UnixNano(), Parent: 0})
	}
}

// done ends the worker's span and returns the records for the done frame.
func (t *workerTimer) done() []wireSpan {
	if t == nil {
		return nil
	}
	t.spans[0].End = time.Now().UnixNano()
	return t.spans
}
