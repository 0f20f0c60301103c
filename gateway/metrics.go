package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/tracing"
)

// Era label values of the gateway metrics.
const (
	eraStateful    = "stateful"    // 2025-03-26 … 2025-11-25: Mcp-Session-Id sessions
	eraSessionless = "sessionless" // 2026-07-28: requestState continuations
	eraUnknown     = "unknown"     // rejected before the era was known (auth, method, origin)
	eraSSE         = "sse"         // the HTTP+SSE transport (2024-11-05): GET /sse, POST /messages
)

// gatewayMetrics are the /mcp request metrics.
type gatewayMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newGatewayMetrics(reg prometheus.Registerer) (*gatewayMetrics, error) {
	m := &gatewayMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_gateway_requests_total",
			Help: "Requests to /mcp (and to /sse and /messages: era sse), by protocol era (stateful, sessionless, unknown, sse), method (the JSON-RPC method for known MCP methods, other, batch, response; GET and DELETE for those HTTP methods) and HTTP status code.",
		}, []string{"era", "method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgrain_gateway_request_seconds",
			Help:    "Time from request to the end of the response for POST /mcp (GET streams are left out: they live as long as the client listens), by protocol era.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
		}, []string{"era"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// requestLabels are filled in by the handler as it learns them.
type requestLabels struct {
	era, method string
	// span receives the request's server span (nil: tracing off), whose
	// trace id is the latency's exemplar.
	span *tracing.Slot
}

// observe records one finished request.
func (m *gatewayMetrics) observe(r *http.Request, l requestLabels, status int, took time.Duration) {
	method := l.method
	if method == "" {
		method = r.Method
	}
	m.requests.WithLabelValues(l.era, method, strconv.Itoa(status)).Inc()
	if r.Method == http.MethodPost {
		tracing.ObserveSpan(l.span.SpanContext(), m.seconds.WithLabelValues(l.era), took.Seconds())
	}
}

// knownMethods are the JSON-RPC methods that get their own label value;
// anything else is "other", so a client cannot grow the label set.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
	"server/discover": true,
	"tasks/get":       true, "tasks/list": true, "tasks/result": true, "tasks/cancel": true,
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the Flusher underneath.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
