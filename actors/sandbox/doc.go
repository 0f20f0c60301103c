// Package sandbox runs untrusted TypeScript ("code mode") with no ambient I/O.
//
// An agent sends TypeScript to the execute tool; Run compiles it with esbuild (types stripped, the
// features sobek lacks lowered) and executes it in a fresh sobek runtime. The code is the body of an
// async function, so top-level await and return work. Its only ways out are:
//
//   - tools: a Proxy; tools.a.b.c(args) calls Host.Call(ctx, "a.b.c", args) and returns a Promise of
//     the JSON result (tools.search({query}) and tools.describe({path}) are just the paths "search" and
//     "describe"). A Host error rejects the Promise with a JS Error carrying err.Error().
//   - emit(value): user-visible output, collected in Result.Emitted.
//   - console.log/info/warn/error/debug: collected in Result.Logs.
//   - return: the value in Result.Value.
//
// Everything crossing the boundary is JSON: arguments and results are converted with JSON semantics,
// and functions, symbols, cycles and BigInts in a return value, an emit or a tool argument are errors.
// A tool argument may be at most 4 MiB as JSON (it is held in the caller's process).
// Beyond the ECMAScript built-ins there are no globals: no require, no timers, no file, network or
// process access (GoError, which sobek adds, is removed).
//
// Limits (WallTime, MaxToolCalls, MaxOutput, MaxHeapGrowth) turn runaway code into an *Error of Kind
// "timeout" or "limit"; compile failures and uncaught exceptions are Kinds "syntax" and "runtime"; an
// execution refused by a running cap is Kind "busy" (retryable: nothing ran). The *Error carries
// whatever was logged and emitted before the failure. Limits.Seed and Limits.Now make Math.random and
// Date reproducible for deterministic replay.
//
// Tool calls are made one at a time, in program order, in the caller's process: a Host.Call that
// blocks (waiting for a human approval, say) simply holds the code at its await.
//
// # Worker processes
//
// The code never runs in the caller's process. sobek can only interrupt code between JS instructions,
// so a native built-in (new Array(5e8).fill(0), "x".repeat(2**29), indexOf over a 2**53-long
// array-like) would run to completion whatever the limits say, allocating gigabytes after Run had
// returned. So Run borrows a worker process from a node-wide Pool and drives it over its stdin and
// stdout (length-prefixed JSON frames, see protocol.go): the worker compiles and runs the code in a
// fresh sobek runtime, one execution at a time; tools.* calls come back to the parent as call frames
// and Host.Call runs there, so credentials and the engine never enter the worker. Output is streamed
// as it happens. A worker bounds its own heap (a watchdog sampling runtime/metrics every 5ms, the GC
// soft limit, RLIMIT_DATA as a backstop, and a last look at the memory the runtime mapped when the
// code returns, for a spike between two samples where there is no backstop) and exits at once when
// the execution goes over MaxHeapGrowth; the parent kills a worker whose execution outlived WallTime by PoolOptions.
// InterruptGrace. Either way nothing of an execution survives its limit, and one execution's memory
// no longer counts against another's. Workers die with the node (Pdeathsig) and on Shutdown or
// Pool.Close.
//
// IMPORTANT: a worker is the program's own binary (os.Executable) re-executed with the environment
// variable WorkerEnv set. This package's init function checks it and, in a worker, serves executions
// and exits instead of returning: every binary that links the package — the node, a CLI, a `go test`
// binary — can be a worker with no TestMain or main-function hook. It also means the packages a
// binary links are initialised in each worker, and that the binary must still exist on disk while
// the node runs. A program must not set WorkerEnv itself.
//
// The pool admits at most PoolOptions.MaxRunning running executions per node (default 4×GOMAXPROCS),
// MaxRunningPerOrg per Limits.Org (default all but a quarter of the node, so that one organization
// saturating the node leaves the others slots) and MaxRunningPerTenant per Limits.Tenant (default 4);
// an execution paused in a suspended tool call keeps its worker but not its slot. Over its tenant's
// cap a fresh execution is refused as busy at once; over the others it waits up to SlotWait (5s), and
// a freed slot goes to the waiting execution whose organization runs the fewest. Configure sets the
// default pool's options (metrics go to its Registerer); a node that wants its own pool passes it in
// Limits.Pool.
//
// What the worker model does not do: the worker runs with the node's user and file system (the
// runtime has no API to reach them, but it is not a jail: no seccomp, no namespaces); CPU is bounded by
// WallTime and a worker's two cores (GOMAXPROCS 2), and a worker busy for more than a second lowers its
// own priority; an execution's memory may briefly reach about twice MaxHeapGrowth (one allocation
// between two samples) before the worker dies.
package sandbox
