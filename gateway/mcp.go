package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// Defaults of [MCPOptions], used where a field is zero.
const (
	// DefaultMaxBody is the request body limit (413 beyond it).
	DefaultMaxBody = 4 << 20
	// DefaultBodyTimeout bounds reading one request body (408 beyond it);
	// the node's --body-timeout defaults to it.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultStartTimeout bounds the wait for a session to start serving
	// an exchange (503 restart envelope beyond it).
	DefaultStartTimeout = 10 * time.Second
)

// MCPOptions configure the /mcp endpoint.
type MCPOptions struct {
	// Auth authenticates callers (required).
	Auth *auth.Authenticator
	// Limiter rate-limits callers per principal (nil: unlimited).
	Limiter *auth.Limiter
	// MaxBody bounds request bodies (zero: [DefaultMaxBody], 4 MiB).
	MaxBody int64
	// StateKey verifies the requestState of 2026-07-28 retries (required to
	// serve that era; the continuation grains sign with the same key).
	StateKey []byte
	// BodyTimeout bounds how long reading a request body may take, so a
	// client trickling a body (slow loris) cannot hold a request open
	// (zero: [DefaultBodyTimeout]); the response then is 408.
	BodyTimeout time.Duration
	// LocalSessionIDs mints the id of a new session among ids this node
	// owns (consistent hashing still places it; the id is chosen so that it
	// lands here): a client that keeps its connection to one gateway then
	// reaches its session without a network hop. Sessions spread as evenly
	// as the load balancer spreads initialize requests. Off: any id, so
	// sessions spread evenly whatever the balancer does.
	LocalSessionIDs bool
	// StartTimeout bounds how long the gateway waits for the session to
	// start serving an exchange (restore or move included) before answering
	// with the 503 restart envelope (zero: [DefaultStartTimeout]).
	StartTimeout time.Duration
	// StreamKeepalive is how long an SSE response stream may stay quiet
	// before the gateway writes a keepalive comment on it, so proxies that
	// cut idle streams keep long calls, waits and listen streams open
	// (zero: [exchange.DefaultStreamKeepalive], 20 s; negative: never).
	StreamKeepalive time.Duration
	// MaxInFlight bounds the requests this node serves at once (zero:
	// [DefaultMaxInFlight], [DefaultInFlightPerCPU] per GOMAXPROCS;
	// negative: unbounded). Requests beyond it wait up to QueueWait in a
	// queue as long as the bound, then are shed: 503 with Retry-After and
	// a retryable JSON-RPC error. Requests that continue or settle work
	// the node holds (GET streams, DELETE, answers and notifications,
	// tasks/result, tasks/cancel, tasks/update, a code-mode resume,
	// requestState retries) are never queued nor shed.
	MaxInFlight int
	// QueueWait is how long a request over MaxInFlight waits for a slot
	// (zero: [DefaultQueueWait]; negative: shed at once).
	QueueWait time.Duration
	// SchedLagTarget lowers the in-flight bound in force below MaxInFlight
	// while requests wait for a slot (or are shed) and goroutines wait
	// longer than this to run (the 90th percentile of the runtime's
	// scheduling delay over 100 ms): a process short of
	// CPU serves fewer at once, so that refusing the rest stays quick, and
	// climbs back as the delay falls (zero: [DefaultSchedLagTarget];
	// negative: the bound stays MaxInFlight).
	SchedLagTarget time.Duration
}

type mcpHandler struct {
	node *cluster.Node
	fwd  *exchange.Forwarder
	log  *slog.Logger
	o    MCPOptions
	// continuationSeq spreads fresh sessionless requests over this node's
	// continuation grains.
	continuationSeq atomic.Uint64
	metrics         *gatewayMetrics
	adm             *admission // the node's in-flight bound
}

func newMCPHandler(node *cluster.Node, log *slog.Logger, reg prometheus.Registerer, o MCPOptions) (*mcpHandler, error) {
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if err := requeststate.CheckKey(o.StateKey); err != nil {
		return nil, fmt.Errorf("gateway: requestState key: %w", err)
	}
	m, err := newGatewayMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	adm, err := newAdmission(reg, inFlightOr(o.MaxInFlight), durationOr(o.QueueWait, DefaultQueueWait), durationOr(o.SchedLagTarget, DefaultSchedLagTarget))
	if err != nil {
		return nil, fmt.Errorf("gateway: admission metrics: %w", err)
	}
	return &mcpHandler{node: node, fwd: exchange.NewForwarder(node, log, o.StartTimeout, o.StreamKeepalive), log: log, o: o, metrics: m, adm: adm}, nil
}

func (h *mcpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	labels := requestLabels{era: eraUnknown}
	if tracing.On() { // the request's span, started further in, gives its latency's exemplar
		var ctx context.Context
		ctx, labels.span = tracing.WithSlot(r.Context())
		r = r.WithContext(ctx)
	}
	defer func() {
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		h.metrics.observe(r, labels, status, time.Since(start))
	}()
	h.serve(rec, r, &labels)
}

// serve answers one /mcp request: checks that need no grain (admit,
// authenticate, readBody), the node's admission (admitLoad: 503 when it
// sheds), then the route to a grain.
func (h *mcpHandler) serve(w http.ResponseWriter, r *http.Request, labels *requestLabels) {
	if !h.admit(w, r) {
		return
	}
	principal, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	raw, ok := h.readBody(w, r)
	if !ok {
		return
	}
	var body rpcBody
	if r.Method == http.MethodPost {
		body = parseBody(raw)
		labels.method = body.methodLabel()
		if msg := body.oversized(); msg != "" {
			exchange.WriteError(w, http.StatusBadRequest, nil, exchange.CodeInvalidRequest, msg)
			return
		}
	}
	if v := exchange.HeaderValue(r.Header, "Mcp-Protocol-Version"); v != "" && !slices.Contains(mcp.SupportedProtocolVersions(), v) {
		exchange.WriteErrorData(w, http.StatusBadRequest, body.requestID(), exchange.CodeUnsupportedProtocolVersion,
			fmt.Sprintf("Bad Request: Unsupported protocol version %q (supported versions: %s)", v, strings.Join(mcp.SupportedProtocolVersions(), ",")),
			mcp.UnsupportedProtocolVersionData{Supported: mcp.SupportedProtocolVersions(), Requested: v})
		return
	}
	release, ok := h.admitLoad(w, r, body)
	if !ok {
		return
	}
	defer release()
	if isModern(r, body) {
		labels.era = eraSessionless
		h.modern(w, r, principal, body)
		return
	}
	labels.era = eraStateful
	h.stateful(w, r, principal, body)
}

// admit refuses the HTTP methods /mcp does not serve. (The Host and
// Origin rules, DNS rebinding included, are the whole mux's: browserGuard.)
func (h *mcpHandler) admit(w http.ResponseWriter, r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
		return true
	}
	w.Header().Set("Allow", "GET, POST, DELETE")
	exchange.WriteError(w, http.StatusMethodNotAllowed, nil, exchange.CodeServerError, "Method not allowed")
	return false
}

// authenticate returns the caller, or answers 401/400/429 (with
// WWW-Authenticate and Retry-After as the failure asks).
func (h *mcpHandler) authenticate(w http.ResponseWriter, r *http.Request) (*pb.Principal, bool) {
	principal, err := h.o.Auth.Authenticate(r)
	if err != nil {
		ae, ok := errors.AsType[*auth.Error](err)
		if !ok {
			exchange.WriteError(w, http.StatusUnauthorized, nil, exchange.CodeServerError, "Unauthorized")
			return nil, false
		}
		if ae.WWWAuthenticate != "" {
			w.Header().Set("WWW-Authenticate", ae.WWWAuthenticate)
		}
		if ae.RetryAfter > 0 {
			w.Header().Set("Retry-After", auth.RetryAfterSeconds(ae.RetryAfter))
		}
		exchange.WriteError(w, ae.Status, nil, exchange.CodeServerError, ae.Message)
		return nil, false
	}
	if h.o.Limiter != nil {
		if ok, retry := h.o.Limiter.Allow(principal); !ok {
			w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
			exchange.WriteError(w, http.StatusTooManyRequests, nil, exchange.CodeServerError, "Too many requests, please retry later")
			return nil, false
		}
	}
	return principal, true
}

// readBody reads a POST's body within MaxBody and BodyTimeout (413, 408).
func (h *mcpHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		return nil, true
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.o.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	_ = rc.SetReadDeadline(time.Time{}) // streams live on; only the body had a deadline
	if err == nil {
		return body, true
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		exchange.WriteError(w, http.StatusRequestEntityTooLarge, nil, exchange.CodeInvalidRequest, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
		return nil, false
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		w.Header().Set("Connection", "close")
		exchange.WriteError(w, http.StatusRequestTimeout, nil, exchange.CodeInvalidRequest, fmt.Sprintf("request body not received within %s", h.o.BodyTimeout))
		return nil, false
	}
	exchange.WriteError(w, http.StatusBadRequest, nil, exchange.CodeParseError, "failed to read request body")
	return nil, false
}

// stateful routes a request of the session eras: to the session its
// Mcp-Session-Id names, or for initialize to a new one.
func (h *mcpHandler) stateful(w http.ResponseWriter, r *http.Request, p *pb.Principal, body rpcBody) {
	sid := exchange.HeaderValue(r.Header, "Mcp-Session-Id")
	switch {
	case sid != "" && !validSessionID(sid):
		exchange.WriteError(w, http.StatusNotFound, body.requestID(), exchange.CodeServerError, "Session not found")
	case r.Method == http.MethodDelete && sid != "":
		h.fwd.Delete(w, r, p, sid)
	case sid != "":
		h.fwd.Forward(w, r, body.target(exchange.KindSession, sid, p))
	case r.Method == http.MethodPost && body.initialize():
		t := body.target(exchange.KindSession, h.newSessionID(), p)
		t.Create = true
		h.fwd.Forward(w, r, t)
	default:
		exchange.WriteError(w, http.StatusBadRequest, body.requestID(), exchange.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required ("+supportedTransports+")")
	}
}

// newSessionID mints a session id (rand.Text: 130 random bits), among
// ids this node owns with LocalSessionIDs. Choosing among the ids of one
// of N nodes costs log2(N) bits of the id's entropy.
func (h *mcpHandler) newSessionID() string {
	if !h.o.LocalSessionIDs {
		return rand.Text()
	}
	return h.ownedID(exchange.KindSession, 64, func(int) string { return rand.Text() })
}

// ownedID returns the first of up to tries ids from next that this node
// owns (its grain lives here: no network hop), else the first one (owned
// elsewhere: still works, one hop away).
func (h *mcpHandler) ownedID(kind string, tries int, next func(i int) string) string {
	first := ""
	for i := range tries {
		id := next(i)
		if o, ok := h.node.Owner(kind, id); ok && o.ID == h.node.ID() {
			return id
		}
		if i == 0 {
			first = id
		}
	}
	return first
}

// validSessionID accepts the ids we mint and anything that could be one:
// visible ASCII, bounded length.
func validSessionID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
