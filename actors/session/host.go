package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// KindName is the session grain kind.
const KindName = exchange.KindSession

// Reminder names a session uses.
const (
	ReminderIdle     = "idle"
	ReminderExpiry   = "expiry"
	reminderApproval = "approval:"
)

// DefaultSessionTTL ends a session this long after its last activity.
const DefaultSessionTTL = 30 * 24 * time.Hour

// DefaultTombstoneRetention keeps an ended session's tombstone this long.
const DefaultTombstoneRetention = time.Hour

// Config configures the session grains of one node.
type Config struct {
	// Builder builds session runtimes (required).
	Builder Builder
	// Policy is the idle policy. Zero: alarm.DefaultPolicy().
	Policy alarm.Policy
	// SessionTTL ends (tombstones) a session idle this long. Default 30 days.
	SessionTTL time.Duration
	// TombstoneRetention is how long an ended session's tombstone stays in
	// the store before the grain is deleted (either way its id answers
	// 404). Default 1h.
	TombstoneRetention time.Duration
	// Residency is the node's soft cap and eviction grace (defaults 32, 15s).
	// With Memory.Budget set, the soft cap is derived from memory instead
	// (Residency.SoftCap is then only the starting value).
	Residency residency.Config
	// Memory sizes residency by a memory budget: the soft cap follows from
	// the memory a resident runtime is measured to take (residency.Memory).
	// Zero: the fixed Residency.SoftCap.
	Memory residency.Memory
	// Directory publishes paused executions (nil: not published).
	Directory Directory
	// Approvers is who may decide paused executions (policy.Approvers;
	// "": policy.ApproversMember).
	Approvers policy.Approvers
	// Evict asks a session on this node to give up its runtime and reports
	// whether it did (required; the host calls it in a goroutine of its
	// own). EvictThrough(c) sends RequestCapEviction through the node's
	// grain.Cluster c.
	Evict func(ctx context.Context, sessionID string) (evicted bool, err error)
	// SessionlessStreams is the number of open response streams of the
	// node's sessionless (2026-07-28) grains, counted in
	// mcpgrain_active_streams with the sessions' (nil: none).
	SessionlessStreams func() int
	// Clock is the time source. Default the system clock.
	Clock clock.Clock
	// CloseTimeout bounds Runtime.Close. Default 10s.
	CloseTimeout time.Duration
	// Logger logs lifecycle events. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the session metrics (with the node label added
	// by the caller). Default: a private registry.
	Registerer prometheus.Registerer
}

// Host holds what the session grains of one node share: the residency
// registry, the runtime builder, the policy and the metrics (executor's
// isolate-scoped module state).
type Host struct {
	cfg      Config
	registry *residency.Registry
	metrics  *metrics
	log      *slog.Logger

	// mu guards residents and all, the resident runtimes the gauges walk:
	// all in no order (a removal moves the last one into its place), so a
	// scrape copies it under mu, a memmove, and walks the copy outside it
	// (every build adds and every disposal removes under mu).
	mu        sync.Mutex
	residents map[string]*resident
	all       []*resident
	// countsMu serialises counts, which owns snap (all's copy, kept
	// between scrapes).
	countsMu sync.Mutex
	snap     []*resident

	parked atomic.Int64 // standalone streams parked on sessions without a runtime
	primes atomic.Uint64

	sizing  *sizing  // nil: fixed soft cap
	trim    *trimmer // nil: fixed soft cap
	evictor *residency.Evictor
}

// primeID returns a fresh id for a standalone stream's priming event
// (exchange.PrimeID, with the node's counter for ties).
func (h *Host) primeID() string { return exchange.PrimeID(h.primes.Add(1)) }

// resident is what the node knows of one resident runtime.
type resident struct {
	rt     Runtime
	leases atomic.Int32
	// posts counts POST exchanges from the grain turn that starts them to
	// the end of their handler. The runtime counts them too, but only once
	// the handler's goroutine runs: a cap eviction or idle decision in the
	// turn right after the start would not see them and would close the
	// runtime under the request (which then answered 404).
	posts atomic.Int32
	// decided counts executions handed a decision and not settled yet
	// (the lifecycle machine's handedOver): they are about to run, so they pin.
	decided atomic.Int32
	at      int32 // index in Host.all (under Host.mu)
}

// streams is the number of POST exchanges in flight.
func (r *resident) streams() int { return max(int(r.posts.Load()), r.rt.ActiveStreams()) }

func (r *resident) canEvict() bool {
	return r.leases.Load() == 0 && r.decided.Load() == 0 && r.streams() == 0 && r.rt.PausedExecutions() == 0 && r.rt.RunningExecutions() == 0
}

// NewHost returns the session host of a node.
func NewHost(cfg Config) (*Host, error) {
	if cfg.Builder == nil || cfg.Evict == nil {
		return nil, errors.New("session: Config.Builder and Config.Evict are required")
	}
	switch {
	case cfg.Approvers.Valid():
	default:
		return nil, fmt.Errorf("session: Config.Approvers %q: want %q or %q", cfg.Approvers, policy.ApproversMember, policy.ApproversAdmin)
	}
	if cfg.Policy == (alarm.Policy{}) {
		cfg.Policy = alarm.DefaultPolicy()
	}
	if cfg.TombstoneRetention <= 0 {
		cfg.TombstoneRetention = DefaultTombstoneRetention
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if err := cfg.Residency.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	h := &Host{cfg: cfg, registry: residency.New(cfg.Residency), log: cfg.Logger, residents: map[string]*resident{}}
	h.metrics = newMetrics(cfg.Registerer, h)
	h.evictor = &residency.Evictor{Evict: cfg.Evict, Done: h.evicted}
	if cfg.Memory.Budget > 0 {
		h.sizing = newSizing(cfg.Memory)
		h.trim = &trimmer{reg: h.registry, clock: cfg.Clock, evict: h.evictor.Request,
			resize: h.resize, interval: trimInterval, perTick: trimPerTick}
		h.resize(cfg.Clock.Now())
	}
	return h, nil
}

// resize re-measures the memory-derived soft cap (at most every
// sizingInterval) and, when it fell under the resident runtimes, starts
// trimming them down to it.
func (h *Host) resize(now time.Time) {
	if h.sizing.resize(h.registry, now) {
		h.trim.kick()
	}
}

// Kind returns the session grain kind to register on the node.
func (h *Host) Kind() grain.Kind {
	return grain.Kind{
		Name: KindName,
		New: func(id string) grain.Grain {
			return &session{h: h, id: id, m: newMachine(&h.cfg)}
		},
		// Sessions passivate from their own idle alarm (an in-memory timer), not the grain runtime's idle timeout.
		// They exist once created: a request for an unknown (or guessed)
		// id answers "not found" without writing to the store.
		CreatedByWrite: true,
		// An initialize names a new session id (the gateway draws it):
		// its activation has no row to look for.
		Creates: func(first proto.Message) bool {
			x, ok := first.(*pb.HttpExchange)
			return ok && x.GetCreate()
		},
	}
}

// Registry exposes the node's residency registry (tests, debugging).
func (h *Host) Registry() *residency.Registry { return h.registry }

type countsView struct {
	residency.Counts
	Streams, Paused, Running, Leases int
}

// counts walks the resident runtimes outside h.mu (on a copy taken under
// it), so a scrape at 250,000 runtimes does not hold up the builds that
// add theirs (residency.Registry.Counts does the same for its entries).
func (h *Host) counts() countsView {
	c := countsView{Counts: h.registry.Counts(h.cfg.Clock.Now())}
	if h.cfg.SessionlessStreams != nil {
		c.Streams += h.cfg.SessionlessStreams()
	}
	h.countsMu.Lock()
	defer h.countsMu.Unlock()
	h.mu.Lock()
	h.snap = append(h.snap[:0], h.all...)
	h.mu.Unlock()
	for _, r := range h.snap {
		c.Streams += r.rt.OpenStreams()
		c.Paused += r.rt.PausedExecutions()
		c.Paused += r.rt.DurablePausedExecutions() // parked here, though they pin nothing
		c.Running += r.rt.RunningExecutions()
		c.Leases += int(r.leases.Load())
	}
	clear(h.snap) // no disposed runtime kept reachable until the next scrape
	return c
}

func (h *Host) addResident(id string, r *resident) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.residents[id]; old != nil {
		r.at, h.all[old.at] = old.at, r
	} else {
		r.at = int32(len(h.all))
		h.all = append(h.all, r)
	}
	h.residents[id] = r
}

func (h *Host) removeResident(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.residents[id]
	if r == nil {
		return
	}
	delete(h.residents, id)
	last := h.all[len(h.all)-1]
	last.at, h.all[r.at] = r.at, last
	h.all[len(h.all)-1] = nil
	h.all = h.all[:len(h.all)-1]
}

// requestEviction asks the candidate to evict itself, without blocking the
// cold build that chose it (residency.Evictor: bounded, a panic of Evict
// is a failure). A failure leaves it registered; the registry's grace
// window makes the next admission pick another candidate.
// ctx's trace context goes with the request: the candidate links to it).
func (h *Host) requestEviction(ctx context.Context, id string) { h.evictor.RequestFrom(ctx, id) }

// evicted counts (and logs a failed) eviction request.
func (h *Host) evicted(id string, r residency.EvictResult, err error) {
	h.metrics.evictReqs.WithLabelValues(string(r)).Inc()
	if err != nil {
		h.log.Warn("mcp_session_cap_eviction_request_failed", "session", id, "err", err)
	}
}

func principalEqual(a, b *pb.Principal) bool {
	return a.GetUser() == b.GetUser() && a.GetOrg() == b.GetOrg()
}
