package residency

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSoftCap is the soft cap on resident session runtimes per node used
// when [Config.SoftCap] is 0 (executor's RESIDENT_RUNTIME_SOFT_CAP).
const DefaultSoftCap = 32

// DefaultEvictionGrace is how long an entry that was asked to evict itself is
// skipped by later picks, used when [Config.EvictionGrace] is 0 (executor's
// EVICTION_REQUEST_GRACE_MS).
const DefaultEvictionGrace = 15 * time.Second

// Config configures a [Registry]. The zero value is valid and means the
// defaults.
type Config struct {
	// SoftCap is the number of resident runtimes plus in-flight cold builds
	// at which an admission starts asking the least-recently-active
	// evictable runtime to evict itself. It is soft: when nothing is
	// evictable the build proceeds anyway. 0 means [DefaultSoftCap];
	// negative is invalid.
	SoftCap int
	// EvictionGrace is how long after an eviction request an entry is
	// skipped by [Registry.Pick] and [Registry.Admit] (an entry requested at
	// t is eligible again from t+EvictionGrace). 0 means
	// [DefaultEvictionGrace]; negative is invalid.
	EvictionGrace time.Duration
}

// Validate reports whether c is usable. [New] panics on a config that does
// not validate, so callers building a Config from flags or the environment
// should call Validate first.
func (c Config) Validate() error {
	if c.SoftCap < 0 {
		return fmt.Errorf("residency: SoftCap must be >= 0 (0 means %d), got %d", DefaultSoftCap, c.SoftCap)
	}
	if c.EvictionGrace < 0 {
		return fmt.Errorf("residency: EvictionGrace must be >= 0 (0 means %s), got %s", DefaultEvictionGrace, c.EvictionGrace)
	}
	return nil
}

// withDefaults returns c with zero fields replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.SoftCap == 0 {
		c.SoftCap = DefaultSoftCap
	}
	if c.EvictionGrace == 0 {
		c.EvictionGrace = DefaultEvictionGrace
	}
	return c
}

// Entry is one resident session runtime, as handed to [Registry.Register].
type Entry struct {
	// ID identifies the session grain; it must not be empty.
	ID string
	// CanEvict is the synchronous, cheap eviction prefilter: it reports
	// false while the runtime has open streams or paused/running
	// executions. [Registry.Admit], [Registry.Pick] and [Registry.Trim] call it with the
	// registry's lock held, from whichever goroutine calls them, so it
	// must be safe for concurrent use, must not block, and must not call
	// back into the Registry (that deadlocks). [Registry.Counts] calls it
	// outside the lock on a snapshot of the entries, so it may also be
	// called just after the entry's [Registry.Release]. A panic in it is
	// recovered and counts as false. nil means always evictable. A wrong
	// true is harmless: the grain re-checks itself when it receives the
	// eviction request.
	CanEvict func() bool
}

// Admission is the result of [Registry.Admit].
type Admission struct {
	// Slot is the cold-build reservation taken by the admission. It is
	// never nil; the caller must Release it exactly when the build ends,
	// whichever way it ends (Release is idempotent).
	Slot *Slot
	// OverCap reports whether resident runtimes plus in-flight builds
	// (before this reservation) had reached the soft cap.
	OverCap bool
	// Evict is the id of the session grain to send an eviction request
	// to, or "" when none was chosen. The registry has already marked it
	// eviction-requested at the admission's time.
	Evict string
	// Overflow reports that the admission was over the cap and no entry
	// was evictable. The build proceeds anyway.
	Overflow bool
}

// Counts is a snapshot of a [Registry], for metrics and span attributes.
type Counts struct {
	// Resident is the number of registered runtimes.
	Resident int
	// Peak is the largest Resident ever reached.
	Peak int
	// InFlightBuilds is the number of reserved, unreleased cold-build slots.
	InFlightBuilds int
	// Evictable is the number of entries whose CanEvict reports true.
	Evictable int
	// Pinned is the number of entries whose CanEvict reports false (or
	// panics). Evictable + Pinned == Resident.
	Pinned int
	// EvictionPending is the number of entries asked to evict within the
	// grace window. It overlaps Evictable and Pinned.
	EvictionPending int
	// CanEvictPanics is the cumulative number of recovered panics in
	// CanEvict callbacks (a counter, not a gauge).
	CanEvictPanics int
	// SoftCap is the soft cap in force.
	SoftCap int
}

// entry is the registry's record of one resident runtime.
type entry struct {
	id           string
	canEvict     func() bool
	lastActivity time.Time
	seq          uint64 // registration order; breaks lastActivity ties
	// requestedAt is when the entry was last asked to evict (nil: never).
	// It is written under the registry's lock and read by
	// [Registry.Counts] outside it.
	requestedAt atomic.Pointer[time.Time]
	elem        *list.Element // in Registry.lru
	at          int           // index in Registry.all
}

// markRequested records an eviction request at now.
func (e *entry) markRequested(now time.Time) { e.requestedAt.Store(&now) }

// before reports whether e is less recently active than o.
func (e *entry) before(o *entry) bool {
	if !e.lastActivity.Equal(o.lastActivity) {
		return e.lastActivity.Before(o.lastActivity)
	}
	return e.seq < o.seq
}

// Registry tracks the session runtimes resident on one node and the cold
// builds in flight, and chooses eviction candidates. It never tears anything
// down itself. All methods are safe for concurrent use; times are always
// passed in.
type Registry struct {
	grace time.Duration

	mu      sync.Mutex
	cap     int
	entries map[string]*entry
	// lru holds the entries least recently active first: a pick walks it
	// from the front and stops at the first evictable entry outside its
	// grace window, so picking costs what it skips, not the number of
	// resident runtimes.
	lru *list.List
	// all holds the entries in no order (a removal moves the last one
	// into its place): [Registry.Counts] copies it under the lock, a
	// memmove, and walks the copy outside it.
	all      []*entry
	peak     int
	inFlight int
	seq      uint64
	panics   atomic.Int64

	// countsMu serialises [Registry.Counts], which owns snap: the copy of
	// all it walks, kept between calls so a scrape does not allocate.
	countsMu sync.Mutex
	snap     []*entry
}

// New returns an empty Registry. It panics if cfg does not pass
// [Config.Validate].
func New(cfg Config) *Registry {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	return &Registry{
		cap:     cfg.SoftCap,
		grace:   cfg.EvictionGrace,
		entries: make(map[string]*entry),
		lru:     list.New(),
	}
}

// Config returns the effective configuration, defaults applied.
func (r *Registry) Config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Config{SoftCap: r.cap, EvictionGrace: r.grace}
}

// SetSoftCap changes the soft cap (at least 1) for later admissions: a
// node that sizes residency by memory moves it as it measures. Resident
// runtimes over a lowered cap are not evicted at once: each later cold
// build asks one to go, as always, and [Registry.Trim], called on a tick,
// asks the excess to go a few at a time. It reports whether resident
// runtimes plus in-flight builds are over the new cap.
func (r *Registry) SetSoftCap(n int) (over bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cap = max(1, n)
	return len(r.entries)+r.inFlight > r.cap
}

// TrimScan bounds how many entries one [Registry.Trim] looks at (least
// recently active first), so a tick holds the lock for at most that many
// CanEvict calls however many runtimes are pinned.
const TrimScan = 4096

// Trim chooses up to limit entries to ask to evict, so that resident
// runtimes plus in-flight builds come down to the soft cap after it was
// lowered under them: least recently active first, among those whose
// CanEvict says yes and that were not asked within the grace window. It
// marks them eviction-requested at now and returns their ids (nil when
// not over the cap). The excess it asks for is what the cap is exceeded by
// minus the entries already asked and still inside their grace window
// that it passes on the way to its picks (they are on their way out:
// asking others in their place would evict twice as many; one asked and
// active since, further back, declined or will, and is not counted). It
// looks at no more than
// [TrimScan] entries. over reports whether the registry is still over the
// cap before these go: the caller ticks again while it is.
func (r *Registry) Trim(now time.Time, limit int) (ids []string, over bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	excess := len(r.entries) + r.inFlight - r.cap
	if excess <= 0 {
		return nil, false
	}
	scanned := 0
	for el := r.lru.Front(); el != nil && excess > 0 && len(ids) < limit && scanned < TrimScan; el = el.Next() {
		scanned++
		e := el.Value.(*entry)
		switch {
		case r.pendingLocked(e, now):
			excess--
		case r.canEvictLocked(e):
			e.markRequested(now)
			ids = append(ids, e.id)
			excess--
		}
	}
	return ids, true
}

// Admit is called before every cold build. It always reserves a build slot
// and returns it in the Admission. If resident runtimes plus in-flight builds
// (counted before this reservation) reach the soft cap, it picks the
// least-recently-active entry that can be evicted and is not inside its
// grace window, marks it eviction-requested at now and returns its id in
// Evict; if there is none it sets Overflow. At most one candidate is chosen
// per admission. Admit never blocks on the cap and never fails: the caller
// sends the candidate its eviction request and builds regardless.
func (r *Registry) Admit(now time.Time) Admission {
	slot := &Slot{r: r}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := Admission{Slot: slot, OverCap: len(r.entries)+r.inFlight >= r.cap}
	r.inFlight++
	if !a.OverCap {
		return a
	}
	if e := r.pickLocked(now); e != nil {
		e.markRequested(now)
		a.Evict = e.id
	} else {
		a.Overflow = true
	}
	return a
}

// Slot is a cold-build reservation returned by [Registry.Admit]. It counts
// as an in-flight build until released.
type Slot struct {
	r        *Registry
	released atomic.Bool
}

// Release ends the reservation. It is idempotent and safe for concurrent
// use: however many times and from however many exit paths it is called
// (success, failure, panic, cancellation), the in-flight count drops exactly
// once. Release on a nil Slot does nothing.
func (s *Slot) Release() {
	if s == nil || s.r == nil || !s.released.CompareAndSwap(false, true) {
		return
	}
	s.r.mu.Lock()
	if s.r.inFlight > 0 {
		s.r.inFlight--
	}
	s.r.mu.Unlock()
}

// Register records a successfully built runtime as resident with its last
// activity at now, raising the peak if needed. Registering an id that is
// already registered replaces its entry (new CanEvict, activity now, no
// pending eviction request) without counting it twice. It panics if e.ID is
// empty.
func (r *Registry) Register(e Entry, now time.Time) {
	if e.ID == "" {
		panic("residency: Register with an empty ID")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	en := &entry{id: e.ID, canEvict: e.CanEvict, lastActivity: now, seq: r.seq}
	if old := r.entries[e.ID]; old != nil {
		r.lru.Remove(old.elem)
		en.at, r.all[old.at] = old.at, en
	} else {
		en.at = len(r.all)
		r.all = append(r.all, en)
	}
	r.entries[e.ID] = en
	r.place(en)
	if n := len(r.entries); n > r.peak {
		r.peak = n
	}
}

// place puts e in the LRU order by its last activity: at the back, unless
// an entry there is more recent (activity reported out of order), then
// right after the last one that is not.
func (r *Registry) place(e *entry) {
	at := r.lru.Back()
	for at != nil && e.before(at.Value.(*entry)) {
		at = at.Prev()
	}
	if at == nil {
		e.elem = r.lru.PushFront(e)
		return
	}
	e.elem = r.lru.InsertAfter(e, at)
}

// Touch records activity of a resident runtime at now. It does nothing for
// an unregistered id, and never moves an entry's last activity backwards
// (so concurrent callers with slightly out-of-order clocks are harmless).
func (r *Registry) Touch(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil && now.After(e.lastActivity) {
		e.lastActivity = now
		r.move(e)
	}
}

// move puts e, in the LRU order already, where place would put it once
// removed — without a new list element (every request touches its
// runtime).
func (r *Registry) move(e *entry) {
	at := r.lru.Back()
	for at != nil && (at == e.elem || e.before(at.Value.(*entry))) {
		at = at.Prev()
	}
	if at == nil {
		r.lru.MoveToFront(e.elem)
		return
	}
	r.lru.MoveAfter(e.elem, at)
}

// Release records that a runtime was disposed: it removes the entry and
// decrements the resident count. It is idempotent and reports whether id
// was registered, so a repeated or late release never decrements twice.
func (r *Registry) Release(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return false
	}
	r.lru.Remove(e.elem)
	delete(r.entries, id)
	last := r.all[len(r.all)-1]
	last.at, r.all[e.at] = e.at, last
	r.all[len(r.all)-1] = nil
	r.all = r.all[:len(r.all)-1]
	return true
}

// MarkEvictionRequested records that id was asked to evict itself at now,
// so picks skip it until now+EvictionGrace. It does nothing for an
// unregistered id. [Registry.Admit] already marks the candidate it returns;
// this is for callers that use [Registry.Pick] directly.
func (r *Registry) MarkEvictionRequested(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.markRequested(now)
	}
}

// Pick returns the eviction candidate at now without marking it: the entry
// with the oldest last activity (ties: earliest registered) among those
// whose CanEvict reports true and that were not asked to evict less than
// EvictionGrace before now. ok is false when there is no candidate, which
// is a legal answer.
func (r *Registry) Pick(now time.Time) (id string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.pickLocked(now); e != nil {
		return e.id, true
	}
	return "", false
}

// pickLocked is Pick with r.mu held. It is allocation-free: it walks the
// entries least recently active first and calls CanEvict until one says
// yes.
func (r *Registry) pickLocked(now time.Time) *entry {
	for el := r.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		if !r.pendingLocked(e, now) && r.canEvictLocked(e) {
			return e
		}
	}
	return nil
}

// pendingLocked reports whether e is inside its eviction grace window
// (r.grace does not change: Counts calls it without the lock).
func (r *Registry) pendingLocked(e *entry, now time.Time) bool {
	at := e.requestedAt.Load()
	return at != nil && now.Sub(*at) < r.grace
}

// canEvictLocked runs e's prefilter; a panic counts as false. Counts calls
// it without the lock (e.canEvict does not change once registered).
func (r *Registry) canEvictLocked(e *entry) (ok bool) {
	if e.canEvict == nil {
		return true
	}
	defer func() {
		if recover() != nil {
			r.panics.Add(1)
			ok = false
		}
	}()
	return e.canEvict()
}

// Resident is the number of registered runtimes (Counts' Resident without
// calling anything: for hot paths).
func (r *Registry) Resident() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Counts returns a snapshot of the registry at now. It calls every entry's
// CanEvict (it costs what the number of resident runtimes does: for
// metrics, not for request paths) — outside the registry's lock: under it
// it only copies the entries' pointers, so a scrape at 250,000 resident
// runtimes holds up admissions for a memmove, not for 250,000 calls.
// Resident is the snapshot's size, so Evictable + Pinned == Resident;
// concurrent calls take turns.
func (r *Registry) Counts(now time.Time) Counts {
	r.countsMu.Lock()
	defer r.countsMu.Unlock()
	c := r.snapshot()
	for _, e := range r.snap {
		if r.canEvictLocked(e) {
			c.Evictable++
		} else {
			c.Pinned++
		}
		if r.pendingLocked(e, now) {
			c.EvictionPending++
		}
	}
	clear(r.snap) // no disposed runtime kept reachable until the next scrape
	c.CanEvictPanics = int(r.panics.Load())
	return c
}

// snapshot copies the entries into r.snap and returns the counts kept as
// numbers, under the registry's lock (r.countsMu held).
func (r *Registry) snapshot() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snap = append(r.snap[:0], r.all...)
	return Counts{
		Resident:       len(r.all),
		Peak:           r.peak,
		InFlightBuilds: r.inFlight,
		SoftCap:        r.cap,
	}
}
