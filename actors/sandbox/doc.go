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
// Beyond the ECMAScript built-ins there are no globals: no require, no timers, no file, network or
// process access (GoError, which sobek adds, is removed).
//
// Limits (WallTime, MaxToolCalls, MaxOutput, MaxHeapGrowth) turn runaway code into an *Error of Kind
// "timeout" or "limit"; compile failures and uncaught exceptions are Kinds "syntax" and "runtime".
// The *Error carries whatever was logged and emitted before the failure. Limits.Seed and Limits.Now
// make Math.random and Date reproducible for deterministic replay.
//
// Tool calls are made one at a time, in program order, on the runtime's goroutine: a Host.Call that
// blocks (waiting for a human approval, say) simply holds the code at its await.
//
// Example:
//
//	host := sandbox.HostFunc(func(ctx context.Context, path string, args any) (any, error) {
//		if path == "demo.createTodo" {
//			return map[string]any{"id": 7, "title": args.(map[string]any)["title"]}, nil
//		}
//		return nil, fmt.Errorf("unknown tool %s", path)
//	})
//	res, err := sandbox.Run(ctx, `
//		const todo = await tools.demo.createTodo({title: "x"});
//		emit({created: todo.title});
//		return todo.id;`, host, sandbox.Limits{WallTime: 10 * time.Second})
//	var se *sandbox.Error
//	switch {
//	case errors.As(err, &se):
//		// show "Error: " + se.Message to the user as an isError result, with se.Result.Logs
//	case err != nil:
//		// cancelled, or an internal failure
//	default:
//		// res.Value == 7.0, res.Emitted == [{"created": "x"}], res.ToolCalls == 1
//	}
//
// The runtime is in-process, so isolation is best-effort against resource exhaustion: Interrupt only
// acts between JS instructions, so a single long built-in call (a huge Array.prototype.fill, a
// catastrophic regular expression — bounded by a 5s regexp2 match timeout) is not stopped mid-call;
// Run then returns after a one-second grace period and leaves that goroutine to finish on its own.
package sandbox
