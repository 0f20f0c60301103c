package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpgrain/mcpgrain/tracing"
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
// make a run reproducible (deterministic replay re-runs code with the same Seed and clock). Tenant, Org
// and WaitForSlot are how the execution is admitted (see PoolOptions).
type Limits struct {
	// WallTime stops the code after this long (default 30s), even inside an infinite loop or a long
	// native built-in: the worker is asked to interrupt it and killed if it has not within
	// PoolOptions.InterruptGrace. Time a tool call spends suspended (see Suspend) does not count.
	WallTime time.Duration
	// MaxToolCalls fails the execution with a "limit" Error on the tools.* call after this many
	// (default 1000).
	MaxToolCalls int
	// MaxOutput is the number of bytes of emitted values (as JSON) plus log lines kept; the emit or log
	// that goes beyond it fails the execution with a "limit" Error (default 1 MiB).
	MaxOutput int
	// MaxHeapGrowth bounds this execution's memory: when the heap of its worker (objects, collected or
	// not, and goroutine stacks) grows by more than this since the execution started, the worker is
	// ended at once and Run returns a "limit" Error, "memory limit exceeded" (default 512 MiB). The
	// worker samples its heap every 5ms and the OS refuses it allocations beyond about twice the
	// limit, so one giant allocation cannot take the machine either. Other executions do not count.
	MaxHeapGrowth uint64

	// Seed, when non-zero, makes Math.random a PRNG seeded with it: the same Seed gives the same
	// sequence. When zero Math.random is seeded randomly.
	Seed int64
	// Now, when set, is the clock behind Date.now() and new Date(); otherwise the worker's wall clock
	// is used. It is called in the caller's process, when the execution starts and after each tool
	// call returns; the code sees the value of the latest of those calls.
	Now func() time.Time

	// Tenant names who runs the execution (the principal, "org/user") for the per-tenant cap
	// (PoolOptions.MaxRunningPerTenant). Empty: only the node's cap applies.
	Tenant string
	// Org names the organization the Tenant belongs to, for the per-organization cap and the fair
	// share of freed slots (PoolOptions.MaxRunningPerOrg, SlotWait). Empty: the Tenant is its own.
	Org string
	// WaitForSlot makes a run that finds a cap full wait, until ctx ends, for an execution to finish
	// instead of being refused with a "busy" Error (at once, or after PoolOptions.SlotWait). For
	// re-running code that already ran (a replay, a restore), which must not be refused.
	WaitForSlot bool
	// Pool is where the package-level Run runs the execution (nil: the default pool, see Configure).
	// A node that owns its pool (its options, its metrics, its Close) passes it here.
	Pool *Pool
	// Release, when set, lets the pool take back this execution's worker while it is parked (a tool
	// call suspended, see Suspend): the pool calls it once, from a goroutine of its own, when the
	// execution has been parked longer than PoolOptions.ParkTimeout, or when more than
	// PoolOptions.MaxParked releasable executions are parked (the longest parked first). The caller
	// then ends the run (cancels its context); a durable engine re-runs it by replay when the wait is
	// over. Without Release a parked execution keeps its worker until it goes on.
	Release func()
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
	KindBusy    = "busy"    // a running-executions cap was full: nothing ran, and retrying later may succeed
)

// Limits an *Error can name (Error.Limit): which bound stopped the execution. Each has its own
// mechanism, and a test of that mechanism asserts its name, so one limit standing in for another
// (a memory bomb stopped by the wall time) fails it.
const (
	LimitHeap      = "heap"       // Kind "limit": MaxHeapGrowth (the worker's watchdog or its OS memory bound)
	LimitOutput    = "output"     // Kind "limit": MaxOutput (emitted values, log lines and the return value)
	LimitToolCalls = "tool_calls" // Kind "limit": MaxToolCalls
	LimitCodeSize  = "code_size"  // Kind "limit": MaxCodeSize or the bound on '{' characters
	LimitWallTime  = "wall_time"  // Kind "timeout": WallTime ("" for the caller's own deadline)
)

// Error is a failure the user should see as the tool's isError result: Kind "syntax" (TS did not compile:
// message with line:column), "runtime" (an uncaught exception: message, and the JS stack if cheap),
// "timeout", "limit" (tool calls/output/memory), "busy" (refused before running; retryable). Result
// holds whatever logs/emits happened before.
type Error struct {
	Kind    string
	Message string
	// Limit names the limit that stopped the execution (Limit* constants) for Kinds "limit" and
	// "timeout"; "" for the others and for a timeout that was the caller's deadline.
	Limit  string
	Result Result
}

// Error returns "sandbox <kind> error: <message>".
func (e *Error) Error() string { return "sandbox " + e.Kind + " error: " + e.Message }

// Retryable reports whether the same execution may succeed if tried again later unchanged: it was
// refused (Kind "busy") before any of its code ran.
func (e *Error) Retryable() bool { return e.Kind == KindBusy }

// errWallTime is the cancellation cause when Limits.WallTime runs out.
var errWallTime = errors.New("wall time exceeded")

// Run compiles code (see Compile; each worker keeps a small LRU cache of compiled programs keyed by the
// code's hash) and executes it in a fresh runtime, in a worker process of the default pool (see
// Configure), with no ambient I/O: the only globals beyond the ECMAScript built-ins are tools, emit and
// console. A nil host rejects every tool call. Host calls are made in the caller's process.
//
// It returns the Result and nil, or the partial Result and an error: an *Error for anything the user
// should see (syntax, runtime, timeout, limit, busy; its Result field holds the same partial Result), an
// error wrapping context.Canceled (or the context's cause) when ctx was cancelled, or a plain error for
// an internal failure (a worker that could not start or died unexpectedly). Run never panics on any
// input, and nothing of the execution runs on after Run returned.
func Run(ctx context.Context, code string, host Host, lim Limits) (Result, error) {
	if lim.Pool != nil {
		return lim.Pool.Run(ctx, code, host, lim)
	}
	return pool().Run(ctx, code, host, lim)
}

// Run is the package's Run on this pool (Limits.Pool is ignored).
func (p *Pool) Run(ctx context.Context, code string, host Host, lim Limits) (Result, error) {
	if !tracing.On() {
		return p.run(ctx, code, host, lim, nil)
	}
	ctx, span, tr := startExec(ctx, lim)
	res, err := p.run(ctx, code, host, lim, tr)
	endExec(ctx, span, tr, res, err)
	return res, err
}

// run is Run, timed into tr when it is not nil.
func (p *Pool) run(ctx context.Context, code string, host Host, lim Limits, tr *runTrace) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("sandbox: execution cancelled: %w", context.Cause(ctx))
	}
	lim = lim.withDefaults()
	sl, err := p.admit(ctx, claimOf(lim), lim.WaitForSlot)
	if err == nil {
		sl.releaseFn = lim.Release
	}
	if err != nil {
		return Result{}, err
	}
	defer sl.release()
	w, err := p.take()
	if err != nil {
		return Result{}, err
	}
	if p.onLend != nil {
		p.onLend(w)
	}
	if tr != nil {
		tr.pid = w.pid()
	}
	d := &driver{p: p, w: w, host: host, lim: lim, sl: sl, tr: tr}
	res, err := d.run(ctx, code, sl)
	if tr != nil {
		tr.cancelled = d.killTag == killCancelled
	}
	return res, err
}

// hostReply is the result of one Host.Call.
type hostReply struct {
	seq   int
	path  string
	value any
	err   error
	panic any
}

// driver runs one execution on a borrowed worker: it feeds the worker, answers its tool calls with
// the Host, keeps the wall clock and decides the outcome.
type driver struct {
	p    *Pool
	w    *proc
	host Host
	lim  Limits
	sl   *slot
	tr   *runTrace // nil: not traced

	res     Result
	stopErr error  // why the parent stopped the execution; the first reason wins
	killTag string // the metric reason if the worker has to go
	memory  string // the memory watchdog's last word

	cancelRun context.CancelCauseFunc // ends run's context (set by run)
	grace     *time.Timer             // the interrupt's grace, once stopped
	graceC    <-chan time.Time        // grace's channel until it fired
}

func (d *driver) now() int64 {
	if d.lim.Now == nil {
		return 0
	}
	return d.lim.Now().UnixNano()
}

func (d *driver) run(ctx context.Context, code string, sl *slot) (Result, error) {
	timed, cancelTimed := context.WithCancelCause(ctx)
	defer cancelTimed(nil)
	clock := startWallClock(d.lim.WallTime, func() { cancelTimed(errWallTime) })
	clock.onHold, clock.onResume = sl.park, sl.unpark
	defer clock.stop()
	// runCtx also ends when the execution is stopped for another reason, so that a Host.Call in
	// progress returns. It carries the clock for Suspend.
	runCtx, cancelRun := context.WithCancelCause(context.WithValue(timed, wallClockKey{}, clock))
	defer cancelRun(nil)
	d.cancelRun = cancelRun
	defer func() {
		if d.grace != nil {
			d.grace.Stop()
		}
	}()

	d.start(code)
	ctxDone := runCtx.Done()
	var replies chan hostReply
	for {
		select {
		case f, ok := <-d.w.frames:
			if !ok {
				return d.died()
			}
			if f.T == frameDone {
				return d.finish(f)
			}
			replies = d.onFrame(runCtx, f, replies)
		case r := <-replies:
			replies = nil
			d.onReply(r)
		case <-ctxDone:
			ctxDone = nil
			tag, reason := d.ctxReason(ctx, timed)
			d.stop(reason, tag)
		case <-d.graceC:
			d.graceC = nil
			d.w.kill() // the interrupt did not land: a long native built-in; died() reports stopErr
		}
	}
}

// stop stops the execution for reason (the first reason wins), tag being the metric reason if
// the worker has to go: it ends run's context, interrupts the worker and arms the grace timer.
func (d *driver) stop(reason error, tag string) {
	if d.stopErr != nil {
		return
	}
	d.stopErr, d.killTag = reason, tag
	d.cancelRun(reason)
	// Asynchronously: a worker that reads nothing (frozen) must not hold this loop, whose grace
	// timer kills it (and the kill unblocks the write).
	go func() { _ = d.w.send(frame{T: frameInterrupt}) }()
	d.grace = time.NewTimer(d.p.opts.InterruptGrace)
	d.graceC = d.grace.C
}

// start sends the worker the code and the limits.
func (d *driver) start(code string) {
	start := frame{T: frameStart, Code: code, Now: d.now(), Lim: &wireLimits{
		MaxToolCalls: d.lim.MaxToolCalls, MaxOutput: d.lim.MaxOutput, MaxHeapGrowth: d.lim.MaxHeapGrowth,
		Seed: d.lim.Seed, FixedClock: d.lim.Now != nil, NiceAfterCPU: int64(d.p.opts.NiceAfterCPU),
	}}
	if d.tr != nil {
		start.Trace = d.tr.parent
	}
	if err := d.w.send(start); err != nil {
		d.stop(fmt.Errorf("sandbox: internal error: starting the execution: %w", err), killCrash)
	}
}

// onFrame handles a frame from the worker other than done; replies is the tool call in progress
// (nil: none), and it returns the one after the frame.
func (d *driver) onFrame(ctx context.Context, f frame, replies chan hostReply) chan hostReply {
	switch f.T {
	case frameEmit:
		var v any
		if len(f.JSON) > 0 {
			if err := json.Unmarshal(f.JSON, &v); err != nil {
				d.stop(fmt.Errorf("sandbox: internal error: decoding an emitted value: %w", err), killError)
				return replies
			}
		}
		d.res.Emitted = append(d.res.Emitted, v)
	case frameLog:
		d.res.Logs = append(d.res.Logs, f.Text)
	case frameCall:
		if d.stopErr != nil {
			return replies
		}
		if replies != nil {
			d.stop(errors.New("sandbox: internal error: the worker made a tool call while another was in progress"), killError)
			return replies
		}
		d.res.ToolCalls++
		return d.call(ctx, f)
	case frameLimit:
		d.memory = f.Err
	default:
		d.stop(fmt.Errorf("sandbox: internal error: unexpected %q frame from the worker", f.T), killError)
	}
	return replies
}

// onReply answers the worker's tool call with the Host's reply r (unless the execution stopped).
func (d *driver) onReply(r hostReply) {
	if d.stopErr != nil {
		return
	}
	if r.panic != nil {
		d.stop(fmt.Errorf("sandbox: internal error: the host panicked in tools.%s: %v", r.path, r.panic), killError)
		return
	}
	if err := d.w.send(d.resultFrame(r)); err != nil {
		d.stop(fmt.Errorf("sandbox: internal error: answering a tool call: %w", err), killCrash)
	}
}

// call starts the Host call of a call frame on its own goroutine, so that a cancelled execution
// returns even if the Host ignores ctx (the channel is buffered so that goroutine never blocks).
func (d *driver) call(ctx context.Context, f frame) chan hostReply {
	reply := make(chan hostReply, 1)
	if d.host == nil {
		reply <- hostReply{seq: f.Seq, path: f.Path, err: errors.New("tools." + f.Path + ": no tools are available in this execution")}
		return reply
	}
	var args any
	if len(f.JSON) > 0 {
		if err := json.Unmarshal(f.JSON, &args); err != nil {
			reply <- hostReply{seq: f.Seq, path: f.Path, panic: fmt.Sprintf("undecodable arguments: %v", err)}
			return reply
		}
	}
	go func() {
		defer func() {
			if x := recover(); x != nil {
				reply <- hostReply{seq: f.Seq, path: f.Path, panic: x}
			}
		}()
		v, err := d.host.Call(ctx, f.Path, args)
		reply <- hostReply{seq: f.Seq, path: f.Path, value: v, err: err}
	}()
	return reply
}

// resultError marks a result frame that rejects the call's Promise.
const resultError = "error"

// resultFrame encodes a Host's answer, with the clock the code sees from now on.
func (d *driver) resultFrame(r hostReply) frame {
	f := frame{T: frameResult, Seq: r.seq, Now: d.now()}
	if r.err != nil {
		f.Kind, f.Err = resultError, r.err.Error()
		return f
	}
	b, err := json.Marshal(r.value)
	if err != nil {
		f.Kind, f.Err = resultError, fmt.Sprintf("tools.%s returned a result that is not JSON-serializable: %v", r.path, err)
		return f
	}
	f.JSON = b
	return f
}

// ctxReason is the stop reason once runCtx has ended: a timeout *Error when WallTime or the caller's
// deadline ran out, or an error wrapping the caller's cancellation cause.
func (d *driver) ctxReason(ctx, timed context.Context) (tag string, reason error) {
	switch {
	case errors.Is(context.Cause(timed), errWallTime):
		return killTimeout, &Error{Kind: KindTimeout, Limit: LimitWallTime,
			Message: fmt.Sprintf("execution timed out after %v", d.lim.WallTime)}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return killTimeout, &Error{Kind: KindTimeout, Message: "execution deadline exceeded"}
	default:
		return killCancelled, fmt.Errorf("sandbox: execution cancelled: %w", context.Cause(ctx))
	}
}

// finish handles the worker's done frame.
func (d *driver) finish(f frame) (Result, error) {
	if d.tr != nil {
		d.tr.spans, d.tr.heap = f.Spans, f.Heap
	}
	if d.stopErr != nil {
		if d.killTag == killCancelled && d.sl.wasAsked() {
			// Cancelled while parked because the pool asked for the worker back: it was waiting
			// for a tool result, not running code, and finished cleanly; it serves another
			// execution (a fresh runtime each) instead of costing a process start.
			d.p.put(d.w, f.Heap, f.Niced)
			return d.fail(d.stopErr)
		}
		// Interrupted: the worker is never reused.
		d.p.discard(d.w, d.killTag)
		return d.fail(d.stopErr)
	}
	d.p.put(d.w, f.Heap, f.Niced)
	if len(f.JSON) > 0 {
		if err := json.Unmarshal(f.JSON, &d.res.Value); err != nil {
			return d.fail(fmt.Errorf("sandbox: internal error: decoding the return value: %w", err))
		}
	}
	switch {
	case f.Kind != "":
		return d.fail(&Error{Kind: f.Kind, Limit: f.Limit, Message: f.Err})
	case f.Err != "":
		return d.fail(errors.New(f.Err))
	}
	return d.res, nil
}

// died handles the end of the worker's output before its done frame: it was killed (by the parent
// after an interrupt did not land, or by its memory bounds) or it crashed.
func (d *driver) died() (Result, error) {
	<-d.w.exited
	memory, detail := d.w.deathCause()
	closed := d.p.isClosed()
	var err error
	tag := d.killTag
	switch {
	case memory || d.memory != "":
		msg := d.memory
		if msg == "" {
			msg = fmt.Sprintf("memory limit exceeded: the execution needed more memory than its limit of %d MiB allows (%s)",
				d.lim.MaxHeapGrowth>>20, detail)
		}
		err, tag = &Error{Kind: KindLimit, Limit: LimitHeap, Message: msg}, killMemory
	case d.stopErr != nil:
		err = d.stopErr
	case closed:
		err, tag = errClosed, killShutdown
	default:
		err, tag = fmt.Errorf("sandbox: internal error: the worker process died: %s", detail), killCrash
	}
	d.p.discard(d.w, tag)
	return d.fail(err)
}

// fail returns the partial result with err (an *Error carries it too).
func (d *driver) fail(err error) (Result, error) {
	var se *Error
	if errors.As(err, &se) {
		se.Result = d.res
	}
	return d.res, err
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
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
	// onHold and onResume are called (outside the lock) when the clock stops for Suspend and when it
	// runs again: the pool then counts the execution as parked.
	onHold, onResume func()
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
	c.held++
	first := c.held == 1 && !c.stopped
	if first {
		if !c.timer.Stop() {
			c.remaining = 0 // it fired already: the execution is being stopped
		} else {
			c.remaining -= time.Since(c.since)
		}
	}
	c.mu.Unlock()
	if first && c.onHold != nil {
		c.onHold()
	}
}

func (c *wallClock) resume() {
	c.mu.Lock()
	c.held--
	last := c.held == 0 && !c.stopped
	if last && c.remaining > 0 {
		c.since = time.Now()
		c.timer = time.AfterFunc(c.remaining, c.expire)
	}
	c.mu.Unlock()
	if last && c.onResume != nil {
		c.onResume()
	}
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
