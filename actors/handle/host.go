package handle

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// KindName is the handle grain kind.
const KindName = app.KindHandle

// DefaultIdleTTL is how long an unused handle lives by default.
const DefaultIdleTTL = 30 * 24 * time.Hour

// Config configures a node's handles. The zero value, with a Cluster, is
// the default.
type Config struct {
	// Cluster reaches the handle grains (required): the node.
	Cluster grain.Requester
	// IdleTTL deletes a handle not opened or saved for this long.
	// Default DefaultIdleTTL.
	IdleTTL time.Duration
	// MaxPerPrincipal caps the live handles of one principal (user and
	// org): a mint past it is app.ErrTooManyHandles. Default
	// DefaultMaxPerPrincipal; negative: unlimited.
	MaxPerPrincipal int
	// Clock is the grains' clock. Default the system clock.
	Clock clock.Clock
	// Logger logs problems. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Store is the node's store, for listing a principal's handles and
	// counting the live ones (the handles index). Nil: they cannot be
	// listed, and mcpgrain_live_handles is not reported.
	Store store.Store
}

// Host is a node's handle service: the grain kind and the client side the
// SDK's calls use (app.Handles).
type Host struct {
	cfg     Config
	metrics *metrics

	mu        sync.Mutex
	schedules map[string]app.ScheduleFunc // the servers' schedule callbacks (Bind)
	bound     bool
}

var _ app.Handles = (*Host)(nil)

// NewHost returns the handle service of a node.
func NewHost(cfg Config) (*Host, error) {
	if cfg.Cluster == nil {
		return nil, errors.New("handle: Config.Cluster is required")
	}
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = DefaultIdleTTL
	}
	if cfg.MaxPerPrincipal == 0 {
		cfg.MaxPerPrincipal = DefaultMaxPerPrincipal
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if cfg.Registerer != nil && cfg.Store != nil {
		if err := cfg.Registerer.Register(newLiveCollector(countLive(cfg.Store), cfg.Clock, cfg.Logger)); err != nil {
			return nil, fmt.Errorf("handle: register metrics: %w", err)
		}
	}
	return &Host{cfg: cfg, metrics: m}, nil
}

func (h *Host) now() time.Time { return h.cfg.Clock.Now() }

// Kind is the handle grain kind.
func (h *Host) Kind() grain.Kind {
	return grain.Kind{
		Name:           KindName,
		New:            func(string) grain.Grain { return &handleGrain{h: h} },
		IdleTimeout:    5 * time.Minute,
		CreatedByWrite: true,
		Creates: func(first proto.Message) bool {
			_, ok := first.(*pb.HandleCreate)
			return ok
		},
	}
}

// Bind adds [Host.Middleware] to a server the node built, and learns the
// schedule callbacks of its packs (every server of a node has the same
// packs): a handle's schedules run them.
func (h *Host) Bind(srv *mcp.Server) {
	srv.AddReceivingMiddleware(h.Middleware)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.bound {
		h.schedules, h.bound = app.SchedulesOf(srv), true
	}
}

// callbacks returns the schedule callbacks (ok false: no server bound yet).
func (h *Host) callbacks() (map[string]app.ScheduleFunc, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.schedules, h.bound
}

// Middleware binds every request of a server to the handle service, for
// the request's principal (app.WithHandles).
func (h *Host) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var hd http.Header
		if ex := req.GetExtra(); ex != nil {
			hd = ex.Header
		}
		var p *pb.Principal
		if c := exchange.CallerOf(hd); c.User != "" {
			p = &pb.Principal{User: c.User, Org: c.Org, Role: c.Role}
		}
		return next(app.WithHandles(withTool(ctx, req), h, p), method, req)
	}
}

// handlePrefix starts every handle: it tells a handle from other ids in
// logs, and a string without it is no handle (no request is made).
const handlePrefix = "h_"

// handleLen is the length of a handle: the prefix and 16 random bytes,
// base64url without padding.
var handleLen = len(handlePrefix) + base64.RawURLEncoding.EncodedLen(16)

// newID mints a handle: 128 random bits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return handlePrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// wellFormed reports whether s can be a handle.
func wellFormed(s string) bool {
	if len(s) != handleLen || s[:len(handlePrefix)] != handlePrefix {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s[len(handlePrefix):])
	return err == nil
}

// request sends msg to the handle grain id.
func (h *Host) request(ctx context.Context, id string, msg proto.Message) (*pb.HandleReply, error) {
	res, err := h.cfg.Cluster.Request(ctx, KindName, id, msg)
	if err != nil {
		if ge, ok := grain.AsError(err); ok && ge.Code == pb.GrainError_CODE_REJECTED {
			return nil, fmt.Errorf("mcpgrain: handle: %w", err)
		}
		return nil, fmt.Errorf("mcpgrain: handle: %w (%w)", app.ErrRetry, err)
	}
	r, ok := res.(*pb.HandleReply)
	if !ok {
		return nil, fmt.Errorf("mcpgrain: handle: unexpected reply %T", res)
	}
	if r.GetUnknown() {
		return nil, app.ErrUnknownHandle
	}
	return r, nil
}

// Mint implements app.Handles.
func (h *Host) Mint(ctx context.Context, p *pb.Principal) (string, error) {
	if p.GetUser() == "" {
		return "", errors.New("mcpgrain: a handle needs an authenticated caller")
	}
	id := newID()
	if err := h.count(ctx, p, id); err != nil {
		return "", err
	}
	if _, err := h.request(ctx, id, &pb.HandleCreate{Principal: p, Tool: toolOf(ctx)}); err != nil {
		if uerr := h.uncount(context.WithoutCancel(ctx), p, id); uerr != nil {
			h.cfg.Logger.Warn("a handle not created stays counted until reclaimed", "handle", id, "err", uerr)
		}
		return "", err
	}
	h.confirm(ctx, p, id)
	return id, nil
}

// Open implements app.Handles.
func (h *Host) Open(ctx context.Context, p *pb.Principal, id string) (app.Scope, error) {
	if !wellFormed(id) {
		return nil, app.ErrUnknownHandle
	}
	r, err := h.request(ctx, id, &pb.HandleOpen{Principal: p})
	if err != nil {
		return nil, err
	}
	return newScope(h, id, p, r.GetStates()), nil
}

// Drop implements app.Handles.
func (h *Host) Drop(ctx context.Context, p *pb.Principal, id string) error {
	if !wellFormed(id) {
		return app.ErrUnknownHandle
	}
	_, err := h.request(ctx, id, &pb.HandleDrop{Principal: p})
	return err
}

// Outcomes of mcpgrain_handles_total.
const (
	outcomeMinted  = "minted"
	outcomeDropped = "dropped"
	outcomeExpired = "expired"
	outcomeRefused = "refused"
)

type metrics struct {
	handles   *prometheus.CounterVec
	schedules *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{handles: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgrain_handles_total",
		Help: "Server-minted handles (the SDK's NewHandle) by outcome: minted, dropped (DropHandle), expired (idle for --handle-ttl), refused (the principal had --max-handles-per-principal).",
	}, []string{"outcome"}), schedules: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgrain_handle_schedules_total",
		Help: "Runs of the SDK's schedule callbacks on handles, by outcome: completed, failed (retried with backoff), dropped (failed its last attempt).",
	}, []string{"outcome"})}
	for _, o := range []string{outcomeMinted, outcomeDropped, outcomeExpired, outcomeRefused} {
		m.handles.WithLabelValues(o)
	}
	for _, o := range []string{app.ScheduleCompleted, app.ScheduleFailed, app.ScheduleDropped} {
		m.schedules.WithLabelValues(o)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.handles, m.schedules} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("handle: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
