package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// With tracing on, the latency histograms of a traced request carry its
// trace id as an exemplar — the gateway's mcpgrain_gateway_request_seconds
// and the grain request's mcpgrain_grain_request_seconds — shown to a
// scraper that negotiates OpenMetrics, and not in the classic text format.
func TestLatencyHistogramsCarryTheTraceIDAsExemplar(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	// No limit on exemplars: the session's initialize, traced too, took
	// the histograms' exemplars a moment ago (one a second by default).
	uninstall := tracing.InstallWith(tp, tracing.Options{ExemplarInterval: -1})
	t.Cleanup(func() { uninstall(); _ = tp.Shutdown(context.Background()) })
	addr := startNode(t, nil)
	cs := connect(t, addr, aliceToken, "2025-06-18", nil)
	const traceID = "6bf92f3577b34da6a3ce929d0e0e4738"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "traced"},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}}
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("echo: %+v %v", res, err)
	}
	exemplar := `# {trace_id="` + traceID + `"}`
	want := []string{"mcpgrain_gateway_request_seconds_bucket", "mcpgrain_grain_request_seconds_bucket"}
	var last string
	for _, name := range want {
		found := false
		for !found && ctx.Err() == nil { // the gateway observes just after the client has its answer
			last = scrapeAs(t, addr, "application/openmetrics-text; version=1.0.0")
			found = hasExemplar(last, name, exemplar)
			if !found {
				time.Sleep(50 * time.Millisecond) // polling the scrape, bounded by ctx
			}
		}
		if !found {
			t.Fatalf("no %s line with exemplar %s in the OpenMetrics scrape:\n%s", name, exemplar, last)
		}
	}
	if classic := scrapeAs(t, addr, "text/plain"); strings.Contains(classic, exemplar) {
		t.Fatal("the classic text format shows exemplars")
	}
}

func hasExemplar(scrape, metric, exemplar string) bool {
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, metric) && strings.Contains(line, exemplar) {
			return true
		}
	}
	return false
}

func scrapeAs(t *testing.T, addr, accept string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
