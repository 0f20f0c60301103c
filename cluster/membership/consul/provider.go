package consul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// Provider is a [membership.Provider] backed by a Consul agent. Make one
// with [New]; it serves one Start/Stop cycle.
type Provider struct {
	cfg       Config
	log       *slog.Logger
	client    *api.Client
	transport *http.Transport

	// life is cancelled by Stop; it bounds every goroutine and request.
	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // refresher and watcher

	mu         sync.Mutex
	state      state
	self       membership.Member
	reg        *api.AgentServiceRegistration
	registered bool // Start succeeded, so Stop deregisters

	// Event queue, drained by the dispatcher goroutine.
	qmu      sync.Mutex
	queue    []membership.Event
	qstopped bool
	wake     chan struct{}
	notify   func(membership.Event)

	// resetMu guards the watch reset request raised by the refresher.
	resetMu     sync.Mutex
	watchReset  bool
	watchCancel context.CancelFunc
	watchKick   chan struct{} // wakes the watch from its error backoff

	// beforeRefresh, when set (tests only, before Start), runs at the start
	// of every refresher iteration; blocking in it simulates a process that
	// is frozen (SIGSTOP) while Consul keeps running.
	beforeRefresh func(ctx context.Context)
}

type state int

const (
	idle state = iota
	starting
	running
	stopped
)

var _ membership.Provider = (*Provider)(nil)

// errStopped is returned by Start once Stop has been called.
var errStopped = errors.New("consul membership: provider stopped")

// New returns a provider for cfg with defaults applied, or an error naming
// the invalid setting. It does not contact Consul; [Provider.Start] does.
func New(cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ac := api.DefaultConfig() // honours CONSUL_HTTP_TOKEN, CONSUL_CACERT, ...
	ac.Address = cfg.Address
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("consul membership: client for %s: %w", cfg.Address, err)
	}
	life, cancel := context.WithCancel(context.Background())
	return &Provider{
		cfg:       cfg,
		log:       cfg.Logger.With("consul", cfg.Address, "service", cfg.ClusterName),
		client:    client,
		transport: ac.Transport,
		life:      life,
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
		watchKick: make(chan struct{}, 1),
	}, nil
}

// Config returns the provider's configuration with defaults applied.
func (p *Provider) Config() Config { return p.cfg }

// Start implements [membership.Provider]. It registers self as a service
// instance of Config.ClusterName with a TTL check, retrying with backoff
// until registration succeeds or ctx ends; then it keeps passing the check,
// re-registers whenever the agent has forgotten it, and watches the
// members, delivering events to notify from one goroutine. A provider
// starts once; Start may be called again only after it returned an error.
func (p *Provider) Start(ctx context.Context, self membership.Member, notify func(membership.Event)) error {
	if notify == nil {
		return errors.New("consul membership: Start needs a notify function")
	}
	if err := validateMember(self); err != nil {
		return fmt.Errorf("consul membership: cannot register member %q: %w", self.ID, err)
	}
	self.Kinds, self.Meta = slices.Clone(self.Kinds), cloneMeta(self.Meta)
	p.mu.Lock()
	switch p.state {
	case stopped:
		p.mu.Unlock()
		return errStopped
	case starting, running:
		p.mu.Unlock()
		return errors.New("consul membership: Start called twice")
	}
	p.state = starting
	p.self = self
	p.reg = registration(p.cfg.ClusterName, self, p.cfg.TTL, p.cfg.DeregisterCriticalAfter)
	p.notify = notify
	p.mu.Unlock()

	// Registration is bounded by ctx and aborted by Stop.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	stopAbort := context.AfterFunc(p.life, rcancel)
	defer stopAbort()

	sent, err := p.registerUntil(rctx)
	if err != nil {
		p.mu.Lock()
		if p.state == starting {
			p.state = idle // a later Start may try again
		}
		p.mu.Unlock()
		if p.life.Err() != nil {
			return errStopped
		}
		return err
	}
	// The check starts out passing; pass it once more right away so the
	// lease is fresh even if registration was slow.
	if s, err := p.passTTL(rctx); err == nil {
		sent = s
	}

	p.mu.Lock()
	if p.state != starting { // Stop ran meanwhile
		p.mu.Unlock()
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.requestTimeout())
		defer dcancel()
		_ = p.deregister(dctx)
		return errStopped
	}
	p.state, p.registered = running, true
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.refreshLoop(p.life, sent) }()
	go func() { defer p.wg.Done(); p.watchLoop(p.life) }()
	go p.dispatchLoop(p.life)
	p.mu.Unlock()
	p.log.Info("registered in consul", "member", self.ID, "address", self.Address, "ttl", p.cfg.TTL)
	return nil
}

// registerUntil registers until success, a non-retryable refusal, or the end
// of ctx. It returns when the successful request was sent.
func (p *Provider) registerUntil(ctx context.Context) (time.Time, error) {
	bo := backoff{base: backoffMin, max: backoffMax}
	fl := failureLog{log: p.log, what: "consul registration", attrs: []any{"member", p.self.ID}}
	var lastErr error
	for {
		sent := p.cfg.Now()
		err := p.register(ctx)
		if err == nil {
			fl.ok()
			return sent, nil
		}
		if ctx.Err() == nil || lastErr == nil {
			lastErr = err
		}
		if !retryable(err) {
			return time.Time{}, p.startError(err)
		}
		fl.fail(err)
		if !sleep(ctx, bo.next()) {
			return time.Time{}, p.startError(lastErr)
		}
	}
}

// startError explains why Start could not register.
func (p *Provider) startError(err error) error {
	var se api.StatusError
	if errors.As(err, &se) {
		return fmt.Errorf("consul membership: consul agent at %s refused to register member %q in service %q: %w",
			p.cfg.Address, p.self.ID, p.cfg.ClusterName, err)
	}
	return fmt.Errorf("consul membership: cannot reach consul agent at %s to register member %q: %w (is the agent running? set --consul)",
		p.cfg.Address, p.self.ID, err)
}

// retryable reports whether a failed request may succeed later: transport
// errors, timeouts, 5xx and 429 may; other refusals (bad request, ACL) will
// not.
func retryable(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests || se.Code == http.StatusRequestTimeout
	}
	return true
}

// register sends the service registration once.
func (p *Provider) register(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.requestTimeout())
	defer cancel()
	return p.client.Agent().ServiceRegisterOpts(p.reg, api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(rctx))
}

// passTTL passes the TTL check once and returns when the request was sent
// (the lease starts no earlier than that).
func (p *Provider) passTTL(ctx context.Context) (time.Time, error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.requestTimeout())
	defer cancel()
	sent := p.cfg.Now()
	err := p.client.Agent().UpdateTTLOpts(checkID(p.self.ID), "", api.HealthPassing, (&api.QueryOptions{}).WithContext(rctx))
	return sent, err
}

func (p *Provider) deregister(ctx context.Context) error {
	return p.client.Agent().ServiceDeregisterOpts(p.self.ID, (&api.QueryOptions{}).WithContext(ctx))
}

// Stop implements [membership.Provider]: it stops the goroutines, then
// deregisters the service (bounded by ctx; an error is returned but the
// provider is stopped regardless). After Stop returns no new event is
// delivered; a notify call already under way may still be running, so
// notify may itself call Stop. Stop is idempotent and safe whether or not
// Start ran or succeeded.
func (p *Provider) Stop(ctx context.Context) error {
	p.mu.Lock()
	prev := p.state
	p.state = stopped
	registered := p.registered
	p.mu.Unlock()
	if prev == stopped {
		return nil
	}
	p.qmu.Lock()
	p.qstopped, p.queue = true, nil
	p.qmu.Unlock()
	p.cancel()
	p.wg.Wait()
	defer p.transport.CloseIdleConnections()
	if !registered {
		return nil
	}
	if err := p.deregister(ctx); err != nil {
		p.log.Warn("consul deregistration failed; the registration expires on its own", "member", p.self.ID, "err", err,
			"critical_after", p.cfg.TTL, "removed_after", p.cfg.DeregisterCriticalAfter)
		return fmt.Errorf("consul membership: deregister %q from consul agent at %s: %w", p.self.ID, p.cfg.Address, err)
	}
	p.log.Info("deregistered from consul", "member", p.self.ID)
	return nil
}

// emit queues e for delivery. Consecutive views coalesce: only the newest
// pending view matters.
func (p *Provider) emit(e membership.Event) {
	p.qmu.Lock()
	if p.qstopped {
		p.qmu.Unlock()
		return
	}
	if n := len(p.queue); n > 0 && !e.Suspect && !p.queue[n-1].Suspect {
		p.queue[n-1] = e
	} else {
		p.queue = append(p.queue, e)
	}
	p.qmu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// dispatchLoop calls notify for queued events, in order, without holding
// any lock, so a slow notify delays only later events.
func (p *Provider) dispatchLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		for {
			p.qmu.Lock()
			if p.qstopped || len(p.queue) == 0 {
				p.qmu.Unlock()
				break
			}
			e := p.queue[0]
			p.queue = p.queue[1:]
			p.qmu.Unlock()
			p.notify(e)
		}
	}
}

// refreshLoop passes the TTL check every RefreshInterval, re-registers when
// the agent no longer knows the check, and raises Suspect when the lease
// lapsed. lastPass is when the last successful pass was sent.
func (p *Provider) refreshLoop(ctx context.Context, lastPass time.Time) {
	bo := backoff{base: backoffMin, max: p.cfg.RefreshInterval}
	fl := failureLog{log: p.log, what: "consul TTL refresh", attrs: []any{"member", p.self.ID}}
	suspected := false
	delay := p.cfg.RefreshInterval
	for {
		if !sleep(ctx, delay) {
			return
		}
		if p.beforeRefresh != nil {
			p.beforeRefresh(ctx)
			if ctx.Err() != nil {
				return
			}
		}
		if lapsed := p.cfg.Now().Sub(lastPass); !suspected && lapsed > p.cfg.TTL {
			suspected = true
			p.log.Warn("liveness lease lapsed: other members may have dropped this member; its activations must be dropped",
				"member", p.self.ID, "since_last_pass", lapsed.Round(time.Millisecond), "ttl", p.cfg.TTL)
			p.emit(membership.Event{Suspect: true})
		}
		sent, err := p.passTTL(ctx)
		var se api.StatusError
		if err != nil && errors.As(err, &se) && ctx.Err() == nil {
			// The agent answered but refused: it has lost the check
			// (restarted — a dev agent forgets everything — or reaped us
			// after DeregisterCriticalAfter). Register again.
			sent = p.cfg.Now()
			if rerr := p.register(ctx); rerr != nil {
				err = fmt.Errorf("pass TTL: %w; re-register: %w", err, rerr)
			} else {
				p.log.Info("re-registered in consul: the agent had lost the registration", "member", p.self.ID, "ttl_err", err)
				err = nil
				// An agent that lost our registration lost the others'
				// too: make the watch start over and hold members back
				// while they re-register.
				p.resetWatch()
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			fl.fail(err)
			delay = bo.next()
			continue
		}
		fl.ok()
		bo.reset()
		lastPass, suspected, delay = sent, false, p.cfg.RefreshInterval
	}
}

// resetWatch makes the watch abandon its current blocking query, start over
// with a fresh read and treat it as a discontinuity.
func (p *Provider) resetWatch() {
	p.resetMu.Lock()
	defer p.resetMu.Unlock()
	p.watchReset = true
	if p.watchCancel != nil {
		p.watchCancel()
	}
	select {
	case p.watchKick <- struct{}{}:
	default:
	}
}

// watchState is what the watch carries from one query to the next.
type watchState struct {
	index     uint64
	bo        backoff
	fl        failureLog
	hold      holdDown
	published membership.View
	delivered bool // the first event (a view with self) was emitted
	lastHeld  []string
	forced    bool // a reset was requested; the next answer is a discontinuity
}

// watchLoop follows the passing instances of the service with blocking
// queries and publishes changed views.
func (p *Provider) watchLoop(ctx context.Context) {
	w := &watchState{
		bo:   backoff{base: backoffMin, max: backoffMax},
		fl:   failureLog{log: p.log, what: "consul watch"},
		hold: holdDown{period: p.cfg.RemovalHoldDown},
	}
	health := p.client.Health()
	for {
		wait := p.cfg.WatchWait
		if rem := w.hold.remaining(p.cfg.Now()); rem > 0 && rem < wait {
			// Wake up when the hold-down ends to drop members still missing.
			wait = max(rem, minQueryGap)
		}
		begin := time.Now()
		entries, meta, reset, err := p.watchQuery(ctx, health, w, wait)
		if ctx.Err() != nil {
			return
		}
		if reset {
			continue // start over at once with a fresh read
		}
		if err != nil {
			if !p.watchFailed(ctx, w, err) {
				return
			}
			continue
		}
		now := p.cfg.Now()
		unchanged, stale := p.watchAdvance(w, meta.LastIndex, now)
		if !stale {
			p.watchPublish(w, entries, now)
		}
		gap := minChangedQueryGap
		if unchanged || w.index == 0 {
			gap = minQueryGap
		}
		if !sleep(ctx, gap-time.Since(begin)) {
			return
		}
	}
}

// watchQuery asks Consul for the passing instances, blocking up to wait
// for a change since w.index; reset reports that a reset was requested
// meanwhile (the answer is to be dropped).
func (p *Provider) watchQuery(ctx context.Context, health *api.Health, w *watchState, wait time.Duration) (entries []*api.ServiceEntry, meta *api.QueryMeta, reset bool, err error) {
	p.resetMu.Lock()
	if p.watchReset {
		p.watchReset, w.forced, w.index = false, true, 0
	}
	// Consul may add wait/16 of jitter; beyond that plus a margin the
	// agent is hung (e.g. stopped), and we give up on the request.
	qctx, cancel := context.WithTimeout(ctx, wait+wait/16+p.cfg.requestTimeout())
	p.watchCancel = cancel
	p.resetMu.Unlock()
	entries, meta, err = health.Service(p.cfg.ClusterName, "", true, (&api.QueryOptions{WaitIndex: w.index, WaitTime: wait}).WithContext(qctx))
	p.resetMu.Lock()
	p.watchCancel = nil
	reset = p.watchReset
	p.resetMu.Unlock()
	cancel()
	return entries, meta, reset, err
}

// watchFailed handles a failed query: it keeps the last good view (an
// unreachable agent says nothing about the members) and waits out the
// backoff, or until the refresher reaches the agent again. Once it
// answers again it may be another agent (restarted, its index lower than
// ours, which would block until WatchWait), so the watch starts over with
// a fresh read. It returns false when ctx ends.
func (p *Provider) watchFailed(ctx context.Context, w *watchState, err error) bool {
	w.fl.fail(err)
	w.index = 0
	t := time.NewTimer(w.bo.next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-p.watchKick: // the refresher reached the agent again
	case <-t.C:
	}
	return true
}

// watchAdvance moves the watch to Consul's index last after a good
// answer, opening the hold-down on a discontinuity (the first answer
// after failures, a reset, an index that went backwards). It reports
// whether the index is unchanged, and whether the answer is stale: its
// index went backwards, so it is older than what was published (an agent
// whose streaming view lags the servers answers so: Consul v1.14's agent
// did for minutes on a loaded machine while its subscription failed) and
// the fresh read that follows replaces it.
//
// A blocking query that came back unchanged is followed by one fresh read
// (index 0: the agent asks the servers, not its streaming view) before
// the watch blocks again, so a view that missed a change is corrected
// within one WatchWait instead of never.
func (p *Provider) watchAdvance(w *watchState, last uint64, now time.Time) (unchanged, stale bool) {
	w.bo.reset()
	discontinuity := w.fl.ok() || w.forced
	w.forced = false
	next := max(last, 1) // an index of 0 would never block
	unchanged = next == w.index
	if next < w.index {
		// The index went backwards (agent restart, state reset, a lagging
		// view): start over with a fresh non-blocking query.
		p.log.Info("consul index went backwards; resetting the watch", "from", w.index, "to", next)
		next, discontinuity, stale = 0, true, true
	}
	if unchanged {
		next = 0
	}
	w.index = next
	if discontinuity {
		w.hold.open(now)
	}
	return unchanged, stale
}

// watchPublish emits the view of entries, with members held during the
// hold-down, when it is the first with this node or differs from the last
// one emitted.
func (p *Provider) watchPublish(w *watchState, entries []*api.ServiceEntry, now time.Time) {
	fresh, skipped := viewFromEntries(entries)
	if skipped > 0 {
		p.log.Debug("ignored consul entries that are not members", "count", skipped)
	}
	v, held := mergeHeld(w.published, fresh, w.hold.remaining(now) > 0)
	if !slices.Equal(held, w.lastHeld) {
		if len(held) > 0 {
			p.log.Info("members missing from consul after a discontinuity are held in the view",
				"held", held, "hold_down_left", w.hold.remaining(now).Round(time.Millisecond))
		}
		w.lastHeld = held
	}
	if (!w.delivered && v.Contains(p.self.ID)) || (w.delivered && !v.Equal(w.published)) {
		w.delivered = true
		w.published = v
		p.emit(membership.Event{View: v})
	}
}

func cloneMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
