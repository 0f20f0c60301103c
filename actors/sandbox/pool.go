package sandbox

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// PoolOptions configure a Pool. The zero value is usable: every zero field takes its default.
type PoolOptions struct {
	// MaxRunning is the most executions that run at once on the node (default 4×GOMAXPROCS). A fresh
	// execution beyond it waits up to SlotWait for a slot, then is refused with an *Error of Kind
	// "busy"; one with Limits.WaitForSlot waits until its context ends. Parked executions (a tool call
	// suspended with Suspend, waiting for an approval) do not count.
	MaxRunning int
	// MaxRunningPerOrg is the most executions one organization (Limits.Org; a tenant without one is
	// its own) runs at once, waited for like MaxRunning. The default, DefaultMaxRunningPerOrg, keeps a
	// quarter of the node (at least one slot) out of any one organization's reach, so that one
	// organization saturating the node leaves the others slots. Negative, or MaxRunning or more: no
	// per-organization cap (for a node that serves one organization). Executions without a tenant
	// have none either.
	MaxRunningPerOrg int
	// MaxRunningPerTenant is the most executions one Limits.Tenant runs at once (default 4). A fresh
	// execution beyond it is refused with "busy" at once (its own executions fill its cap; waiting
	// would only queue it behind itself); one with Limits.WaitForSlot waits. Executions without a
	// tenant are bounded by the node's cap only.
	MaxRunningPerTenant int
	// SlotWait is how long a fresh execution that finds the node's or its organization's cap full
	// waits for a slot before it is refused with "busy" (default 5s; negative: refused at once). A
	// freed slot goes to the waiting execution whose organization runs the fewest executions, then
	// whose tenant runs the fewest, then to the one that waited longest: an organization holding
	// many slots cannot keep a newcomer out by asking more often.
	SlotWait time.Duration
	// Spares is how many idle workers the pool keeps started, so that a Run does not wait for a
	// process to start (default 2; negative: none). They are started on the first Run, in the
	// background.
	Spares int
	// MaxIdle is the most idle workers kept for reuse after their executions (default Spares+2); a
	// worker coming back to a full idle list is retired.
	MaxIdle int
	// MaxUses retires a worker after this many executions (default 200).
	MaxUses int
	// RecycleHeap retires a worker whose heap (live and not yet collected) is above this after an
	// execution (default 128 MiB).
	RecycleHeap uint64
	// InterruptGrace is how long a worker asked to interrupt its execution (WallTime ran out, the
	// caller cancelled) may take before it is killed (default 250ms). An interrupt only acts between
	// JS instructions; a long native built-in needs the kill.
	InterruptGrace time.Duration
	// NiceAfterCPU is the CPU time after which an execution's worker lowers its own scheduling
	// priority (nice 10), so that one tenant's long busy executions yield the cores to other tenants'
	// short ones; such a worker is retired afterwards (default 1s; negative: never).
	NiceAfterCPU time.Duration
	// MaxParked is the most releasable parked executions (Limits.Release) that keep their workers
	// (default 16): beyond it the longest parked is asked to release its worker. A parked worker is
	// a whole process (tens of MiB), while a durable execution can wait minutes for an approval.
	// Negative: no bound.
	MaxParked int
	// ParkTimeout is how long a releasable execution keeps its worker while parked before it is
	// asked to release it (default 10s: a quick approval resumes on the fast path; a slow one is
	// replayed). Negative: never.
	ParkTimeout time.Duration
	// Registerer, when set, receives the pool's metrics (mcpgrain_sandbox_*). One Pool per
	// Registerer.
	Registerer prometheus.Registerer
}

// Pool defaults.
const (
	DefaultMaxRunningPerTenant = 4
	DefaultSlotWait            = 5 * time.Second
	DefaultSpares              = 2
	DefaultMaxUses             = 200
	DefaultRecycleHeap         = 128 << 20
	DefaultInterruptGrace      = 250 * time.Millisecond
	DefaultNiceAfterCPU        = time.Second
	DefaultMaxParked           = 16
	DefaultParkTimeout         = 10 * time.Second
)

// DefaultMaxRunning is the default PoolOptions.MaxRunning: 4×GOMAXPROCS.
func DefaultMaxRunning() int { return 4 * runtime.GOMAXPROCS(0) }

// DefaultMaxRunningPerOrg is the default PoolOptions.MaxRunningPerOrg for a node cap of maxRunning:
// all but a quarter of it (at least one slot stays for the other organizations), and at least 1.
func DefaultMaxRunningPerOrg(maxRunning int) int {
	return max(1, maxRunning-max(1, maxRunning/4))
}

func (o PoolOptions) withDefaults() PoolOptions {
	if o.MaxRunning <= 0 {
		o.MaxRunning = DefaultMaxRunning()
	}
	if o.MaxRunningPerOrg == 0 {
		o.MaxRunningPerOrg = DefaultMaxRunningPerOrg(o.MaxRunning)
	}
	if o.MaxRunningPerTenant <= 0 {
		o.MaxRunningPerTenant = DefaultMaxRunningPerTenant
	}
	if o.SlotWait == 0 {
		o.SlotWait = DefaultSlotWait
	}
	switch {
	case o.Spares == 0:
		o.Spares = DefaultSpares
	case o.Spares < 0:
		o.Spares = 0
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = o.Spares + 2
	}
	if o.MaxUses <= 0 {
		o.MaxUses = DefaultMaxUses
	}
	if o.RecycleHeap == 0 {
		o.RecycleHeap = DefaultRecycleHeap
	}
	if o.NiceAfterCPU == 0 {
		o.NiceAfterCPU = DefaultNiceAfterCPU
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = DefaultInterruptGrace
	}
	if o.MaxParked == 0 {
		o.MaxParked = DefaultMaxParked
	}
	if o.ParkTimeout == 0 {
		o.ParkTimeout = DefaultParkTimeout
	}
	return o
}

// Pool runs executions in worker processes: it admits them under the running caps, lends each a
// worker, and starts, reuses, retires and kills the workers. Run uses the package's default pool
// (see Configure); a Pool of one's own is for tests and for programs that want several.
type Pool struct {
	opts  PoolOptions
	caps  caps
	m     *poolMetrics
	clock clock.Clock // times SlotWait

	mu       sync.Mutex
	closed   bool
	idle     []*proc            // most recently used last
	procs    map[*proc]struct{} // every started, not yet reaped worker
	starting int                // spares being started
	use      usage              // admitted executions, not parked: in all, per tenant, per organization
	parked   int                // admitted executions whose tool call is suspended
	lot      *list.List         // releasable parked slots, longest parked first
	waiters  []*waiter          // runs waiting for a slot, in arrival order
	onWait   func()             // test hook: a run starts waiting for a slot
	onExit   func(w *proc)      // test hook: a worker was killed and reaped after an execution
	onLend   func(w *proc)      // test hook: a worker was lent to an execution
}

// NewPool returns a pool with the options. It starts nothing until the first Run.
func NewPool(opts PoolOptions) (*Pool, error) {
	opts = opts.withDefaults()
	m, err := newPoolMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Pool{opts: opts, caps: capsOf(opts), m: m, clock: clock.Real(), procs: map[*proc]struct{}{}, use: newUsage(), lot: list.New()}, nil
}

// PoolStats are a pool's counts at one moment.
type PoolStats struct {
	Idle     int // started workers waiting for an execution
	Starting int // spare workers being started
	Running  int // executions running (each holds a worker, or is about to)
	Parked   int // executions whose tool call is suspended (each holds its worker)
	Waiting  int // runs waiting for a slot
}

// Stats returns the pool's counts.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Idle: len(p.idle), Starting: p.starting, Running: p.use.running, Parked: p.parked, Waiting: len(p.waiters)}
}

// Close kills every worker, idle or running, and waits until they are reaped. Runs in flight return
// an error; later ones fail at once. It is safe to call more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	procs := make([]*proc, 0, len(p.procs))
	for w := range p.procs {
		procs = append(procs, w)
	}
	p.idle = nil
	for _, w := range p.waiters {
		close(w.ready) // not granted: the run sees the pool closed
	}
	p.waiters = nil
	p.gaugesLocked()
	p.mu.Unlock()
	for _, w := range procs {
		w.kill()
	}
	for _, w := range procs {
		<-w.exited
	}
}

// errClosed is returned by runs on a closed pool.
var errClosed = errors.New("sandbox: the sandbox is shut down")

// slot is one admitted execution's place under the caps.
type slot struct {
	p        *Pool
	claim    claim
	parked   bool
	released bool
	// releaseFn is Limits.Release (nil: the execution keeps its worker while parked); inLot is its
	// place among the releasable parked slots, timer asks it after ParkTimeout, asked is set once it
	// was asked.
	releaseFn func()
	inLot     *list.Element
	timer     *time.Timer
	asked     bool
}

// waiter is a run waiting for a slot. ready is closed when it was granted one (granted is then set,
// and the slot counted) or when the pool closed.
type waiter struct {
	claim   claim
	granted bool
	ready   chan struct{}
}

// admit takes a running slot for c: at once when the caps allow it and nobody who goes first is
// waiting, else after waiting (up to SlotWait, or until ctx ends for a replay), or it refuses with
// KindBusy.
func (p *Pool) admit(ctx context.Context, c claim, replay bool) (*slot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	if cap := p.caps.over(p.use, c); cap == capTenant && !replay {
		return nil, p.refuseLocked(cap, c)
	}
	w := &waiter{claim: c, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.dispatchLocked()
	if w.granted {
		p.mu.Unlock()
		return &slot{p: p, claim: c}, nil
	}
	cap := p.capLocked(c)
	if !replay && p.opts.SlotWait < 0 {
		p.dropLocked(w)
		return nil, p.refuseLocked(cap, c)
	}
	p.m.waited.WithLabelValues(cap).Inc()
	hook := p.onWait
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	return p.await(ctx, w, replay)
}

// await waits for w's slot: until it is granted, the pool closes, ctx ends or, unless this is a
// replay, SlotWait runs out.
func (p *Pool) await(ctx context.Context, w *waiter, replay bool) (*slot, error) {
	var expired <-chan struct{}
	if !replay {
		ch := make(chan struct{})
		t := p.clock.AfterFunc(p.opts.SlotWait, func() { close(ch) })
		defer t.Stop()
		expired = ch
	}
	var err error
	select {
	case <-w.ready:
	case <-expired:
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = &Error{Kind: KindTimeout, Message: "execution deadline exceeded while waiting for a free execution slot"}
		} else {
			err = fmt.Errorf("sandbox: execution cancelled while waiting for a free execution slot: %w", context.Cause(ctx))
		}
	}
	p.mu.Lock()
	if w.granted {
		p.mu.Unlock()
		s := &slot{p: p, claim: w.claim}
		if err != nil {
			s.release() // granted as it gave up: the slot goes to the next
			return nil, err
		}
		return s, nil
	}
	p.dropLocked(w)
	switch {
	case p.closed:
		p.mu.Unlock()
		return nil, errClosed
	case err != nil:
		p.mu.Unlock()
		return nil, err
	}
	return nil, p.refuseLocked(p.capLocked(w.claim), w.claim)
}

// dispatchLocked grants free slots to waiting runs, as the caps' pick decides, until none may run.
func (p *Pool) dispatchLocked() {
	for len(p.waiters) > 0 {
		claims := make([]claim, len(p.waiters))
		for i, w := range p.waiters {
			claims[i] = w.claim
		}
		i := p.caps.pick(p.use, claims)
		if i < 0 {
			return
		}
		w := p.waiters[i]
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.use.take(w.claim)
		w.granted = true
		close(w.ready)
	}
	p.gaugesLocked()
}

// dropLocked takes a run that gives up out of the waiting ones.
func (p *Pool) dropLocked(w *waiter) {
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.gaugesLocked()
	}
}

// capLocked returns the cap that keeps c from running now (the node's when it is only waiting its
// turn behind others).
func (p *Pool) capLocked(c claim) string {
	if cap := p.caps.over(p.use, c); cap != "" {
		return cap
	}
	return capNode
}

// refuseLocked counts a refusal, unlocks p and returns the busy error.
func (p *Pool) refuseLocked(cap string, c claim) *Error {
	p.m.refused.WithLabelValues(cap).Inc()
	p.mu.Unlock()
	switch cap {
	case capTenant:
		return &Error{Kind: KindBusy, Message: fmt.Sprintf(
			"%s is already running its maximum of %d executions at once; nothing ran, retry when one of them finishes",
			c.tenant, p.caps.tenant)}
	case capOrg:
		return &Error{Kind: KindBusy, Message: fmt.Sprintf(
			"organization %s is already running its maximum of %d executions on this node; nothing ran, retry when one of them finishes",
			c.org, p.caps.org)}
	}
	return &Error{Kind: KindBusy, Message: fmt.Sprintf(
		"this node is already running its maximum of %d executions; nothing ran, retry in a moment", p.caps.node)}
}

// park moves the execution from running to parked (its tool call waits for something that is not
// its own work): it no longer counts against the caps.
func (s *slot) park() {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.released || s.parked {
		return
	}
	s.parked = true
	p.parked++
	p.use.give(s.claim)
	if s.releaseFn != nil && !s.asked {
		s.inLot = p.lot.PushBack(s)
		if p.opts.ParkTimeout > 0 {
			s.timer = time.AfterFunc(p.opts.ParkTimeout, s.timedOut)
		}
		for p.opts.MaxParked >= 0 && p.lot.Len() > p.opts.MaxParked {
			p.askLocked(p.lot.Front().Value.(*slot), "max_parked")
		}
	}
	p.dispatchLocked()
}

// wasAsked reports whether the pool asked this execution to release its worker.
func (s *slot) wasAsked() bool {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.asked
}

// timedOut asks s to release its worker after ParkTimeout.
func (s *slot) timedOut() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.parked && !s.released && !s.asked {
		s.p.askLocked(s, "park_timeout")
	}
}

// askLocked asks a parked execution to release its worker (once).
func (p *Pool) askLocked(s *slot, why string) {
	s.asked = true
	s.leaveLotLocked()
	p.m.released.WithLabelValues(why).Inc()
	go s.releaseFn()
}

// leaveLotLocked takes s out of the releasable parked slots.
func (s *slot) leaveLotLocked() {
	if s.inLot != nil {
		s.p.lot.Remove(s.inLot)
		s.inLot = nil
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// unpark moves a parked execution back to running. It is never refused (the code was approved to go
// on), so the counts may briefly exceed the caps.
func (s *slot) unpark() {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.released || !s.parked {
		return
	}
	s.parked = false
	p.parked--
	p.use.take(s.claim)
	s.leaveLotLocked()
	p.gaugesLocked()
}

// release frees the slot (once).
func (s *slot) release() {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	s.leaveLotLocked()
	if s.parked {
		p.parked--
	} else {
		p.use.give(s.claim)
	}
	p.dispatchLocked()
}

// take lends a worker: an idle one, or a new one started now. It tops the spares up in the background.
func (p *Pool) take() (*proc, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if w.alive() {
			p.spareLocked()
			p.gaugesLocked()
			p.mu.Unlock()
			return w, nil
		}
	}
	p.spareLocked()
	p.gaugesLocked()
	p.mu.Unlock()
	return p.start()
}

// start starts a worker and registers it.
func (p *Pool) start() (*proc, error) {
	w, err := startProc()
	if err != nil {
		return nil, err
	}
	p.m.starts.Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		w.kill()
		return nil, errClosed
	}
	p.procs[w] = struct{}{}
	go func() {
		<-w.exited
		p.mu.Lock()
		delete(p.procs, w)
		p.mu.Unlock()
	}()
	return w, nil
}

// spareLocked starts spares in the background until Spares are idle or starting.
func (p *Pool) spareLocked() {
	for !p.closed && len(p.idle)+p.starting < p.opts.Spares {
		p.starting++
		go func() {
			w, err := p.start()
			p.mu.Lock()
			defer p.mu.Unlock()
			p.starting--
			if err == nil {
				p.idleLocked(w)
			}
			p.gaugesLocked()
		}()
	}
}

// idleLocked adds a clean worker to the idle list, or retires it when the list is full.
func (p *Pool) idleLocked(w *proc) {
	if p.closed || len(p.idle) >= p.opts.MaxIdle {
		p.m.killed.WithLabelValues(killRecycled).Inc()
		w.kill()
		return
	}
	p.idle = append(p.idle, w)
}

// put takes a worker back after a clean execution that left heap bytes in it: it is reused unless it
// is due for retirement.
func (p *Pool) put(w *proc, heap uint64, niced bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.uses++
	if niced || w.uses >= p.opts.MaxUses || heap > p.opts.RecycleHeap || !w.alive() {
		p.m.killed.WithLabelValues(killRecycled).Inc()
		w.kill()
	} else {
		p.idleLocked(w)
	}
	p.spareLocked()
	p.gaugesLocked()
}

// discard kills a worker that must not be reused and waits until it is reaped, so that nothing of
// the execution outlives Run. reason labels the metric.
func (p *Pool) discard(w *proc, reason string) {
	p.m.killed.WithLabelValues(reason).Inc()
	w.kill()
	<-w.exited
	p.mu.Lock()
	hook := p.onExit
	p.spareLocked()
	p.gaugesLocked()
	p.mu.Unlock()
	if hook != nil {
		hook(w)
	}
}

// gaugesLocked publishes the worker counts.
func (p *Pool) gaugesLocked() {
	p.m.workers.WithLabelValues("idle").Set(float64(len(p.idle)))
	p.m.workers.WithLabelValues("starting").Set(float64(p.starting))
	p.m.workers.WithLabelValues("running").Set(float64(p.use.running))
	p.m.workers.WithLabelValues("parked").Set(float64(p.parked))
	p.m.workers.WithLabelValues("waiting").Set(float64(len(p.waiters)))
}

// Reasons a worker was killed or retired, as metric labels.
const (
	killTimeout   = "timeout"   // WallTime or the caller's deadline ran out
	killCancelled = "cancelled" // the caller cancelled
	killMemory    = "memory"    // the memory watchdog or the OS backstop ended it
	killCrash     = "crash"     // it died unexpectedly
	killError     = "error"     // the parent stopped it: a Host panic, a protocol error
	killShutdown  = "shutdown"  // the pool was closed under it
	killRecycled  = "recycled"  // a clean worker retired (uses, heap, priority, idle list full)
)

// poolMetrics are the pool's Prometheus metrics.
type poolMetrics struct {
	workers  *prometheus.GaugeVec
	refused  *prometheus.CounterVec
	waited   *prometheus.CounterVec
	killed   *prometheus.CounterVec
	starts   prometheus.Counter
	released *prometheus.CounterVec
}

func newPoolMetrics(reg prometheus.Registerer) (*poolMetrics, error) {
	m := &poolMetrics{
		workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgrain_sandbox_workers",
			Help: "Sandbox executions and worker processes by state: idle and starting workers, running and parked (suspended tool call) executions, executions waiting for a slot.",
		}, []string{"state"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_sandbox_refused_total",
			Help: "Executions refused with a busy error, by the cap they hit (tenant, org, node).",
		}, []string{"cap"}),
		waited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_sandbox_waited_total",
			Help: "Executions that waited for a free slot before running or being refused, by the cap that held them when they started waiting (tenant, org, node).",
		}, []string{"cap"}),
		killed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_sandbox_workers_killed_total",
			Help: "Worker processes ended by the node, by reason (timeout, cancelled, memory, crash, error, shutdown, recycled).",
		}, []string{"reason"}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpgrain_sandbox_worker_starts_total",
			Help: "Worker processes started.",
		}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgrain_sandbox_parked_released_total",
			Help: "Parked executions asked to give their worker back (a durable execution is re-run by replay when its wait is over), by reason (park_timeout, max_parked).",
		}, []string{"reason"}),
	}
	// Every label value is exposed from the start (at 0), so a dashboard
	// and an alert see the series before the first event.
	for _, c := range []string{capTenant, capOrg, capNode} {
		m.refused.WithLabelValues(c)
		m.waited.WithLabelValues(c)
	}
	for _, r := range []string{killTimeout, killCancelled, killMemory, killCrash, killError, killShutdown, killRecycled} {
		m.killed.WithLabelValues(r)
	}
	for _, r := range []string{"park_timeout", "max_parked"} {
		m.released.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.workers, m.refused, m.waited, m.killed, m.starts, m.released} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("sandbox: registering metrics: %w", err)
			}
		}
	}
	return m, nil
}

// The package's default pool, used by Run.
var (
	defaultMu   sync.Mutex
	defaultPool *Pool
)

// pool returns the default pool, creating it with default options on first use.
func pool() *Pool {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultPool == nil {
		defaultPool, _ = NewPool(PoolOptions{}) // no Registerer: cannot fail
	}
	return defaultPool
}

// Configure replaces the default pool (the one Run uses) by one with opts, closing the previous one
// (its runs in flight fail). Call it once at startup, before the first Run; without it, Run uses a
// pool with default options and no metrics.
func Configure(opts PoolOptions) error {
	np, err := NewPool(opts)
	if err != nil {
		return err
	}
	defaultMu.Lock()
	old := defaultPool
	defaultPool = np
	defaultMu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Shutdown closes the default pool: every worker is killed, runs in flight return an error and later
// runs fail. A node calls it when it stops, so that no execution outlives it.
func Shutdown() {
	pool().Close()
}

// DefaultPool returns the pool Run uses, for its Stats.
func DefaultPool() *Pool { return pool() }
