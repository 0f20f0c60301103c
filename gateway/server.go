package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Options configure the gateway's HTTP handler.
type Options struct {
	// Node is the cluster node requests are routed through (required).
	Node *cluster.Node
	// Gatherer serves /metrics (required).
	Gatherer prometheus.Gatherer
	// Registerer receives the gateway's request metrics (nil: not
	// registered). Wrap it with the node label.
	Registerer prometheus.Registerer
	// Logger logs request failures. Default slog.Default().
	Logger *slog.Logger
	// EnableProbe serves POST /debug/probe/{id}. Default off.
	EnableProbe bool
	// EnablePprof serves Go's profiler at /debug/pprof/ (without
	// /debug/pprof/cmdline: a command line may carry secrets). Default off.
	EnablePprof bool
	// Auth authenticates the /debug/ routes (the probe and the profiler):
	// only callers with the admin role may use them ([DebugRole]).
	// Required when EnableProbe or EnablePprof is set.
	Auth *auth.Authenticator
	// ProbeLimiter rate-limits /debug/probe per principal: every probe
	// id creates a store row, every reminder a durable timer (nil:
	// unlimited).
	ProbeLimiter *auth.Limiter
	// ReadyTimeout bounds the store check of /readyz. Default 2s.
	ReadyTimeout time.Duration
	// StoreGrace is how long the store may fail /readyz's check before the
	// node reports not ready. A store outage is shared by every node: a
	// blip (a database restart) must not take the whole cluster out of the
	// load balancer at once. Default 5s.
	StoreGrace time.Duration
	// MCP serves the MCP endpoint at /mcp when set.
	MCP *MCPOptions
	// Mount, when set, adds more routes (approvals, the demo API) to the
	// gateway's mux.
	Mount func(mux *http.ServeMux) error
	// TrustedOrigins are browser origins allowed to make cross-origin
	// requests with unsafe methods to the gateway's routes (/mcp, /api/, …)
	// besides the node's own (e.g. "https://app.example.com"). Every route
	// refuses other cross-origin ones, and on a loopback listener any Host
	// that is not loopback (DNS rebinding): see browserGuard.
	TrustedOrigins []string
}

// NewHandler returns the gateway's HTTP handler: its mux behind the
// browser rule (Host and Origin, on every route).
func NewHandler(o Options) (http.Handler, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Second
	}
	if o.StoreGrace == 0 {
		o.StoreGrace = 5 * time.Second
	}
	rd := &readiness{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "node": o.Node.ID()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { rd.serve(w, r, o) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)}))
	if (o.EnableProbe || o.EnablePprof) && o.Auth == nil {
		return nil, errors.New("gateway: the /debug/ routes (probe, pprof) need Options.Auth")
	}
	if o.EnableProbe {
		mux.Handle("POST /debug/probe/{id}", o.debug(o.ProbeLimiter, func(w http.ResponseWriter, r *http.Request) { probeHandler(w, r, o) }))
		mux.Handle("POST /debug/probe/{id}/reminders", o.debug(o.ProbeLimiter, func(w http.ResponseWriter, r *http.Request) { probeRemindHandler(w, r, o) }))
	}
	if o.EnablePprof {
		mux.Handle("/debug/pprof/", o.debug(nil, pprof.Index))
		mux.Handle("/debug/pprof/cmdline", o.debug(nil, func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_served", "message": "the command line is not served: it may carry secrets"})
		}))
		mux.Handle("/debug/pprof/profile", o.debug(nil, pprof.Profile))
		mux.Handle("/debug/pprof/symbol", o.debug(nil, pprof.Symbol))
		mux.Handle("/debug/pprof/trace", o.debug(nil, pprof.Trace))
	}
	if o.MCP != nil {
		// OAuth protected resource metadata (RFC 9728): public, so that
		// a client can find the authorization server before it has a token.
		if o.MCP.Auth != nil {
			paths, h := o.MCP.Auth.ProtectedResource()
			for _, p := range paths {
				mux.Handle(p, h)
			}
		}
		h, err := newMCPHandler(o.Node, o.Logger, o.Registerer, *o.MCP)
		if err != nil {
			return nil, err
		}
		mux.Handle("/mcp", h)
		sse := &legacySSE{h: h}
		mux.Handle(legacySSEPath, sse.observed(sse.stream))
		mux.Handle(legacyMessagesPath, sse.observed(sse.messages))
	}
	if o.Mount != nil {
		if err := o.Mount(mux); err != nil {
			return nil, err
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
	})
	return newBrowserGuard(mux, o.TrustedOrigins)
}

// DebugRole is the role the /debug/ routes require.
const DebugRole = auth.RoleAdmin

// debug wraps a /debug/ handler: the caller must authenticate with the
// admin role (401 without credentials, 403 insufficient_role with another
// role) and, with lim, stay within its rate (429 with Retry-After).
func (o Options) debug(lim *auth.Limiter, h http.HandlerFunc) http.Handler {
	return Authenticated(o.Auth, nil, func(w http.ResponseWriter, r *http.Request, p *pb.Principal) {
		if p.GetRole() != DebugRole {
			if c := o.Auth.InsufficientRole(DebugRole, "the /debug/ routes need the "+DebugRole+" role"); c != "" {
				w.Header().Set("WWW-Authenticate", c)
			}
			writeJSON(w, http.StatusForbidden, map[string]any{"error": "insufficient_role", "message": "the /debug/ routes need the " + DebugRole + " role"})
			return
		}
		if lim != nil {
			if ok, retry := lim.Allow(p); !ok {
				w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
				writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "rate_limited", "message": "too many probe requests; retry later"})
				return
			}
		}
		h(w, r)
	})
}

// Authenticated serves next to the callers a authenticates, each within
// its rate of lim (nil: unlimited). Others get the JSON error object
// {"error", "message"}: 401 with the bearer challenge (or the auth error's
// own status and code, e.g. 400 invalid_request, 429 after failed
// sign-ins), and 429 rate_limited with Retry-After beyond the rate.
func Authenticated(a *auth.Authenticator, lim *auth.Limiter, next func(http.ResponseWriter, *http.Request, *pb.Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			ae, ok := errors.AsType[*auth.Error](err)
			if !ok {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
				return
			}
			if ae.WWWAuthenticate != "" {
				w.Header().Set("WWW-Authenticate", ae.WWWAuthenticate)
			}
			if ae.RetryAfter > 0 {
				w.Header().Set("Retry-After", auth.RetryAfterSeconds(ae.RetryAfter))
			}
			code := ae.Code
			if code == "" {
				code = "unauthorized"
			}
			writeJSON(w, ae.Status, map[string]any{"error": code, "message": ae.Message})
			return
		}
		if lim != nil {
			if ok, retry := lim.Allow(p); !ok {
				w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
				writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "rate_limited", "message": "too many requests; retry later"})
				return
			}
		}
		next(w, r, p)
	})
}

// readiness caches /readyz's store check. A readiness probe must answer
// at once: load balancers give it a short timeout, and a probe that waits
// for an unreachable store (up to ReadyTimeout) fails on every node at
// once, whatever the grace — which empties the balancer during a database
// restart. So the store is pinged in the background, at most every
// storeCheckEvery, and /readyz answers from the last result (only the
// first call waits for one).
type readiness struct {
	mu           sync.Mutex
	checked      bool      // a check has completed
	checking     bool      // a check is in flight
	checkedAt    time.Time // when the last completed check started
	storeErr     error     // its result
	failingSince time.Time // zero while the store answers
}

// storeCheckEvery is how often /readyz refreshes its store check.
const storeCheckEvery = time.Second

// store returns the store's state as last checked and how long it has
// been failing, refreshing it in the background when it is stale.
func (rd *readiness) store(o Options) (failingFor time.Duration, storeErr error) {
	rd.mu.Lock()
	if !rd.checked {
		rd.mu.Unlock()
		rd.check(o)
		rd.mu.Lock()
	} else if !rd.checking && time.Since(rd.checkedAt) >= storeCheckEvery {
		rd.checking = true
		go rd.check(o)
	}
	defer rd.mu.Unlock()
	if rd.storeErr != nil {
		return time.Since(rd.failingSince), rd.storeErr
	}
	return 0, nil
}

// check pings the store (bounded by ReadyTimeout) and records the result.
func (rd *readiness) check(o Options) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.ReadyTimeout)
	err := o.Node.Store().Ping(ctx)
	cancel()
	rd.mu.Lock()
	rd.checked, rd.checking, rd.checkedAt, rd.storeErr = true, false, began, err
	if err == nil {
		rd.failingSince = time.Time{}
	} else if rd.failingSince.IsZero() {
		rd.failingSince = began
	}
	failingFor := time.Since(rd.failingSince)
	rd.mu.Unlock()
	if err != nil {
		o.Logger.Warn("readyz: store unreachable", "err", err, "for", failingFor.Round(time.Millisecond))
	}
}

func (rd *readiness) serve(w http.ResponseWriter, _ *http.Request, o Options) {
	view := o.Node.View()
	body := map[string]any{"node": o.Node.ID(), "members": len(view.Members)}
	failingFor, storeErr := rd.store(o)
	if storeErr != nil {
		body["store"] = "unreachable"
	}
	ok, reason := readyDecision(o.Node.Member(), o.Node.Draining(), storeErr != nil, failingFor, o.StoreGrace)
	if !ok {
		body["status"], body["reason"] = "not_ready", reason
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body["status"] = "ready"
	writeJSON(w, http.StatusOK, body)
}

// readyDecision is /readyz's verdict: a node is ready while it is in its
// own membership view, is not draining (a stopping node still finishes
// its requests, but a load balancer should send it no new ones), and its
// store answers — or has failed for less than grace (every node shares the
// store, so a short outage must not empty the load balancer; requests
// meanwhile get retryable answers).
func readyDecision(member, draining, storeFailing bool, failingFor, grace time.Duration) (ready bool, reason string) {
	switch {
	case draining:
		return false, "draining: this node is stopping"
	case !member:
		return false, "this node is not in its own membership view"
	case storeFailing && failingFor >= grace:
		return false, "store unreachable"
	}
	return true, ""
}

func probeHandler(w http.ResponseWriter, r *http.Request, o Options) {
	var delta int64
	if d := r.URL.Query().Get("delta"); d != "" {
		v, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "delta must be an integer"})
			return
		}
		delta = v
	}
	id := r.PathValue("id")
	if id == "" || len(id) > 256 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "probe id must be 1-256 characters"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var opts []cluster.CallOption
	if delta == 0 {
		opts = append(opts, cluster.Idempotent())
	}
	res, err := o.Node.Request(ctx, probe.KindName, id, &pb.ProbeAdd{Delta: delta}, opts...)
	if err != nil {
		status, retryable := http.StatusServiceUnavailable, true
		if ge, ok := grain.AsError(err); ok {
			// A store outage that outlasted an idempotent request's
			// retries: later may work.
			retryable = ge.Retryable() || ge.Code == pb.GrainError_CODE_STORE_UNAVAILABLE
			if ge.Code == pb.GrainError_CODE_REJECTED {
				status = http.StatusBadRequest
			}
		}
		if errors.Is(err, cluster.ErrUnknownOutcome) {
			status = http.StatusGatewayTimeout
		}
		writeJSON(w, status, map[string]any{"error": err.Error(), "retryable": retryable})
		return
	}
	st, ok := res.(*pb.ProbeState)
	if !ok {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "unexpected probe reply"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": st.GetNode(), "epoch": st.GetEpoch(), "count": st.GetCount(), "served": st.GetServed(), "via": o.Node.ID()})
}

// probeRemindBody is the JSON body of POST /debug/probe/{id}/reminders.
type probeRemindBody struct {
	Reminders []struct {
		Name     string `json:"name"`
		DueAtMs  int64  `json:"due_at_ms"`
		PeriodMs int64  `json:"period_ms"`
	} `json:"reminders"`
}

func probeRemindHandler(w http.ResponseWriter, r *http.Request, o Options) {
	id := r.PathValue("id")
	if id == "" || len(id) > 256 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "probe id must be 1-256 characters"})
		return
	}
	var body probeRemindBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid body: " + err.Error()})
		return
	}
	if len(body.Reminders) > probe.MaxReminders {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("at most %d reminders per request (got %d)", probe.MaxReminders, len(body.Reminders))})
		return
	}
	msg := &pb.ProbeRemind{}
	for _, rem := range body.Reminders {
		msg.Reminders = append(msg.Reminders, &pb.ProbeReminder{Name: rem.Name, DueAtMs: rem.DueAtMs, PeriodMs: rem.PeriodMs})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	// Setting reminders replaces them by name: safe to retry after a
	// timed-out attempt.
	if _, err := o.Node.Request(ctx, probe.KindName, id, msg, cluster.Idempotent()); err != nil {
		status := http.StatusServiceUnavailable
		if ge, ok := grain.AsError(err); ok && ge.Code == pb.GrainError_CODE_REJECTED {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"registered": len(msg.Reminders)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
