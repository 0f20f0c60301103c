package auth

import (
	"container/list"
	"math"
	"strconv"
	"sync"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// DefaultMaxPrincipals is [LimiterOptions.MaxPrincipals]'s default.
const DefaultMaxPrincipals = 100000

// Bounds that keep the limiter's nanosecond arithmetic far from overflow.
const (
	maxRate  = 1e9     // more than one token per nanosecond is unlimited
	maxBurst = 1 << 30 // larger bursts are clamped
	maxSpan  = 1 << 60 // ~36 years: cap on burst × interval
)

// LimiterOptions configure a [Limiter].
type LimiterOptions struct {
	// Rate is the tokens per second each principal earns. Zero (or less, or
	// NaN, or at least 1e9) disables limiting: Allow always succeeds.
	Rate float64
	// Burst is the bucket size: how many requests a principal that has been
	// idle may make at once. Default (0 or less) max(1, ceil(Rate)).
	Burst int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxPrincipals bounds memory: beyond this many principals the least
	// recently used buckets are forgotten (a forgotten principal starts
	// again with a full bucket). Default (0 or less) [DefaultMaxPrincipals].
	MaxPrincipals int
}

// Limiter is a per-principal token-bucket rate limiter. Each principal,
// keyed by org and user (org+"/"+user, kept as a pair so no two principals
// collide), has its own bucket of Burst tokens refilled at Rate tokens per
// second; each allowed request takes one.
//
// The bucket is kept in the equivalent GCRA form, a single "theoretical
// arrival time" per principal in integer nanoseconds, so refills are exact
// and a bucket costs one small allocation.
//
// A Limiter is safe for concurrent use.
type Limiter struct {
	unlimited bool
	// interval is the time to earn one token; tolerance is burst×interval,
	// the time to fill an empty bucket.
	interval, tolerance int64
	now                 func() time.Time
	epoch               time.Time
	maxPrincipals       int

	mu      sync.Mutex
	buckets map[principalKey]*list.Element // values are *bucket
	lru     list.List                      // front: most recently used
}

type principalKey struct{ org, user string }

type bucket struct {
	key principalKey
	// tat is the theoretical arrival time in ns since the epoch: the bucket
	// holds (now-tat+tolerance)/interval tokens, capped at burst, and is
	// full once tat <= now.
	tat int64
}

// NewLimiter returns a Limiter configured by opts.
func NewLimiter(opts LimiterOptions) *Limiter {
	l := &Limiter{now: opts.Now, maxPrincipals: opts.MaxPrincipals}
	if l.now == nil {
		l.now = time.Now
	}
	if l.maxPrincipals <= 0 {
		l.maxPrincipals = DefaultMaxPrincipals
	}
	rate := opts.Rate
	if !(rate > 0) || rate >= maxRate {
		l.unlimited = true
		return l
	}
	burst := opts.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(rate)))
	}
	burst = min(burst, maxBurst)
	interval := math.Round(float64(time.Second) / rate)
	interval = max(1, min(interval, float64(maxSpan/burst)))
	l.interval = int64(interval)
	l.tolerance = l.interval * int64(burst)
	l.epoch = l.now()
	l.buckets = make(map[principalKey]*list.Element)
	return l
}

// Allow takes one token from p's bucket. If the bucket is empty it takes
// nothing and returns false and how long until a token will be available.
// A nil p is treated like a principal with empty org and user.
func (l *Limiter) Allow(p *pb.Principal) (ok bool, retryAfter time.Duration) {
	if l.unlimited {
		return true, 0
	}
	key := principalKey{org: p.GetOrg(), user: p.GetUser()}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := int64(l.now().Sub(l.epoch))
	var b *bucket
	if e, found := l.buckets[key]; found {
		l.lru.MoveToFront(e)
		b = e.Value.(*bucket)
	} else {
		b = &bucket{key: key, tat: now} // full
		l.buckets[key] = l.lru.PushFront(b)
		for len(l.buckets) > l.maxPrincipals {
			oldest := l.lru.Back()
			l.lru.Remove(oldest)
			delete(l.buckets, oldest.Value.(*bucket).key)
		}
	}
	tat := max(b.tat, now)
	next := tat + l.interval
	if allowAt := next - l.tolerance; now < allowAt {
		return false, time.Duration(allowAt - now)
	}
	b.tat = next
	return true, 0
}

// Len returns the number of principals the limiter currently tracks (at
// most [LimiterOptions.MaxPrincipals]; 0 when limiting is disabled).
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// RetryAfterSeconds formats d for a 429 response's Retry-After header
// (RFC 9110 §10.2.3 delay-seconds): d rounded up to whole seconds, at least
// 1, since a client told "0" would retry at once into the same refusal.
func RetryAfterSeconds(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return strconv.FormatInt(max(s, 1), 10)
}
