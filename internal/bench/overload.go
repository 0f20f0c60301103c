package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Overload offers open-loop load at multiples of the node's measured
// capacity and records what it served, what it shed and how fast. It
// runs only when named: "all" leaves it out.
const Overload Scenario = "overload"

// OverloadMultiples are the loads the overload scenario offers, as
// multiples of the capacity it measured first.
var OverloadMultiples = []float64{0.5, 1, 1.5, 2, 3}

// maxOutstanding bounds the overload scenario's requests in flight: an
// arrival beyond it is not sent but counted (OverloadStep.Overrun), so a
// node that stops answering cannot make the client grow without bound.
const maxOutstanding = 8192

// Outcome classifies one answer of the overload scenario.
type Outcome int

// The outcomes.
const (
	// Served: 200 with a JSON-RPC result.
	Served Outcome = iota
	// Shed: a clear retryable refusal, 503 or 429 with Retry-After.
	Shed
	// Failed: anything else (an error, a timeout, a refusal without
	// Retry-After).
	Failed
)

// Classify tells a served answer from a shed one and from a failure by
// its HTTP status, its Retry-After header and whether its body parsed as
// a JSON-RPC result.
func Classify(status int, retryAfter string, resultOK bool) Outcome {
	switch {
	case status == http.StatusOK && resultOK:
		return Served
	case (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && retryAfter != "":
		return Shed
	}
	return Failed
}

// Due is how many arrivals an open-loop schedule of rate per second has
// made by elapsed: the generator sends that many, whatever the answers.
func Due(elapsed time.Duration, rate float64) int {
	if elapsed <= 0 || rate <= 0 {
		return 0
	}
	return int(elapsed.Seconds() * rate)
}

// OverloadReport is what the overload scenario measured.
type OverloadReport struct {
	// Capacity is the closed-loop throughput (Options.Concurrency
	// workers, Options.Duration): the 1× of the steps.
	Capacity float64 `json:"capacityPerSec"`
	// MemoryLimit is this process's GOMEMLIMIT (the in-process node's),
	// 0 when unset or when the node runs elsewhere.
	MemoryLimit int64 `json:"memoryLimitBytes,omitempty"`
	// Steps are the open-loop loads, in order.
	Steps []OverloadStep `json:"steps"`
}

// OverloadStep is one open-loop load.
type OverloadStep struct {
	// Multiple of the capacity, and the arrival rate it made.
	Multiple float64 `json:"multiple"`
	Offered  float64 `json:"offeredPerSec"`
	// Sent counts requests sent; Served, Shed and Failed their outcomes;
	// Overrun the arrivals not sent because maxOutstanding were in flight.
	Sent    int `json:"sent"`
	Served  int `json:"served"`
	Shed    int `json:"shed"`
	Failed  int `json:"failed"`
	Overrun int `json:"overrun,omitempty"`
	// ServedRate is served requests per second of the step.
	ServedRate float64 `json:"servedPerSec"`
	// Admitted are the latencies of served requests; ToShed the time to
	// each shed answer.
	Admitted Result `json:"admitted"`
	ToShed   Result `json:"toShed"`
	// MaxRSS and MaxHeap are the highest of the node's
	// process_resident_memory_bytes and go_memstats_heap_inuse_bytes
	// sampled during the step.
	MaxRSS  float64 `json:"maxRssBytes"`
	MaxHeap float64 `json:"maxHeapBytes"`
	// FailureSamples are a few failures' messages.
	FailureSamples []string `json:"failureSamples,omitempty"`
}

// overloadRun drives one node.
type overloadRun struct {
	o        Options
	c        *rawClient
	endpoint string
	base     string
	sessions []rawSession
	next     atomic.Uint64
}

// runOverload runs the overload scenario against o.URL or an in-process
// node: sessions, the closed-loop capacity, then each open-loop step.
func runOverload(ctx context.Context, o Options) (Report, error) {
	rep := Report{Scenario: Overload, Target: o.URL, External: o.URL != "", Sessions: o.Sessions, Concurrency: o.Concurrency, Duration: o.Duration, Warmup: o.Warmup}
	conns := o.Concurrency + maxOutstanding
	var t *target
	var err error
	if o.URL != "" {
		t, err = newTarget(o.URL, o.Token, conns)
	} else {
		rep.Target = "in-process node (default admission: --max-in-flight, --queue-wait)"
		t, err = startNode(ctx, NodeOptions{SoftCap: max(64, 2*o.Sessions), Logger: o.NodeLogger}, conns)
	}
	if err != nil {
		return rep, err
	}
	defer t.close()
	r := &overloadRun{o: o, c: &rawClient{hc: t.hc}, endpoint: t.endpoint, base: t.base}
	sessions, created := createSessions(ctx, o, r.c, []string{t.endpoint}, o.Sessions, 0, "sessions")
	if len(sessions) == 0 {
		return rep, fmt.Errorf("no session could be created: %v", Summarize(nil, created.errs, 0).ErrorSamples)
	}
	r.sessions = sessions
	or := &OverloadReport{}
	if o.URL == "" {
		if lim := debug.SetMemoryLimit(-1); lim < 1<<62 {
			or.MemoryLimit = lim
		}
	}
	rep.Overload = or
	if o.Warmup > 0 {
		r.closedLoop(ctx, o.Warmup)
	}
	rep.Mcpgrain = r.closedLoop(ctx, o.Duration)
	or.Capacity = rep.Mcpgrain.Throughput
	if or.Capacity <= 0 {
		return rep, errors.New("capacity: nothing was served in the closed-loop phase")
	}
	for _, m := range OverloadMultiples {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		or.Steps = append(or.Steps, r.openLoop(ctx, m, m*or.Capacity))
		r.progress(fmt.Sprintf("%gx", m), true)
	}
	return rep, nil
}

// echo sends one echo call to the next session and classifies the answer.
func (r *overloadRun) echo(ctx context.Context) (Outcome, error) {
	s := r.sessions[r.next.Add(1)%uint64(len(r.sessions))]
	id := r.c.ids.Add(1)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench"}}}`, id)
	h, ct, answer, status, err := r.c.postAny(ctx, r.endpoint, s, body)
	if err != nil {
		return Failed, err
	}
	_, perr := ParseAnswer(ct, answer, id)
	out := Classify(status, h.Get("Retry-After"), perr == nil)
	if out == Failed {
		return out, fmt.Errorf("HTTP %d: %s", status, snippet(answer))
	}
	return out, nil
}

// closedLoop runs Concurrency workers back to back for d: the capacity.
func (r *overloadRun) closedLoop(ctx context.Context, d time.Duration) Result {
	var mu sync.Mutex
	var lat []time.Duration
	var errs []string
	start := time.Now()
	var wg sync.WaitGroup
	for range r.o.Concurrency {
		wg.Go(func() {
			for time.Since(start) < d && ctx.Err() == nil {
				rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
				began := time.Now()
				out, err := r.echo(rctx)
				took := time.Since(began)
				cancel()
				mu.Lock()
				if out == Served {
					lat = append(lat, took)
				} else {
					errs = append(errs, outcomeError(out, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.progress("capacity", true)
	return Summarize(lat, errs, time.Since(start))
}

// outcomeError names an answer that was not served.
func outcomeError(out Outcome, err error) string {
	if out == Shed {
		return "shed (503 + Retry-After)"
	}
	return shortError(err)
}

// progress reports the end of a phase.
func (r *overloadRun) progress(phase string, final bool) {
	if r.o.Progress != nil {
		r.o.Progress(Progress{Scenario: Overload, Target: "mcpgrain", Phase: phase, Fraction: 1, Final: final})
	}
}

// stepTally collects one open-loop step's answers.
type stepTally struct {
	mu                sync.Mutex
	served, shed      []time.Duration
	failed            []string
	maxRSS, maxHeap   float64
	sent, overrun     int
	outstanding       atomic.Int64
	samplerDone, stop chan struct{}
}

// openLoop offers rate arrivals per second for Options.Duration, each
// sent at its time whatever the answers before it, then waits for the
// answers.
func (r *overloadRun) openLoop(ctx context.Context, multiple, rate float64) OverloadStep {
	st := &stepTally{samplerDone: make(chan struct{}), stop: make(chan struct{})}
	go r.sampleMemory(ctx, st)
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	for ctx.Err() == nil {
		elapsed := time.Since(start)
		due := Due(min(elapsed, r.o.Duration), rate)
		for st.sent+st.overrun < due {
			if st.outstanding.Load() >= maxOutstanding {
				st.overrun++
				continue
			}
			st.sent++
			st.outstanding.Add(1)
			wg.Go(func() { r.one(ctx, st) })
		}
		if elapsed >= r.o.Duration {
			break
		}
		<-tick.C
	}
	tick.Stop()
	wg.Wait()
	close(st.stop)
	<-st.samplerDone
	return st.step(multiple, rate, r.o.Duration)
}

// one sends one open-loop request and records its answer.
func (r *overloadRun) one(ctx context.Context, st *stepTally) {
	defer st.outstanding.Add(-1)
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	began := time.Now()
	out, err := r.echo(rctx)
	took := time.Since(began)
	st.mu.Lock()
	defer st.mu.Unlock()
	switch out {
	case Served:
		st.served = append(st.served, took)
	case Shed:
		st.shed = append(st.shed, took)
	default:
		st.failed = append(st.failed, shortError(err))
	}
}

// sampleMemory scrapes the node's memory every 250 ms until st.stop.
func (r *overloadRun) sampleMemory(ctx context.Context, st *stepTally) {
	defer close(st.samplerDone)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		text, err := scrape(sctx, r.c.hc, r.base+"/metrics")
		cancel()
		if err == nil {
			rss, _ := SumMetric(text, "process_resident_memory_bytes", nil)
			heap, _ := SumMetric(text, "go_memstats_heap_inuse_bytes", nil)
			st.mu.Lock()
			st.maxRSS, st.maxHeap = max(st.maxRSS, rss), max(st.maxHeap, heap)
			st.mu.Unlock()
		}
		select {
		case <-st.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step summarizes a finished step.
func (st *stepTally) step(multiple, rate float64, d time.Duration) OverloadStep {
	s := OverloadStep{Multiple: multiple, Offered: rate, Sent: st.sent, Overrun: st.overrun,
		Served: len(st.served), Shed: len(st.shed), Failed: len(st.failed), MaxRSS: st.maxRSS, MaxHeap: st.maxHeap}
	s.Admitted = Summarize(st.served, nil, d)
	s.ToShed = Summarize(st.shed, nil, d)
	s.ServedRate = s.Admitted.Throughput
	s.FailureSamples = Summarize(nil, st.failed, d).ErrorSamples
	return s
}

// postAny is post without an expected status: it returns the status.
func (c *rawClient) postAny(ctx context.Context, endpoint string, s rawSession, body string) (http.Header, string, []byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, "", nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", s.version)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, "", nil, 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, answerLimit))
	if err != nil {
		return nil, "", nil, 0, err
	}
	return resp.Header, resp.Header.Get("Content-Type"), answer, resp.StatusCode, nil
}
