package auth

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// testClock is a manual clock that, unlike a real one, may also be moved
// backwards.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Unix(1_700_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func principal(org, user string) *pb.Principal { return &pb.Principal{Org: org, User: user} }

// step is one action in a limiter script: advance the clock, then call
// Allow for the principal and check the answer.
type step struct {
	advance   time.Duration
	who       *pb.Principal
	ok        bool
	retry     time.Duration
	repeat    int // run the step this many times (default 1); advance only before the first
	wantLen   int // if > 0, Len() after the step
	label     string
	skipRetry bool
}

func runSteps(t *testing.T, opts LimiterOptions, steps []step) {
	t.Helper()
	c := newTestClock()
	opts.Now = c.Now
	l := NewLimiter(opts)
	for i, s := range steps {
		c.Advance(s.advance)
		for n := range max(s.repeat, 1) {
			ok, retry := l.Allow(s.who)
			if ok != s.ok || (!s.skipRetry && retry != s.retry) {
				t.Fatalf("step %d %s (#%d): Allow(%s/%s) = %v, %v; want %v, %v",
					i, s.label, n, s.who.GetOrg(), s.who.GetUser(), ok, retry, s.ok, s.retry)
			}
		}
		if s.wantLen > 0 && l.Len() != s.wantLen {
			t.Fatalf("step %d %s: Len = %d, want %d", i, s.label, l.Len(), s.wantLen)
		}
	}
}

func TestLimiter(t *testing.T) {
	a := principal("acme", "alice")
	b := principal("acme", "bob")
	tests := []struct {
		name  string
		opts  LimiterOptions
		steps []step
	}{
		{
			name: "burst then deny with retryAfter",
			opts: LimiterOptions{Rate: 2, Burst: 3},
			steps: []step{
				{who: a, ok: true, repeat: 3, label: "burst"},
				{who: a, ok: false, retry: 500 * time.Millisecond, label: "empty"},
				{who: a, ok: false, retry: 500 * time.Millisecond, label: "denials take nothing"},
				{advance: 499 * time.Millisecond, who: a, ok: false, retry: time.Millisecond},
				{advance: time.Millisecond, who: a, ok: true, label: "one refilled"},
				{who: a, ok: false, retry: 500 * time.Millisecond},
			},
		},
		{
			name: "refill over time, capped at burst",
			opts: LimiterOptions{Rate: 10, Burst: 5},
			steps: []step{
				{who: a, ok: true, repeat: 5},
				{who: a, ok: false, retry: 100 * time.Millisecond},
				{advance: 250 * time.Millisecond, who: a, ok: true, repeat: 2, label: "2.5 tokens"},
				{who: a, ok: false, retry: 50 * time.Millisecond},
				{advance: time.Hour, who: a, ok: true, repeat: 5, label: "idle refills to burst"},
				{who: a, ok: false, retry: 100 * time.Millisecond, label: "but no further"},
			},
		},
		{
			name: "steady rate",
			opts: LimiterOptions{Rate: 4, Burst: 1},
			steps: []step{
				{who: a, ok: true},
				{advance: 250 * time.Millisecond, who: a, ok: true},
				{advance: 250 * time.Millisecond, who: a, ok: true},
				{advance: 200 * time.Millisecond, who: a, ok: false, retry: 50 * time.Millisecond},
				{advance: 50 * time.Millisecond, who: a, ok: true},
			},
		},
		{
			name: "default burst is ceil(rate)",
			opts: LimiterOptions{Rate: 2.5},
			steps: []step{
				{who: a, ok: true, repeat: 3},
				{who: a, ok: false, retry: 400 * time.Millisecond},
			},
		},
		{
			name: "default burst is at least 1",
			opts: LimiterOptions{Rate: 0.5},
			steps: []step{
				{who: a, ok: true},
				{who: a, ok: false, retry: 2 * time.Second},
				{advance: 1500 * time.Millisecond, who: a, ok: false, retry: 500 * time.Millisecond},
				{advance: 500 * time.Millisecond, who: a, ok: true},
			},
		},
		{
			name: "independent principals",
			opts: LimiterOptions{Rate: 1, Burst: 2},
			steps: []step{
				{who: a, ok: true, repeat: 2},
				{who: a, ok: false, retry: time.Second},
				{who: b, ok: true, repeat: 2, label: "bob unaffected"},
				{who: b, ok: false, retry: time.Second},
				{who: principal("other", "alice"), ok: true, repeat: 2, label: "same user, other org"},
				{who: principal("acme/x", "y"), ok: true, repeat: 2},
				{who: principal("acme", "x/y"), ok: true, repeat: 2, label: "no org/user collision"},
				{who: principal("acme", "x/y"), ok: false, retry: time.Second},
			},
		},
		{
			name: "role does not matter",
			opts: LimiterOptions{Rate: 1, Burst: 1},
			steps: []step{
				{who: &pb.Principal{Org: "acme", User: "alice", Role: RoleAdmin}, ok: true},
				{who: &pb.Principal{Org: "acme", User: "alice", Role: RoleMember}, ok: false, retry: time.Second},
			},
		},
		{
			name:  "rate 0 is unlimited",
			opts:  LimiterOptions{Rate: 0, Burst: 1},
			steps: []step{{who: a, ok: true, repeat: 10000}},
		},
		{
			name:  "negative rate is unlimited",
			opts:  LimiterOptions{Rate: -1},
			steps: []step{{who: a, ok: true, repeat: 1000}},
		},
		{
			name:  "NaN rate is unlimited",
			opts:  LimiterOptions{Rate: math.NaN()},
			steps: []step{{who: a, ok: true, repeat: 1000}},
		},
		{
			name:  "infinite rate is unlimited",
			opts:  LimiterOptions{Rate: math.Inf(1)},
			steps: []step{{who: a, ok: true, repeat: 1000}},
		},
		{
			name: "tiny rate does not overflow",
			opts: LimiterOptions{Rate: 1e-15, Burst: 2},
			steps: []step{
				{who: a, ok: true, repeat: 2},
				{who: a, ok: false, skipRetry: true},
				{advance: 24 * time.Hour, who: a, ok: false, skipRetry: true},
			},
		},
		{
			name: "nil principal has a bucket",
			opts: LimiterOptions{Rate: 1, Burst: 1},
			steps: []step{
				{who: nil, ok: true},
				{who: nil, ok: false, retry: time.Second},
				{who: principal("", ""), ok: false, retry: time.Second},
			},
		},
		{
			// A clock that steps back earns nothing until it is past the
			// bucket's last update again (x/time/rate); nothing
			// overflows or panics. (time.Now is monotonic: only an
			// injected clock can do this.)
			name: "clock going backwards",
			opts: LimiterOptions{Rate: 1, Burst: 1},
			steps: []step{
				{who: a, ok: true},
				{advance: -10 * time.Second, who: a, ok: false, skipRetry: true},
				{advance: 10 * time.Second, who: a, ok: false, retry: time.Second},
				{advance: time.Second, who: a, ok: true},
			},
		},
		{
			name: "LRU eviction bound",
			opts: LimiterOptions{Rate: 0.001, Burst: 1, MaxPrincipals: 2},
			steps: []step{
				{who: a, ok: true, wantLen: 1},
				{who: b, ok: true, wantLen: 2},
				{who: a, ok: false, retry: 1000 * time.Second, wantLen: 2, label: "alice now most recent"},
				{who: principal("acme", "carol"), ok: true, wantLen: 2, label: "evicts bob, the least recent"},
				{who: a, ok: false, retry: 1000 * time.Second, wantLen: 2, label: "alice kept"},
				{who: b, ok: true, wantLen: 2, label: "bob forgotten: full bucket again; evicts carol"},
				{who: principal("acme", "carol"), ok: true, wantLen: 2, label: "carol forgotten; evicts alice"},
				{who: a, ok: true, wantLen: 2, label: "alice forgotten"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.opts, tt.steps) })
	}
}

func TestLimiterMaxPrincipals(t *testing.T) {
	c := newTestClock()
	l := NewLimiter(LimiterOptions{Rate: 1, MaxPrincipals: 100, Now: c.Now})
	for i := range 1000 {
		if ok, _ := l.Allow(principal("o", fmt.Sprint(i))); !ok {
			t.Fatalf("principal %d denied its first request", i)
		}
		if n := l.Len(); n > 100 {
			t.Fatalf("Len = %d after %d principals, want <= 100", n, i+1)
		}
	}
	if n := l.Len(); n != 100 {
		t.Errorf("Len = %d, want 100", n)
	}
	// The most recent 100 are the ones kept.
	for i := 900; i < 1000; i++ {
		if ok, _ := l.Allow(principal("o", fmt.Sprint(i))); ok {
			t.Fatalf("recent principal %d was forgotten", i)
		}
	}

	d := NewLimiter(LimiterOptions{Rate: 1, Now: c.Now})
	for i := range DefaultMaxPrincipals + 10 {
		d.Allow(principal("o", strconv.Itoa(i)))
	}
	if n := d.Len(); n != DefaultMaxPrincipals {
		t.Errorf("default MaxPrincipals: Len = %d, want %d", n, DefaultMaxPrincipals)
	}
	if d := NewLimiter(LimiterOptions{}); d.Len() != 0 {
		t.Errorf("unlimited Len = %d", d.Len())
	}
}

// TestLimiterConcurrent checks, under -race, that concurrent callers share
// each bucket exactly: with the clock stopped, each principal gets exactly
// Burst requests through however the calls interleave.
func TestLimiterConcurrent(t *testing.T) {
	const (
		burst      = 50
		principals = 4
		goroutines = 16
		calls      = 100
	)
	c := newTestClock()
	l := NewLimiter(LimiterOptions{Rate: 1, Burst: burst, Now: c.Now})
	var allowed [principals]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				n := (g + i) % principals
				if ok, _ := l.Allow(principal("o", fmt.Sprint(n))); ok {
					allowed[n].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for n := range principals {
		if got := allowed[n].Load(); got != burst {
			t.Errorf("principal %d: %d allowed, want exactly %d", n, got, burst)
		}
	}

	// And with time moving concurrently: nothing races, and no principal
	// exceeds burst + rate × elapsed.
	l2 := NewLimiter(LimiterOptions{Rate: 1000, Burst: 10, Now: c.Now, MaxPrincipals: 3})
	var total atomic.Int64
	start := c.Now()
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				if g == 0 && i%10 == 0 {
					c.Advance(time.Millisecond)
				}
				if ok, _ := l2.Allow(principal("o", "same")); ok {
					total.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := c.Now().Sub(start)
	if limit := 10 + int64(elapsed/time.Millisecond); total.Load() > limit {
		t.Errorf("%d allowed in %v, want at most %d", total.Load(), elapsed, limit)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{500 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{time.Hour, "3600"},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// BenchmarkLimiterAllow measures Allow from parallel callers over many
// principals (the /mcp hot path: every request takes one token).
func BenchmarkLimiterAllow(b *testing.B) {
	for _, principals := range []int{1, 1000, 200000} {
		b.Run(fmt.Sprintf("principals=%d", principals), func(b *testing.B) {
			l := NewLimiter(LimiterOptions{Rate: 1e6, Burst: 1e6, MaxPrincipals: 100000})
			ps := make([]*pb.Principal, principals)
			for i := range ps {
				ps[i] = principal("o", fmt.Sprint(i))
			}
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(n.Add(1)) * 7919
				for pb.Next() {
					l.Allow(ps[i%len(ps)])
					i++
				}
			})
		})
	}
}
