package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"time"
)

// Host answers the code's tool calls. Call blocks for as long as the tool takes — including while a call
// waits for a human approval (the engine pauses it); the JS thread simply waits. path is the dotted path
// after "tools." (e.g. "demo.createTodo", "search", "describe"); args is the JSON-decoded first argument
// (map[string]any, []any, string, float64, bool or nil). The result must be JSON-able; an error is thrown
// into the code as a JS Error whose message is err.Error() (the code may catch it).
//
// ctx ends when the execution times out, is cancelled or fails a limit, and at the latest when Run
// returns; Run does not wait for a Call that ignores it.
// Calls of one execution never overlap: they are made one at a time, in the order the code makes them.
type Host interface {
	Call(ctx context.Context, path string, args any) (any, error)
}

// HostFunc adapts a function to the Host interface.
type HostFunc func(ctx context.Context, path string, args any) (any, error)

// Call calls f.
func (f HostFunc) Call(ctx context.Context, path string, args any) (any, error) {
	return f(ctx, path, args)
}

// Default limits, used for zero (or negative) Limits fields.
const (
	DefaultWallTime      = 30 * time.Second
	DefaultMaxToolCalls  = 1000
	DefaultMaxOutput     = 1 << 20
	DefaultMaxHeapGrowth = 512 << 20
)

// Limits bounds one execution. Zero fields take the Default* values. Seed and Now are not limits: they
// make a run reproducible (deterministic replay re-runs code with the same Seed and clock).
type Limits struct {
	// WallTime interrupts the code after this long (default 30s), even inside an infinite loop.
	WallTime time.Duration
	// MaxToolCalls fails the execution with a "limit" Error on the tools.* call after this many
	// (default 1000).
	MaxToolCalls int
	// MaxOutput is the number of bytes of emitted values (as JSON) plus log lines kept; the emit or log
	// that goes beyond it fails the execution with a "limit" Error (default 1 MiB).
	MaxOutput int
	// MaxHeapGrowth is a best-effort memory bomb guard: the code is interrupted with a "limit" Error if
	// the process heap grows by more than this during the run (default 512 MiB). It is sampled every
	// ~20ms and measures the whole process, so concurrent work counts too; a single huge allocation
	// inside a built-in (e.g. "x".repeat(1e9)) cannot be stopped before it completes.
	MaxHeapGrowth uint64

	// Seed, when non-zero, makes Math.random a PRNG seeded with it: the same Seed gives the same
	// sequence. When zero Math.random is seeded randomly.
	Seed int64
	// Now, when set, is the clock behind Date.now() and new Date(); otherwise the wall clock is used.
	Now func() time.Time
}

func (l Limits) withDefaults() Limits {
	if l.WallTime <= 0 {
		l.WallTime = DefaultWallTime
	}
	if l.MaxToolCalls <= 0 {
		l.MaxToolCalls = DefaultMaxToolCalls
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxHeapGrowth == 0 {
		l.MaxHeapGrowth = DefaultMaxHeapGrowth
	}
	return l
}

// Result is what a finished (or failed) execution produced.
type Result struct {
	Value     any      // the code's `return` value, JSON-able (nil for undefined)
	Emitted   []any    // emit(value) calls, in order, JSON-able
	Logs      []string // console.log/info/warn/error/debug lines in order; non-log levels are prefixed ("warn: ...")
	ToolCalls int      // tools.* calls passed to the Host
}

// Error kinds.
const (
	KindSyntax  = "syntax"  // the TypeScript did not compile; Message has line:column
	KindRuntime = "runtime" // an uncaught exception (or a non-JSON-able return value); Message has the JS stack
	KindTimeout = "timeout" // WallTime or the caller's deadline ran out
	KindLimit   = "limit"   // MaxToolCalls, MaxOutput or MaxHeapGrowth was exceeded
)

// Error is a failure the user should see as the tool's isError result: Kind "syntax" (TS did not compile:
// message with line:column), "runtime" (an uncaught exception: message, and the JS stack if cheap),
// "timeout", "limit" (tool calls/output/memory). Result holds whatever logs/emits happened before.
type Error struct {
	Kind    string
	Message string
	Result  Result
}

// Error returns "sandbox <kind> error: <message>".
func (e *Error) Error() string { return "sandbox " + e.Kind + " error: " + e.Message }

// abandonGrace is how long Run waits for an interrupted runtime to stop before returning without it.
// Interrupt only takes effect between JS instructions; a long-running built-in (a catastrophic regexp, a
// huge sort) or a Host.Call that ignores its ctx can hold the runtime past it.
const abandonGrace = time.Second

// heapSampleInterval is how often the heap guard samples runtime/metrics.
const heapSampleInterval = 20 * time.Millisecond

// errWallTime is the cancellation cause when Limits.WallTime runs out.
var errWallTime = errors.New("wall time exceeded")

// Run compiles code (see Compile; compiled programs are kept in a small LRU cache keyed by the code's
// hash) and executes it in a fresh runtime with no ambient I/O: the only globals beyond the ECMAScript
// built-ins are tools, emit and console. A nil host rejects every tool call.
//
// It returns the Result and nil, or the partial Result and an error: an *Error for anything the user
// should see (syntax, runtime, timeout, limit; its Result field holds the same partial Result), an error
// wrapping context.Canceled (or the context's cause) when ctx was cancelled, or a plain error for an
// internal failure. Run never panics on any input.
func Run(ctx context.Context, code string, host Host, lim Limits) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("sandbox: execution cancelled: %w", context.Cause(ctx))
	}
	lim = lim.withDefaults()
	timed, cancelTimed := context.WithCancelCause(ctx)
	defer cancelTimed(nil)
	clock := startWallClock(lim.WallTime, func() { cancelTimed(errWallTime) })
	defer clock.stop()
	// runCtx also ends when the execution is stopped for another reason (a limit), so that a Host.Call
	// in progress returns. It carries the clock for Suspend.
	runCtx, cancelRun := context.WithCancelCause(context.WithValue(timed, wallClockKey{}, clock))
	defer cancelRun(nil)

	ex, err := newExecution(ctx, timed, runCtx, cancelRun, host, lim)
	if err != nil {
		return Result{}, err
	}
	ex.codeLines = strings.Count(code, "\n") + 1
	done := make(chan outcome, 1)
	// Compiling happens on the runtime goroutine too: esbuild cannot be interrupted, but WallTime still
	// bounds how long Run waits for it.
	go func() { done <- ex.run(code) }()

	heap := newHeapGauge()
	ticker := time.NewTicker(heapSampleInterval)
	defer ticker.Stop()
	var out outcome
wait:
	for {
		select {
		case out = <-done:
			break wait
		case <-timed.Done():
			ex.stop(ex.ctxReason())
			out = ex.awaitStopped(done)
			break wait
		case <-ticker.C:
			if grown := heap.growth(); grown > lim.MaxHeapGrowth {
				ex.stop(&Error{Kind: KindLimit, Message: fmt.Sprintf(
					"memory limit exceeded: the heap grew by %d MiB (limit %d MiB)", grown>>20, lim.MaxHeapGrowth>>20)})
				out = ex.awaitStopped(done)
				break wait
			}
		}
	}
	res := ex.snapshot()
	res.Value = out.value
	if out.err == nil {
		return res, nil
	}
	var se *Error
	if errors.As(out.err, &se) {
		se.Result = res
	}
	return res, out.err
}

// awaitStopped waits for the interrupted runtime to finish, or gives up on it after abandonGrace (it
// keeps running on its goroutine until the built-in or Host call holding it returns, and its output is
// dropped).
func (ex *execution) awaitStopped(done <-chan outcome) outcome {
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case out := <-done:
		return out
	case <-t.C:
		ex.abandon()
		return outcome{err: ex.stopReason()}
	}
}

// heapGauge measures process heap growth since it was created.
type heapGauge struct {
	sample [1]metrics.Sample
	base   uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func newHeapGauge() *heapGauge {
	g := &heapGauge{}
	g.sample[0].Name = heapMetric
	g.base = g.read()
	return g
}

func (g *heapGauge) read() uint64 {
	metrics.Read(g.sample[:])
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return g.sample[0].Value.Uint64()
}

func (g *heapGauge) growth() uint64 {
	if now := g.read(); now > g.base {
		return now - g.base
	}
	return 0
}

// wallClockKey is the context key of the execution's *wallClock.
type wallClockKey struct{}

// wallClock is Limits.WallTime: a budget that runs while the code runs and stands still while Suspend
// holds it.
type wallClock struct {
	mu        sync.Mutex
	remaining time.Duration
	since     time.Time // when the running stretch began
	timer     *time.Timer
	held      int // Suspend calls not yet resumed
	expire    func()
	stopped   bool
}

func startWallClock(d time.Duration, expire func()) *wallClock {
	c := &wallClock{remaining: d, since: time.Now(), expire: expire}
	c.timer = time.AfterFunc(d, expire)
	return c
}

func (c *wallClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.timer.Stop()
}

func (c *wallClock) suspend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held++
	if c.held > 1 || c.stopped {
		return
	}
	if !c.timer.Stop() {
		c.remaining = 0 // it fired already: the execution is being stopped
		return
	}
	c.remaining -= time.Since(c.since)
}

func (c *wallClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	if c.held > 0 || c.stopped || c.remaining <= 0 {
		return
	}
	c.since = time.Now()
	c.timer = time.AfterFunc(c.remaining, c.expire)
}

// Suspend stops the WallTime clock of the execution whose Host.Call received ctx, until the returned
// resume is called (once). Hosts use it while a call waits for something that is not the code's own
// work, such as a human approval. For any other ctx it does nothing.
func Suspend(ctx context.Context) (resume func()) {
	c, ok := ctx.Value(wallClockKey{}).(*wallClock)
	if !ok {
		return func() {}
	}
	c.suspend()
	var once sync.Once
	return func() { once.Do(c.resume) }
}
