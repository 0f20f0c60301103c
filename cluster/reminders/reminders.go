// Package reminders implements durable reminders: named timers of a grain,
// kept in the store, that fire even when the grain is passivated or the node
// that registered them died. They are mcpgrain's stand-in for Durable Object
// alarms (executor: "alarm" → reminder).
//
// Every node runs a [Service]. A node fires the reminders of the grains it
// owns under its current placement view: it polls the store for reminders due
// within a lookahead window, arms an in-memory timer for each one it owns,
// and at the due time delivers a ReminderFired message to the grain (through
// the normal request path, so a passivated grain is activated). After the
// grain acknowledges, the reminder is completed in the store: a one-shot
// reminder is deleted, a periodic one advances to its next due time in the
// future (ticks missed during an outage fire once, not as a burst). On a
// membership change the node drops timers of grains it no longer owns and
// polls at once, so the new owner picks up overdue reminders immediately.
//
// Guarantees: at least once (a failure between delivery and completion, or
// two nodes with diverging views, can deliver twice; handlers must be
// idempotent); never early; tardiness is measured; deliveries per node are
// bounded by Config.Concurrency.
//
// Grains use reminders through cluster/grain.Context (SetReminder,
// CancelReminders, Reminders); writes are fenced by the activation's epoch.
package reminders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// DefaultPollInterval is how often the store is scanned for due reminders
// when [Config].PollInterval is zero; a node's --reminder-poll defaults
// to it.
const DefaultPollInterval = time.Second

// Config configures a node's reminder service.
type Config struct {
	// Store holds the reminders (required).
	Store store.Store
	// Owns reports whether this node owns the grain under its current view
	// (required).
	Owns func(kind, identity string) bool
	// Deliver sends a fired reminder to its grain and waits for the
	// acknowledgement (required). A *grain.Error that is not retryable
	// means the grain refused it for good: the reminder is completed anyway.
	Deliver func(ctx context.Context, kind, identity string, fired *pb.ReminderFired) error
	// PollInterval is how often the store is scanned (zero:
	// [DefaultPollInterval]).
	PollInterval time.Duration
	// Lookahead loads reminders due this far ahead. Default 2×PollInterval.
	Lookahead time.Duration
	// BatchLimit bounds one scan. Default 50000.
	BatchLimit int
	// Concurrency bounds deliveries in flight. Default 64.
	Concurrency int
	// DeliveryTimeout bounds one delivery. Default 10s.
	DeliveryTimeout time.Duration
	// Clock is the time source. Default the system clock.
	Clock clock.Clock
	// Logger logs failures. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics. Default: not registered.
	Registerer prometheus.Registerer
}

// Service schedules and fires one node's reminders.
type Service struct {
	cfg     Config
	metrics *metrics
	sem     chan struct{}

	mu        sync.Mutex
	scheduled map[key]*entry
	// doneBefore[k] = s: results of polls numbered below s must ignore k
	// (they may have read the row before its completion was written).
	doneBefore map[key]uint64
	pollSeq    uint64
	pollTimer  clock.Timer
	polling    bool
	repoll     bool
	stopped    bool
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	warnedAt   time.Time
}

type key struct{ grain, name string }

type entry struct {
	r        store.Reminder
	timer    clock.Timer
	inflight bool
	seq      uint64 // pollSeq when scheduled
}

// New returns a stopped service; call [Service.Start].
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Owns == nil || cfg.Deliver == nil {
		return nil, errors.New("reminders: Store, Owns and Deliver are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Lookahead <= 0 {
		cfg.Lookahead = 2 * cfg.PollInterval
	}
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = 50000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{
		cfg:        cfg,
		metrics:    newMetrics(cfg.Registerer),
		sem:        make(chan struct{}, cfg.Concurrency),
		scheduled:  map[key]*entry{},
		doneBefore: map[key]uint64{},
		ctx:        ctx,
		cancel:     cancel,
	}, nil
}

// Start begins polling.
func (s *Service) Start() { s.PollNow() }

// Stop stops polling and timers and waits (bounded by ctx) for deliveries
// in flight.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	if s.pollTimer != nil {
		s.pollTimer.Stop()
	}
	for k, e := range s.scheduled {
		if e.timer != nil {
			e.timer.Stop()
		}
		delete(s.scheduled, k)
	}
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("reminders: deliveries still in flight: %w", ctx.Err())
	}
}

// SplitKey splits a grain key into kind and identity.
func SplitKey(g string) (kind, identity string, ok bool) {
	return strings.Cut(g, "/")
}

// ceilMilli rounds t up to the millisecond the store keeps, so a reminder
// never fires before the time it was registered for.
func ceilMilli(t time.Time) time.Time {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return time.UnixMilli(ms)
}

// Register creates or replaces reminders of the grain (kind, identity),
// fenced by the caller's activation epoch, and arms them here at once if
// they are due soon. Name must be unique within the grain.
func (s *Service) Register(ctx context.Context, kind, identity string, epoch uint64, rs ...store.Reminder) error {
	g := grain.Key(kind, identity)
	norm := make([]store.Reminder, len(rs))
	for i, r := range rs {
		r.Grain, r.DueAt = g, ceilMilli(r.DueAt)
		norm[i] = r
	}
	stored, err := s.cfg.Store.RegisterReminders(ctx, g, epoch, norm)
	if err != nil {
		return err
	}
	s.Applied(kind, identity, stored, nil, false)
	return nil
}

// Applied arms here the reminders of the grain (kind, identity) that a
// store transaction of its activation set (as stored, with versions) and
// disarms the ones it cancelled — by name, or, with others, every one set
// does not name (store.Writes; a name both set and cancelled was set).
func (s *Service) Applied(kind, identity string, set []store.Reminder, cancelled []string, others bool) {
	g := grain.Key(kind, identity)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range cancelled {
		s.disarmLocked(key{g, n})
	}
	if others {
		for k := range s.scheduled {
			if k.grain == g {
				s.disarmLocked(k)
			}
		}
	}
	horizon := s.cfg.Clock.Now().Add(s.cfg.Lookahead)
	for _, r := range set {
		if !r.DueAt.After(horizon) {
			s.scheduleLocked(r)
		}
	}
}

// disarmLocked drops the timer of a cancelled reminder (one firing now
// completes against a version that no longer exists).
func (s *Service) disarmLocked(k key) {
	if e, ok := s.scheduled[k]; ok && !e.inflight {
		e.timer.Stop()
		delete(s.scheduled, k)
	}
}

// Cancel deletes reminders of the grain by name, fenced by epoch, and
// disarms them here.
func (s *Service) Cancel(ctx context.Context, kind, identity string, epoch uint64, names ...string) error {
	g := grain.Key(kind, identity)
	if err := s.cfg.Store.CancelReminders(ctx, g, epoch, names...); err != nil {
		return err
	}
	s.Applied(kind, identity, nil, names, false)
	return nil
}

// List returns the grain's reminders.
func (s *Service) List(ctx context.Context, kind, identity string) ([]store.Reminder, error) {
	return s.cfg.Store.Reminders(ctx, grain.Key(kind, identity))
}

// Rebalance drops timers of grains this node no longer owns and polls at
// once so reminders of grains it gained fire without waiting. Call it on
// every membership view change.
func (s *Service) Rebalance() {
	s.mu.Lock()
	for k, e := range s.scheduled {
		kind, id, _ := SplitKey(k.grain)
		if !e.inflight && !s.cfg.Owns(kind, id) {
			e.timer.Stop()
			delete(s.scheduled, k)
		}
	}
	s.mu.Unlock()
	s.PollNow()
}

// PollNow scans the store now (or right after a scan in progress).
func (s *Service) PollNow() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if s.polling {
		s.repoll = true
		s.mu.Unlock()
		return
	}
	if s.pollTimer != nil {
		s.pollTimer.Stop()
	}
	s.polling = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.poll()
	}()
}

func (s *Service) poll() {
	for {
		s.mu.Lock()
		s.pollSeq++
		seq := s.pollSeq
		now := s.cfg.Clock.Now()
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.PollInterval+5*time.Second)
		rows, err := s.cfg.Store.DueReminders(ctx, now.Add(s.cfg.Lookahead), s.cfg.BatchLimit)
		cancel()
		if err != nil && s.ctx.Err() == nil {
			s.metrics.pollErrors.Inc()
			s.warn("poll reminders", err)
		}

		s.mu.Lock()
		if err == nil {
			s.applyLocked(rows, seq, now)
		}
		if s.stopped {
			s.polling = false
			s.mu.Unlock()
			return
		}
		if s.repoll {
			s.repoll = false
			s.mu.Unlock()
			continue
		}
		s.polling = false
		s.pollTimer = s.cfg.Clock.AfterFunc(s.cfg.PollInterval, s.PollNow)
		s.mu.Unlock()
		return
	}
}

func (s *Service) applyLocked(rows []store.Reminder, seq uint64, now time.Time) {
	seen := make(map[key]bool, len(rows))
	for _, r := range rows {
		k := key{r.Grain, r.Name}
		if d, ok := s.doneBefore[k]; ok && seq < d {
			continue
		}
		kind, id, ok := SplitKey(r.Grain)
		if !ok || !s.cfg.Owns(kind, id) {
			continue
		}
		seen[k] = true
		s.scheduleLocked(r)
	}
	for k, d := range s.doneBefore {
		if seq >= d {
			delete(s.doneBefore, k)
		}
	}
	// Armed reminders that should have shown up in this scan but did not
	// were cancelled or completed elsewhere.
	horizon := now.Add(s.cfg.Lookahead)
	for k, e := range s.scheduled {
		if !seen[k] && !e.inflight && e.seq < seq && !e.r.DueAt.After(horizon) {
			e.timer.Stop()
			delete(s.scheduled, k)
		}
	}
	s.metrics.scheduled.Set(float64(len(s.scheduled)))
}

// scheduleLocked arms r if this node owns its grain, unless the same or a
// newer version is already armed or in flight.
func (s *Service) scheduleLocked(r store.Reminder) {
	k := key{r.Grain, r.Name}
	if kind, id, ok := SplitKey(r.Grain); !ok || !s.cfg.Owns(kind, id) {
		return
	}
	if e, ok := s.scheduled[k]; ok {
		// Keep what is armed unless r replaces it (a newer version). A
		// newer version may arrive while the old one is being delivered
		// (the grain re-arms from its handler); the old delivery then
		// neither completes nor disarms it.
		if r.Version <= e.r.Version {
			return
		}
		if !e.inflight {
			e.timer.Stop()
		}
	}
	e := &entry{r: r, seq: s.pollSeq}
	if delay := r.DueAt.Sub(s.cfg.Clock.Now()); delay > 0 {
		e.timer = s.cfg.Clock.AfterFunc(delay, func() { s.fire(k, r.Version) })
	} else {
		e.timer = firedTimer{}
		s.wg.Add(1) // counted like a delivery, so that Stop (and a test waiting for quiet) waits for it
		go func() {
			defer s.wg.Done()
			s.fire(k, r.Version) // overdue: fire now
		}()
	}
	s.scheduled[k] = e
}

// firedTimer stands in for the timer of an overdue reminder fired at once.
type firedTimer struct{}

func (firedTimer) Stop() bool { return false }

func (s *Service) fire(k key, version int64) {
	s.mu.Lock()
	e, ok := s.scheduled[k]
	if !ok || e.r.Version != version || e.inflight || s.stopped {
		s.mu.Unlock()
		return
	}
	now := s.cfg.Clock.Now()
	if now.Before(e.r.DueAt) { // timers may fire a little early; never deliver early
		e.timer = s.cfg.Clock.AfterFunc(e.r.DueAt.Sub(now), func() { s.fire(k, version) })
		s.mu.Unlock()
		return
	}
	e.inflight = true
	r := e.r
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		defer func() { <-s.sem }()
		s.deliver(k, r)
	}()
}

func (s *Service) deliver(k key, r store.Reminder) {
	kind, id, _ := SplitKey(r.Grain)
	firedAt := s.cfg.Clock.Now()
	s.metrics.tardiness.Observe(firedAt.Sub(r.DueAt).Seconds())
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DeliveryTimeout)
	err := s.cfg.Deliver(ctx, kind, id, &pb.ReminderFired{
		Name: r.Name, DueAtMs: r.DueAt.UnixMilli(), PeriodMs: r.Period.Milliseconds(), FiredAtMs: firedAt.UnixMilli(), Version: r.Version,
		LinkContext: linkContext(r.Link),
	})
	cancel()
	if err != nil {
		if ge, ok := grain.AsError(err); !ok || ge.Retryable() {
			// Leave the row: the next scan fires it again.
			s.metrics.failures.Inc()
			if s.ctx.Err() == nil {
				s.warn(fmt.Sprintf("deliver reminder %s/%s", r.Grain, r.Name), err)
			}
			s.mu.Lock()
			if e, ok := s.scheduled[k]; ok && e.r.Version == r.Version {
				delete(s.scheduled, k)
			}
			s.mu.Unlock()
			return
		}
		// The grain refused it for good: complete it like a delivery.
		s.cfg.Logger.Debug("reminder refused by its grain; completing it", "grain", r.Grain, "name", r.Name, "err", err)
	}
	s.metrics.fired.WithLabelValues(kind).Inc()
	var next time.Time
	if r.Period > 0 {
		next = nextDue(r.DueAt, r.Period, s.cfg.Clock.Now())
	}
	cctx, ccancel := context.WithTimeout(s.ctx, 10*time.Second)
	completed, cerr := s.cfg.Store.CompleteReminder(cctx, r.Grain, r.Name, r.Version, next)
	ccancel()
	if cerr != nil && s.ctx.Err() == nil {
		s.warn("complete reminder", cerr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.scheduled[k]; ok && e.r.Version == r.Version {
		delete(s.scheduled, k)
	}
	s.doneBefore[k] = s.pollSeq + 1
	if completed && r.Period > 0 && !s.stopped && !next.After(s.cfg.Clock.Now().Add(s.cfg.Lookahead)) {
		nr := r
		nr.DueAt, nr.Version = next, r.Version+1
		s.scheduleLocked(nr)
	}
}

// nextDue is the first due time after now on due's period grid: ticks
// missed while nobody fired them collapse into the one that just fired.
func nextDue(due time.Time, period time.Duration, now time.Time) time.Time {
	next := due.Add(period)
	if !next.After(now) {
		missed := now.Sub(due) / period
		next = due.Add((missed + 1) * period)
	}
	return next
}

func (s *Service) warn(what string, err error) {
	s.mu.Lock()
	now := s.cfg.Clock.Now()
	quiet := now.Sub(s.warnedAt) < 10*time.Second
	if !quiet {
		s.warnedAt = now
	}
	s.mu.Unlock()
	if !quiet {
		s.cfg.Logger.Warn("reminders: "+what+" failed (will retry; further failures are logged at most every 10s)", "err", err)
	}
}

// linkContext is the trace context a ReminderFired carries for link, the
// traceparent of the span that set the reminder (nil for none).
func linkContext(link string) map[string]string {
	if link == "" {
		return nil
	}
	return map[string]string{"traceparent": link}
}
