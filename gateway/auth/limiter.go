package auth

import (
	"math"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// DefaultMaxPrincipals is [LimiterOptions.MaxPrincipals]'s default.
const DefaultMaxPrincipals = 100000

// maxRate: more than one token per nanosecond is unlimited.
const maxRate = 1e9

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
// keyed by org and user (kept as a pair so no two principals collide), has
// its own bucket of Burst tokens refilled at Rate tokens per second (a
// golang.org/x/time/rate limiter); each allowed request takes one. The
// buckets live in a bounded LRU cache (hashicorp/golang-lru).
//
// The limit is per node: a principal whose requests a load balancer
// spreads over N nodes gets up to N × Rate requests per second (and N ×
// Burst at once) from the cluster; one that keeps its connection to one
// node gets Rate. Set the rate to the cluster's budget divided by N for a
// cluster-wide bound.
//
// A Limiter is safe for concurrent use.
type Limiter struct {
	unlimited bool
	rate      rate.Limit
	burst     int
	now       func() time.Time
	buckets   *lru.Cache[principalKey, *rate.Limiter]
}

type principalKey struct{ org, user string }

// NewLimiter returns a Limiter configured by opts.
func NewLimiter(opts LimiterOptions) *Limiter {
	l := &Limiter{now: opts.Now}
	if l.now == nil {
		l.now = time.Now
	}
	r := opts.Rate
	if !(r > 0) || r >= maxRate {
		l.unlimited = true
		return l
	}
	l.rate = rate.Limit(r)
	l.burst = opts.Burst
	if l.burst <= 0 {
		l.burst = max(1, int(math.Ceil(r)))
	}
	size := opts.MaxPrincipals
	if size <= 0 {
		size = DefaultMaxPrincipals
	}
	l.buckets, _ = lru.New[principalKey, *rate.Limiter](size) // only errors for a size <= 0
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
	b, found := l.buckets.Get(key)
	if !found {
		b = rate.NewLimiter(l.rate, l.burst)
		if prev, raced, _ := l.buckets.PeekOrAdd(key, b); raced {
			b = prev
		}
	}
	now := l.now()
	if b.AllowN(now, 1) { // a refusal takes nothing
		return true, 0
	}
	return false, l.wait(b.TokensAt(now))
}

// wait is how long a bucket holding tokens (< 1) takes to earn one.
func (l *Limiter) wait(tokens float64) time.Duration {
	secs := (1 - tokens) / float64(l.rate)
	if secs*float64(time.Second) >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(secs * float64(time.Second))) // the nearest ns: float dust is not a wait
}

// Len returns the number of principals the limiter currently tracks (at
// most [LimiterOptions.MaxPrincipals]; 0 when limiting is disabled).
func (l *Limiter) Len() int {
	if l.unlimited {
		return 0
	}
	return l.buckets.Len()
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
