package gateway

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestAdmissionPolicyAdmitsQueuesAndSheds(t *testing.T) {
	for name, tc := range map[string]struct {
		s      admitState
		want   admitVerdict
		reason string
	}{
		"under the bound":             {admitState{InFlight: 1, Limit: 2, QueueLimit: 2, CanWait: true}, admitNow, ""},
		"at the bound: queue":         {admitState{InFlight: 2, Limit: 2, QueueLimit: 2, CanWait: true}, admitQueue, ""},
		"others wait first: queue":    {admitState{InFlight: 1, Queued: 1, Limit: 2, QueueLimit: 2, CanWait: true}, admitQueue, ""},
		"queue full: shed":            {admitState{InFlight: 2, Queued: 2, Limit: 2, QueueLimit: 2, CanWait: true}, admitShed, shedQueueFull},
		"no wait: shed at once":       {admitState{InFlight: 2, Limit: 2, QueueLimit: 2}, admitShed, shedQueueFull},
		"exempt at a full queue":      {admitState{Exempt: true, InFlight: 2, Queued: 2, Limit: 2, QueueLimit: 2}, admitNow, ""},
		"unbounded":                   {admitState{InFlight: 1 << 20, Limit: -1}, admitNow, ""},
		"zero bound, waits allowed":   {admitState{Limit: 0, QueueLimit: 1, CanWait: true}, admitQueue, ""},
		"zero bound, no wait: shed":   {admitState{Limit: 0, QueueLimit: 1}, admitShed, shedQueueFull},
		"under the bound, queue full": {admitState{InFlight: 1, Queued: 1, Limit: 2, QueueLimit: 1, CanWait: true}, admitShed, shedQueueFull},
	} {
		if got, reason := decideAdmission(tc.s); got != tc.want || reason != tc.reason {
			t.Errorf("%s: %v %q, want %v %q", name, got, reason, tc.want, tc.reason)
		}
	}
}

func TestRequestsThatSettleExistingWorkAreExemptFromShedding(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`:    false,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{}}}`: false,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`:                                false,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}`:                     false,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`:                                                false,
		`not json`: false,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"resume","arguments":{"executionId":"x"}}}`: true,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`:                                  true,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"t"}}`:                                  true,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"t"}}`:                                  true,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`:                             true,
		`{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}`:                                                     true,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","requestState":"s"}}`:             true,
	} {
		if got := exemptFromShedding(http.MethodPost, parseBody([]byte(body))); got != want {
			t.Errorf("%s: exempt %v, want %v", body, got, want)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if !exemptFromShedding(m, rpcBody{}) {
			t.Errorf("%s is not exempt", m)
		}
	}
}

// The admission's slots: the bound holds, a freed slot goes to the first
// waiter, a waiter past the wait is shed, exempt requests pass a full
// node. No bound here depends on the machine's speed: the waits that must
// time out are the only timers, and nothing else is timed.
func TestAdmissionHandsFreedSlotsToWaitersAndShedsTheRest(t *testing.T) {
	a, err := newAdmission(nil, 2, time.Hour, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r1, _, ok1 := a.acquire(ctx, false)
	r2, _, ok2 := a.acquire(ctx, false)
	if !ok1 || !ok2 {
		t.Fatal("the first two requests were not admitted")
	}
	got := make(chan bool, 1)
	go func() {
		rel, _, ok := a.acquire(ctx, false)
		if ok {
			defer rel()
		}
		got <- ok
	}()
	for a.counts().Queued != 1 {
		time.Sleep(time.Millisecond) // polls the state; no bound depends on it
	}
	if _, _, ok := a.acquire(ctx, true); !ok {
		t.Fatal("an exempt request was not admitted on a full node")
	}
	// A second waiter fills the queue (its bound is the limit, 2); a third
	// is shed at once.
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan bool, 1)
	go func() { _, reason, ok := a.acquire(cctx, false); left <- ok || reason != "" }()
	for a.counts().Queued != 2 {
		time.Sleep(time.Millisecond)
	}
	if _, reason, ok := a.acquire(ctx, false); ok || reason != shedQueueFull {
		t.Fatalf("over a full queue: admitted %v, reason %q", ok, reason)
	}
	cancel()
	if <-left {
		t.Fatal("a waiter whose client left was admitted or counted as shed")
	}
	r1()
	r1() // twice is once
	if !<-got {
		t.Fatal("the waiter did not get the freed slot")
	}
	r2()
	if n := shedCount(t, a, shedQueueFull); n != 1 {
		t.Fatalf("shed queue_full = %v, want 1", n)
	}
	short, err := newAdmission(nil, 1, time.Millisecond, -1)
	if err != nil {
		t.Fatal(err)
	}
	rel, _, _ := short.acquire(ctx, false)
	if _, reason, ok := short.acquire(ctx, false); ok || reason != shedQueueTimeout {
		t.Fatalf("past the wait: admitted %v, reason %q", ok, reason)
	}
	rel()
	if c := short.counts(); c.InFlight != 0 || c.Queued != 0 {
		t.Fatalf("after every release: %+v", c)
	}
}

// shedCount reads a's shed counter for reason.
func shedCount(t *testing.T, a *admission, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := a.shed.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestAdaptiveBoundDropsWhileTheCPUIsShortAndClimbsBack(t *testing.T) {
	target := 25 * time.Millisecond
	short := 50 * time.Millisecond
	for name, tc := range map[string]struct {
		cur, ceiling int
		lag          time.Duration
		pressed      bool
		want         int
	}{
		"short of CPU, requests waiting: a tenth less": {100, 128, short, true, 90},
		"small bound: at least 1 less":                 {5, 128, short, true, 4},
		"never below 1":                                {1, 128, time.Second, true, 1},
		"short of CPU, nobody waiting: holds":          {100, 128, short, false, 100},
		"at the target: climbs":                        {64, 128, target, true, 68},
		"quiet: a 32nd of the ceiling":                 {64, 128, 0, false, 68},
		"small ceiling: at least 1":                    {1, 2, 0, false, 2},
		"never above the ceiling":                      {127, 128, 0, false, 128},
		"at the ceiling stays":                         {128, 128, time.Millisecond, true, 128},
	} {
		if got := nextLimit(tc.cur, tc.ceiling, tc.lag, target, tc.pressed); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

func TestLagQuantileReadsTheSamplesBetweenTwoReadings(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}
	for name, tc := range map[string]struct {
		prev, cur []uint64
		want      time.Duration
	}{
		"no samples":                {[]uint64{5, 5, 5, 5}, []uint64{5, 5, 5, 5}, 0},
		"first reading":             {nil, []uint64{90, 10, 0, 0}, time.Millisecond},
		"only the delta counts":     {[]uint64{1000, 0, 0, 0}, []uint64{1000, 1, 9, 0}, 100 * time.Millisecond},
		"the 90th in the tail":      {nil, []uint64{80, 0, 20, 0}, 100 * time.Millisecond},
		"the unbounded last bucket": {nil, []uint64{0, 0, 0, 3}, 100 * time.Millisecond},
	} {
		if got := lagQuantile(tc.prev, tc.cur, buckets, 0.9); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// The bound in force follows the scheduling delay: a reading above the
// target lowers it, and releases then keep the in-flight requests under
// it.
func TestAdmissionLowersItsBoundWhileTheCPUIsShort(t *testing.T) {
	a, err := newAdmission(nil, 10, time.Hour, -1)
	if err != nil {
		t.Fatal(err)
	}
	var releases []func()
	for range 10 {
		rel, _, ok := a.acquire(t.Context(), false)
		if !ok {
			t.Fatal("not admitted under the bound")
		}
		releases = append(releases, rel)
	}
	a.mu.Lock()
	a.target = time.Nanosecond // any delay recorded since the process started is above it
	a.adapt(time.Now())
	if a.eff != 10 {
		a.mu.Unlock()
		t.Fatalf("the bound dropped to %d with nobody waiting", a.eff)
	}
	a.pressed = true // a request waited
	a.adaptedAt = time.Time{}
	a.lag.prev = nil // the whole history again
	a.adapt(time.Now())
	eff := a.eff
	a.mu.Unlock()
	if eff != 9 {
		t.Fatalf("bound in force %d after a reading above the target, want 9", eff)
	}
	releases[0]()
	// 9 in flight under a bound of 9: the next one queues (its client
	// already gone here, so it leaves the queue at once).
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, reason, ok := a.acquire(gone, false); ok || reason != "" {
		t.Fatalf("at the lowered bound: admitted %v, reason %q", ok, reason)
	}
	for _, rel := range releases[1:] {
		rel()
	}
	if c := a.counts(); c.InFlight != 0 || c.Limit != 9 {
		t.Fatalf("after every release: %+v", c)
	}
}
