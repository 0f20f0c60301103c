package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// Defaults of the node's admission control ([MCPOptions.MaxInFlight],
// [MCPOptions.QueueWait]), used where a field is zero; the node's
// --max-in-flight and --queue-wait flags default to them.
const (
	// DefaultInFlightPerCPU is how many /mcp requests a node serves at
	// once per CPU it may use (GOMAXPROCS) by default.
	DefaultInFlightPerCPU = 64
	// DefaultQueueWait is how long a request over the in-flight bound
	// waits for a slot before it is shed with 503 and Retry-After.
	DefaultQueueWait = 250 * time.Millisecond
	// ShedRetryAfter is the Retry-After of a shed request.
	ShedRetryAfter = time.Second
)

// DefaultMaxInFlight is the default bound on /mcp requests a node serves
// at once: [DefaultInFlightPerCPU] per GOMAXPROCS.
func DefaultMaxInFlight() int { return DefaultInFlightPerCPU * runtime.GOMAXPROCS(0) }

// Shed reasons (the reason label of mcpgrain_requests_shed_total).
const (
	shedQueueFull    = "queue_full"    // in-flight bound reached and the queue full
	shedQueueTimeout = "queue_timeout" // waited QueueWait without a slot
)

// admitVerdict is what the admission policy decides for one request.
type admitVerdict int

const (
	admitNow   admitVerdict = iota // serve it (a slot, or exempt)
	admitQueue                     // wait for a slot, at most QueueWait
	admitShed                      // answer 503 with Retry-After at once
)

// admitState is what the admission policy decides from.
type admitState struct {
	// Exempt: the request continues or settles existing work (see
	// exemptFromShedding); it is never queued nor shed.
	Exempt bool
	// InFlight are the requests holding a slot; Queued those waiting.
	InFlight, Queued int
	// Limit bounds InFlight (negative: unlimited); QueueLimit bounds
	// Queued; CanWait is false when the queue wait is zero.
	Limit, QueueLimit int
	CanWait           bool
}

// decideAdmission is the admission policy: exempt requests and those under
// the bound are served at once (unless others already wait: first come,
// first served), the next ones wait while the queue has room, the rest
// are shed.
func decideAdmission(s admitState) (admitVerdict, string) {
	switch {
	case s.Exempt || s.Limit < 0:
		return admitNow, ""
	case s.InFlight < s.Limit && s.Queued == 0:
		return admitNow, ""
	case s.CanWait && s.Queued < s.QueueLimit:
		return admitQueue, ""
	}
	return admitShed, shedQueueFull
}

// exemptFromShedding reports whether a request continues or settles work
// the node already holds, so that shedding it could lose a pause, a task
// or a client's answer: GET (listen and resumed streams), DELETE of a
// session, a client's answer to a server request or a notification
// (cancellation among them), task results, cancellation and input, a
// code-mode resume, and 2026-07-28 retries that carry requestState.
func exemptFromShedding(method string, b rpcBody) bool {
	if method != http.MethodPost {
		return true
	}
	if b.batch || !b.env {
		return false
	}
	switch m := b.method(); {
	case len(b.pk.Method) == 0 || string(b.pk.Method) == "null":
		return true // a response to a server request
	case len(m) > len("notifications/") && m[:len("notifications/")] == "notifications/":
		return true
	case m == "tasks/result" || m == "tasks/cancel" || m == "tasks/update":
		return true
	case b.params && b.pk.Params.RequestState != nil:
		return true
	case m == "tools/call":
		return b.toolName() == "resume"
	}
	return false
}

// toolName is the name a tools/call names ("" when it cannot be read).
func (b rpcBody) toolName() string {
	if !b.params {
		return ""
	}
	return jsonString(b.pk.Params.Name)
}

// admission bounds the /mcp requests a node serves at once (the gateway
// → grain path), with a short bounded queue in front.
type admission struct {
	limit, queueLimit int
	wait              time.Duration

	// target is the scheduling delay above which the effective bound eff
	// drops below limit (negative: eff stays limit); lag reads it.
	target    time.Duration
	lag       *schedLag
	adaptedAt time.Time

	mu       sync.Mutex
	eff      int  // the bound in force: limit, lowered while the CPU is short
	pressed  bool // a request queued or was shed since the last adapt
	inFlight int
	queue    []chan struct{} // waiters, first come first served; a slot is handed over by closing
	shed     *prometheus.CounterVec
}

func newAdmission(reg prometheus.Registerer, limit int, wait, target time.Duration) (*admission, error) {
	a := &admission{limit: limit, eff: limit, queueLimit: max(limit, 1), wait: max(wait, 0), target: target, lag: newSchedLag()}
	a.shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgrain_requests_shed_total",
		Help: "Requests to /mcp shed by the node's admission control (503 with Retry-After), by reason: queue_full (the in-flight bound reached and the queue full), queue_timeout (no slot within --queue-wait).",
	}, []string{"reason"})
	for _, r := range []string{shedQueueFull, shedQueueTimeout} {
		a.shed.WithLabelValues(r)
	}
	if reg == nil {
		return a, nil
	}
	cs := []prometheus.Collector{a.shed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpgrain_requests_in_flight", Help: "Requests to /mcp holding an admission slot (exempt ones are not counted)."},
			func() float64 { return float64(a.counts().InFlight) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpgrain_requests_queued", Help: "Requests to /mcp waiting for an admission slot."},
			func() float64 { return float64(a.counts().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpgrain_requests_in_flight_limit", Help: "The in-flight bound in force: --max-in-flight, lowered while goroutines wait to run longer than the scheduling target (the process is short of CPU)."},
			func() float64 { return float64(a.counts().Limit) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// counts returns the current in-flight and queued requests.
func (a *admission) counts() admitState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return admitState{InFlight: a.inFlight, Queued: len(a.queue), Limit: a.eff}
}

// acquire admits one request: release must be called when it ends (a
// no-op for exempt ones). Without a slot, reason says why it was shed;
// ok false with no reason means ctx ended while it waited.
func (a *admission) acquire(ctx context.Context, exempt bool) (release func(), reason string, ok bool) {
	a.mu.Lock()
	if !exempt {
		a.adapt(time.Now())
	}
	v, reason := decideAdmission(admitState{Exempt: exempt, InFlight: a.inFlight, Queued: len(a.queue),
		Limit: a.eff, QueueLimit: a.queueLimit, CanWait: a.wait > 0})
	switch {
	case v == admitNow && (exempt || a.limit < 0):
		a.mu.Unlock()
		return func() {}, "", true
	case v == admitNow:
		a.inFlight++
		a.mu.Unlock()
		return a.releaser(), "", true
	case v == admitShed:
		a.pressed = true
		a.mu.Unlock()
		a.shed.WithLabelValues(reason).Inc()
		return nil, reason, false
	}
	ch := make(chan struct{})
	a.queue = append(a.queue, ch)
	a.pressed = true
	a.mu.Unlock()
	return a.await(ctx, ch)
}

// await waits for a queued request's slot, at most the queue wait.
func (a *admission) await(ctx context.Context, ch chan struct{}) (func(), string, bool) {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	reason := ""
	select {
	case <-ch:
		return a.releaser(), "", true
	case <-t.C:
		reason = shedQueueTimeout
	case <-ctx.Done():
	}
	a.mu.Lock()
	for i, w := range a.queue {
		if w == ch {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			a.mu.Unlock()
			if reason != "" {
				a.shed.WithLabelValues(reason).Inc()
			}
			return nil, reason, false
		}
	}
	a.mu.Unlock()
	// Not queued any more: the slot was handed over meanwhile.
	if reason == "" {
		a.releaser()()
		return nil, "", false
	}
	return a.releaser(), "", true
}

// releaser returns the release of one slot, safe to call more than once:
// the slot goes to the first waiter if the bound in force allows, or
// back to the pool.
func (a *admission) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.inFlight--
			a.grant()
		})
	}
}

// admitLoad admits r (its body b) or answers it: 503 with Retry-After and a
// retryable JSON-RPC error when it is shed. It returns the release to
// call when the request ends, and false when r was answered (or its
// client left while it waited).
func (h *mcpHandler) admitLoad(w http.ResponseWriter, r *http.Request, b rpcBody) (func(), bool) {
	release, reason, ok := h.adm.acquire(r.Context(), exemptFromShedding(r.Method, b))
	if ok {
		return release, true
	}
	if reason == "" {
		return nil, false // the client went away while queued
	}
	writeShed(w, b.requestID(), reason)
	return nil, false
}

// shedMessage is the message of the JSON-RPC error of a shed request.
const shedMessage = "Server busy: this node is serving as many requests as it can; retry later"

// writeShed answers a shed request: HTTP 503 with Retry-After and a
// JSON-RPC error whose data says it is retryable and when.
func writeShed(w http.ResponseWriter, id json.RawMessage, reason string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(ShedRetryAfter/time.Second)))
	exchange.WriteErrorData(w, http.StatusServiceUnavailable, id, exchange.CodeServerError, shedMessage,
		map[string]any{"retryable": true, "retryAfterMs": ShedRetryAfter.Milliseconds(), "reason": reason})
}

// inFlightOr is MaxInFlight with its zero value's default.
func inFlightOr(n int) int {
	if n == 0 {
		return DefaultMaxInFlight()
	}
	return n
}

// durationOr is d, or def when d is zero (negative stays: "none").
func durationOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
