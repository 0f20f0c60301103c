package session

import (
	"sync"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// The trimmer's pace: a soft cap lowered by 12,000 under the resident
// runtimes (the 3-node run of issue 29: ~26,000 resident, a derived cap
// of 13,750) is reached in about three minutes, each eviction a
// passivation write, never more than trimPerTick of them at once.
const (
	trimInterval = time.Second
	trimPerTick  = 64
)

// trimmer asks the resident runtimes over a soft cap that was lowered
// under them (a node sizing residency by memory measures its runtimes
// bigger than it assumed) to evict themselves, a few every tick, least
// recently active first: residency.Registry.Trim chooses them, the
// trimmer only carries it out. It ticks on the clock while the registry
// is over its cap and is idle otherwise (no timer armed).
type trimmer struct {
	reg      *residency.Registry
	clock    clock.Clock
	resize   func(now time.Time) // measures and sets the cap (nil: a fixed cap)
	evict    func(id string)     // sends the eviction request, without waiting
	interval time.Duration
	perTick  int

	mu    sync.Mutex
	armed bool
}

// kick arms the next tick, unless one is armed.
func (t *trimmer) kick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed {
		return
	}
	t.armed = true
	t.clock.AfterFunc(t.interval, t.tick)
}

// tick re-measures the cap, asks up to perTick runtimes over it to go and
// arms the next tick while the registry is still over its cap.
func (t *trimmer) tick() {
	t.mu.Lock()
	t.armed = false
	t.mu.Unlock()
	now := t.clock.Now()
	if t.resize != nil {
		t.resize(now)
	}
	ids, over := t.reg.Trim(now, t.perTick)
	for _, id := range ids {
		t.evict(id)
	}
	if over {
		t.kick()
	}
}
