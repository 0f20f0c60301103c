package systemtest

// One trace across real processes: Jaeger (the collector, its own query
// API), three `mcpgrain node` processes exporting to it over OTLP.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// A client's tools/call with a traceparent in params._meta, sent to a node
// that does not own its session, is one trace in the collector: the
// gateway's SERVER span `tools/call echo` on that node is the child of the
// client's span, and the owner node's `execute_tool echo` descends from it.
func TestOneTraceAcrossTheCluster(t *testing.T) {
	j := testenv.StartJaeger(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // the nodes export within 100 ms
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--trace-endpoint", j.OTLPEndpoint()}})
	cs := connectOwnedBy(t, c, 0, 1, nil)
	traceID, clientSpan := randomHex(16), randomHex(8)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "traced"},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + clientSpan + "-01"}}
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("echo: %+v %v", res, err)
	}
	tr := awaitTrace(ctx, t, j, traceID, "tools/call echo", "execute_tool echo")
	gw, tool := spanNamed(tr, "tools/call echo"), spanNamed(tr, "execute_tool echo")
	if got := parentOf(tr, gw); got != clientSpan {
		t.Errorf("gateway span's parent %q, want the client's span %q from _meta", got, clientSpan)
	}
	if got := nodeOf(tr, gw); got != c.Node(0).ID {
		t.Errorf("gateway span recorded on %q, want the node the client called, %q", got, c.Node(0).ID)
	}
	if got := nodeOf(tr, tool); got != c.Node(1).ID {
		t.Errorf("execute_tool span recorded on %q, want the session's owner %q", got, c.Node(1).ID)
	}
	if !descends(tr, tool, tr.Spans[gw].SpanID) {
		t.Errorf("execute_tool span does not descend from the gateway's span; trace: %+v", tr.Spans)
	}
	// Placement: the session's activation on its owner, started by the
	// initialize forwarded from the node the client called, is a span of
	// that initialize's trace, a child of its gateway span.
	act := awaitFound(ctx, t, j, "mcpgrain.grain.activate session", map[string]string{"mcpgrain.grain.identity": cs.ID()})
	a, init := spanNamed(act, "mcpgrain.grain.activate session"), spanNamed(act, "initialize")
	if got := nodeOf(act, a); got != c.Node(1).ID {
		t.Errorf("activation recorded on %q, want the owner %q", got, c.Node(1).ID)
	}
	if init < 0 || parentOf(act, a) != act.Spans[init].SpanID || nodeOf(act, init) != c.Node(0).ID {
		t.Errorf("the activation is not the child of the initialize's gateway span on %q: %+v", c.Node(0).ID, act.Spans)
	}
	// With tracing on, a node counts the spans its full buffer dropped:
	// none here.
	if got := metricLine(t, c.Node(1).HTTP, "mcpgrain_trace_spans_dropped_total{"); !strings.HasSuffix(got, " 0") {
		t.Errorf("mcpgrain_trace_spans_dropped_total on the owner: %q, want a series at 0", got)
	}
}

// metricLine is the first line of addr's /metrics that starts with prefix
// ("" if none).
func metricLine(t *testing.T, addr, prefix string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return sc.Text()
		}
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// awaitTrace polls Jaeger until trace id has spans with all the names
// (the nodes export in batches) or ctx ends.
func awaitTrace(ctx context.Context, t *testing.T, j *testenv.Jaeger, id string, names ...string) testenv.JaegerTrace {
	t.Helper()
	var last error
	for {
		tr, err := j.Trace(ctx, id)
		if err == nil {
			err = missing(tr, names)
			if err == nil {
				return tr
			}
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("trace %s never complete in jaeger: %v", id, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func missing(tr testenv.JaegerTrace, names []string) error {
	for _, n := range names {
		if spanNamed(tr, n) < 0 {
			return fmt.Errorf("no span %q yet", n)
		}
	}
	return nil
}

// spanNamed is the index of the span named name, or -1.
func spanNamed(tr testenv.JaegerTrace, name string) int {
	for i, s := range tr.Spans {
		if s.OperationName == name {
			return i
		}
	}
	return -1
}

// parentOf is the span id span i is the child of, or "".
func parentOf(tr testenv.JaegerTrace, i int) string {
	for _, r := range tr.Spans[i].References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// nodeOf is the service.instance.id of the process that recorded span i.
func nodeOf(tr testenv.JaegerTrace, i int) string {
	for _, tag := range tr.Processes[tr.Spans[i].ProcessID].Tags {
		if tag.Key == "service.instance.id" {
			return fmt.Sprint(tag.Value)
		}
	}
	return ""
}

// descends reports whether span i has the span ancestor among its parents.
func descends(tr testenv.JaegerTrace, i int, ancestor string) bool {
	for range len(tr.Spans) {
		p := parentOf(tr, i)
		if p == "" {
			return false
		}
		if p == ancestor {
			return true
		}
		i = -1
		for k, s := range tr.Spans {
			if s.SpanID == p {
				i = k
			}
		}
		if i < 0 {
			return false
		}
	}
	return false
}

// A forced cap eviction, read back from the collector: with one resident
// runtime per node, a second session on the owner node evicts the first;
// Jaeger then has mcp.session.idle_runtime_dispose with
// dispose_reason=cap for exactly that session, recorded on its node, the
// child of its McpSessionDO.requestCapEviction span, which links to the
// evicting session's McpSessionDO.init span (in that session's trace).
func TestCapEvictionIsFoundInTheCollector(t *testing.T) {
	j := testenv.StartJaeger(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--trace-endpoint", j.OTLPEndpoint(),
		"--resident-memory", "0", "--resident-soft-cap", "1"}})
	evicted := connectOwnedBy(t, c, 0, 1, nil)
	echo(t, evicted, "first")
	evicting := connectOwnedBy(t, c, 0, 1, nil)
	echo(t, evicting, "second")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tags := map[string]string{"mcp.session.dispose_reason": "cap", "mcp.session.id": evicted.ID()}
	tr := awaitFound(ctx, t, j, "mcp.session.idle_runtime_dispose", tags)
	// The disposal's parent ends after it and may reach the collector in a
	// later batch: poll until the trace has it too.
	for spanNamed(tr, "McpSessionDO.requestCapEviction") < 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("the disposal's trace has no McpSessionDO.requestCapEviction span: %+v", tr.Spans)
		case <-time.After(200 * time.Millisecond):
		}
		tr = awaitFound(ctx, t, j, "mcp.session.idle_runtime_dispose", tags)
	}
	d := spanNamed(tr, "mcp.session.idle_runtime_dispose")
	if got := nodeOf(tr, d); got != c.Node(1).ID {
		t.Errorf("disposal recorded on %q, want the owner %q", got, c.Node(1).ID)
	}
	if tagOf(tr, d, "mcp.isolate.resident_runtimes") == nil || tagOf(tr, d, "mcp.session.active_stream_count") == nil {
		t.Errorf("disposal span without the residency or stream counts: %+v", tr.Spans[d].Tags)
	}
	req := spanNamed(tr, "McpSessionDO.requestCapEviction")
	if req < 0 || parentOf(tr, d) != tr.Spans[req].SpanID {
		t.Fatalf("disposal is not the child of a McpSessionDO.requestCapEviction span: %+v", tr.Spans)
	}
	var linkTrace, linkSpan string
	for _, r := range tr.Spans[req].References {
		if r.RefType == "FOLLOWS_FROM" {
			linkTrace, linkSpan = r.TraceID, r.SpanID
		}
	}
	if linkTrace == "" {
		t.Fatalf("eviction request span has no link: %+v", tr.Spans[req].References)
	}
	build := awaitTrace(ctx, t, j, linkTrace, "McpSessionDO.init")
	for i, s := range build.Spans {
		if s.SpanID != linkSpan {
			continue
		}
		if s.OperationName != "McpSessionDO.init" || fmt.Sprint(tagOf(build, i, "mcp.session.id")) != evicting.ID() ||
			fmt.Sprint(tagOf(build, i, "mcpgrain.residency.eviction_candidate")) != evicted.ID() {
			t.Fatalf("linked span %s with tags %+v, want the evicting session's init span", s.OperationName, s.Tags)
		}
		return
	}
	t.Fatalf("linked span %s not in trace %s", linkSpan, linkTrace)
}

// awaitFound polls Jaeger's search until a trace has a span named
// operation with the tags, and returns it.
func awaitFound(ctx context.Context, t *testing.T, j *testenv.Jaeger, operation string, tags map[string]string) testenv.JaegerTrace {
	t.Helper()
	var last error
	for {
		trs, err := j.Find(ctx, "mcpgrain", operation, tags)
		if err == nil && len(trs) == 1 {
			return trs[0]
		}
		last = fmt.Errorf("%d traces, err %v", len(trs), err)
		select {
		case <-ctx.Done():
			t.Fatalf("no single trace with %s %v in jaeger: %v", operation, tags, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tagOf is span i's tag key, or nil.
func tagOf(tr testenv.JaegerTrace, i int, key string) any {
	for _, tag := range tr.Spans[i].Tags {
		if tag.Key == key {
			return tag.Value
		}
	}
	return nil
}

// A durable approval pause of a real code-mode session, read back from
// Jaeger: the pause takes its lease (McpSessionDO.pending_approval_lease.start,
// durable), the model's accept reaches the code (begin_resume, outcome
// accept), and the settled execution releases it (finish) — each span
// carrying the session and the execution id.
func TestDurablePauseLeaseSpansInTheCollector(t *testing.T) {
	j := testenv.StartJaeger(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	shutdown, err := otlp.Setup(t.Context(), otlp.Options{Endpoint: j.OTLPEndpoint(), Node: "lease1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %v", sc)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	want := map[string]map[string]string{
		"McpSessionDO.pending_approval_lease.start":        {"mcpgrain.execution.durable": "true"},
		"McpSessionDO.pending_approval_lease.begin_resume": {"mcpgrain.approval.outcome": "accept"},
		"McpSessionDO.pending_approval_lease.finish":       {},
	}
	for op, tags := range want {
		tags["mcp.execution.id"] = id
		tags["mcp.session.id"] = cs.ID()
		tr := awaitFound(ctx, t, j, op, tags)
		if nodeOf(tr, spanNamed(tr, op)) != "lease1" {
			t.Errorf("%s not recorded by the node", op)
		}
	}
	// The execution's engine spans are in the execute call's trace, the
	// sandbox worker process's part under the run's span (timed by the
	// worker, recorded by the node), and the decision's resume span in the
	// resume call's.
	names := []string{"execute_tool execute", "mcp.execute", "executor.code.exec", "executor.code.untrusted-sandbox", "mcp.tool.dispatch"}
	tr := awaitFound(ctx, t, j, "mcp.execute", map[string]string{"mcp.execute.paused_execution_id": id})
	for missing(tr, names) != nil { // the run's spans end after the execute call's
		select {
		case <-ctx.Done():
			t.Fatalf("the execute call's trace: %v", missing(tr, names))
		case <-time.After(200 * time.Millisecond):
		}
		tr = awaitFound(ctx, t, j, "mcp.execute", map[string]string{"mcp.execute.paused_execution_id": id})
	}
	run := tr.Spans[spanNamed(tr, "executor.code.exec")].SpanID
	if w := spanNamed(tr, "executor.code.untrusted-sandbox"); parentOf(tr, w) != run || nodeOf(tr, w) != "lease1" {
		t.Errorf("the worker's span is not the run's child recorded by the node")
	}
	if !descends(tr, spanNamed(tr, "mcp.execute"), tr.Spans[spanNamed(tr, "execute_tool execute")].SpanID) {
		t.Errorf("mcp.execute is not under the execute tool's span")
	}
	awaitFound(ctx, t, j, "mcp.execute.resume", map[string]string{"mcp.execution.id": id, "mcp.execute.outcome": "ok"})
}
