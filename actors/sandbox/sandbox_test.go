package sandbox

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// call is one Host.Call seen by fakeHost.
type call struct {
	Path string
	Args any
}

// fakeHost records calls and answers them from handlers keyed by path; unknown paths echo their input.
type fakeHost struct {
	mu       sync.Mutex
	calls    []call
	handlers map[string]func(ctx context.Context, args any) (any, error)
}

func (h *fakeHost) Call(ctx context.Context, path string, args any) (any, error) {
	h.mu.Lock()
	h.calls = append(h.calls, call{path, args})
	fn := h.handlers[path]
	h.mu.Unlock()
	if fn != nil {
		return fn(ctx, args)
	}
	return map[string]any{"path": path, "args": args}, nil
}

func (h *fakeHost) recorded() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]call(nil), h.calls...)
}

func run(t *testing.T, code string, host Host, lim Limits) (Result, error) {
	t.Helper()
	if host == nil {
		host = &fakeHost{}
	}
	if lim.WallTime == 0 {
		lim.WallTime = 10 * time.Second
	}
	// The package's tests share the default pool and run in parallel: wait for a slot rather than
	// being refused (the caps have their own tests).
	lim.WaitForSlot = true
	// A backstop beyond the wall time: were WallTime not enforced, the run ends here as the caller's
	// deadline (a timeout naming no limit) instead of hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), lim.WallTime+30*time.Second)
	defer cancel()
	return Run(ctx, code, host, lim)
}

// mustRun runs code and fails the test on any error.
func mustRun(t *testing.T, code string, host Host) Result {
	t.Helper()
	res, err := run(t, code, host, Limits{})
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return res
}

// wantError runs code and checks that it fails with an *Error of the kind whose message contains want.
func wantError(t *testing.T, code string, host Host, lim Limits, kind, want string) *Error {
	t.Helper()
	_, err := run(t, code, host, lim)
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("Run(%q) = %v (%T), want *Error of kind %q", code, err, err, kind)
	}
	if se.Kind != kind || !strings.Contains(se.Message, want) {
		t.Fatalf("Run(%q) = %s error %q, want %s error containing %q", code, se.Kind, se.Message, kind, want)
	}
	return se
}

// limitOf is se.Limit, "" for nil.
func limitOf(se *Error) string {
	if se == nil {
		return ""
	}
	return se.Limit
}

// kindOf is the *Error kind of an execution stopped by limit (a sandbox.Limit* name).
func kindOf(limit string) string {
	if limit == LimitWallTime {
		return KindTimeout
	}
	return KindLimit
}

// wantLimit runs code and checks that the limit named (a Limit* constant) stopped it: the *Error has
// that limit's kind and names it, and its message contains want. Another limit standing in (a
// memory bomb stopped by the wall time, a flood of output by the heap bound) fails it, so each
// limit's test fails when that limit is not enforced.
func wantLimit(t *testing.T, code string, host Host, lim Limits, limit, want string) *Error {
	t.Helper()
	_, err := run(t, code, host, lim)
	return checkLimit(t, err, limit, want)
}

// checkLimit checks that err is an *Error of limit's kind naming limit, with want in its message.
func checkLimit(t *testing.T, err error, limit, want string) *Error {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want the %s limit's *Error", err, err, limit)
	}
	if se.Kind != kindOf(limit) || se.Limit != limit || !strings.Contains(se.Message, want) {
		t.Fatalf("err = %s error (limit %q) %q, want %s error of limit %q containing %q",
			se.Kind, se.Limit, se.Message, kindOf(limit), limit, want)
	}
	return se
}

func TestReturnValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want any
	}{
		{`return 42`, 42.0},
		{`return 1.5`, 1.5},
		{`return -0`, 0.0},
		{`return "héllo ✓"`, "héllo ✓"},
		{`return true`, true},
		{`return false`, false},
		{`return null`, nil},
		{`return undefined`, nil},
		{``, nil},
		{`const x: number = 1`, nil},
		{`return [1, "a", null, true, [2]]`, []any{1.0, "a", nil, true, []any{2.0}}},
		{`return {a: 1, b: {c: [1, 2]}, d: "x"}`, map[string]any{"a": 1.0, "b": map[string]any{"c": []any{1.0, 2.0}}, "d": "x"}},
		{`return {a: undefined, b: 1}`, map[string]any{"b": 1.0}},
		{`return [undefined]`, []any{nil}},
		{`return NaN`, nil},
		{`return new Date(0)`, "1970-01-01T00:00:00.000Z"},
		{`return new Map([[1, 2]])`, map[string]any{}},
		{`return {toJSON() { return "custom" }}`, "custom"},
		{`interface Todo { id: number; title: string }
		  const t: Todo = {id: 7, title: "x"};
		  return t.id satisfies number`, 7.0},
		{`enum Color { Red = 1, Green }
		  return Color.Green`, 2.0},
		{`class A { #x = 1; static s = 2; get x() { return this.#x } }
		  return new A().x + A.s`, 3.0},
		{`const o: any = {a: {b: null}}; return o?.a?.b?.c ?? "dflt"`, "dflt"},
		{`async function* g() { yield 1; yield 2 }
		  let s = 0; for await (const v of g()) s += v; return s`, 3.0},
		{`let log: string[] = [];
		  { using r = { [Symbol.dispose]() { log.push("disposed") } }; log.push("body") }
		  return log`, []any{"body", "disposed"}},
		{`return String(2n ** 70n)`, "1180591620717411303424"},
		{`return [3, 1, 2].toSorted()`, []any{1.0, 2.0, 3.0}},
	} {
		t.Run(tc.code, func(t *testing.T) {
			res := mustRun(t, tc.code, nil)
			if !reflect.DeepEqual(res.Value, tc.want) {
				t.Fatalf("Value = %#v, want %#v", res.Value, tc.want)
			}
		})
	}
}

func TestTopLevelAwait(t *testing.T) {
	t.Parallel()
	res := mustRun(t, `
		const a = await Promise.resolve(20);
		const b = await new Promise<number>(resolve => resolve(22));
		const todo = await tools.demo.createTodo({title: "x"});
		return {sum: a + b, path: todo.path};`, nil)
	want := map[string]any{"sum": 42.0, "path": "demo.createTodo"}
	if !reflect.DeepEqual(res.Value, want) {
		t.Fatalf("Value = %#v, want %#v", res.Value, want)
	}
}

func TestEmitOrder(t *testing.T) {
	t.Parallel()
	res := mustRun(t, `
		emit(1);
		emit({a: [1, 2]});
		await Promise.resolve();
		emit("three");
		emit(null);
		emit();
		const p = Promise.resolve().then(() => emit("from then"));
		emit("before then");
		await p;
		return "done";`, nil)
	want := []any{1.0, map[string]any{"a": []any{1.0, 2.0}}, "three", nil, nil, "before then", "from then"}
	if !reflect.DeepEqual(res.Emitted, want) {
		t.Fatalf("Emitted = %#v, want %#v", res.Emitted, want)
	}
	if res.Value != "done" {
		t.Fatalf("Value = %#v", res.Value)
	}
}

func TestEmitSnapshotsValue(t *testing.T) {
	t.Parallel()
	res := mustRun(t, `const o = {n: 1}; emit(o); o.n = 2; emit(o);`, nil)
	want := []any{map[string]any{"n": 1.0}, map[string]any{"n": 2.0}}
	if !reflect.DeepEqual(res.Emitted, want) {
		t.Fatalf("Emitted = %#v, want %#v", res.Emitted, want)
	}
}

func TestConsoleCapture(t *testing.T) {
	t.Parallel()
	res := mustRun(t, `
		console.log("plain", 1, true, null, undefined, [1, "a"], {k: "v"});
		console.info("info line");
		console.warn("careful");
		console.error(new TypeError("bad thing"));
		console.debug("dbg", Symbol("s"), 10n, function named() {});
		const cyc: any = {}; cyc.self = cyc;
		console.log(cyc);
		console.log();`, nil)
	want := []string{
		`plain 1 true null undefined [1,"a"] {"k":"v"}`,
		"info: info line",
		"warn: careful",
		"error: TypeError: bad thing",
		"debug: dbg Symbol(s) 10n [Function: named]",
		"[object Object]",
		"",
	}
	if !reflect.DeepEqual(res.Logs, want) {
		t.Fatalf("Logs =\n%q\nwant\n%q", res.Logs, want)
	}
}

func TestToolPathRouting(t *testing.T) {
	t.Parallel()
	host := &fakeHost{}
	mustRun(t, `
		await tools.demo.createTodo({title: "x", done: false, n: 2, tags: ["a"], nested: {k: null}});
		await tools.search({query: "todos", limit: 5});
		await tools.describe({path: "demo.createTodo"});
		await tools.github.acme.main.issues.list();
		await tools.x["y-z"]("str");
		await tools.n[0](7);
		const f = tools.a.b;
		await f(true);
		tools.noAwait({});`, host)
	want := []call{
		{"demo.createTodo", map[string]any{"title": "x", "done": false, "n": 2.0, "tags": []any{"a"}, "nested": map[string]any{"k": nil}}},
		{"search", map[string]any{"query": "todos", "limit": 5.0}},
		{"describe", map[string]any{"path": "demo.createTodo"}},
		{"github.acme.main.issues.list", nil},
		{"x.y-z", "str"},
		{"n.0", 7.0},
		{"a.b", true},
		{"noAwait", map[string]any{}},
	}
	if got := host.recorded(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls =\n%#v\nwant\n%#v", got, want)
	}
}

func TestToolResultsArePlainJS(t *testing.T) {
	t.Parallel()
	type item struct {
		ID    int    `json:"id"`
		Title string `json:"title"`
	}
	host := &fakeHost{handlers: map[string]func(context.Context, any) (any, error){
		"items": func(context.Context, any) (any, error) { return []item{{1, "a"}, {2, "b"}}, nil },
		"nil":   func(context.Context, any) (any, error) { return nil, nil },
		"bad":   func(context.Context, any) (any, error) { return map[string]any{"f": func() {}}, nil },
	}}
	res := mustRun(t, `
		const items = await tools.items();
		const n = await tools.nil();
		let bad = "";
		try { await tools.bad() } catch (e) { bad = (e as Error).message }
		return {
			plain: Array.isArray(items) && Object.getPrototypeOf(items[0]) === Object.prototype,
			titles: items.map((i: any) => i.title).join(","),
			n, bad: bad.includes("not JSON-serializable"),
		};`, host)
	want := map[string]any{"plain": true, "titles": "a,b", "n": nil, "bad": true}
	if !reflect.DeepEqual(res.Value, want) {
		t.Fatalf("Value = %#v, want %#v", res.Value, want)
	}
}

func TestToolErrors(t *testing.T) {
	t.Parallel()
	host := &fakeHost{handlers: map[string]func(context.Context, any) (any, error){
		"demo.fail": func(context.Context, any) (any, error) { return nil, errors.New("upstream said no") },
	}}
	res := mustRun(t, `
		try {
			await tools.demo.fail({});
			return "unreachable";
		} catch (e) {
			return {message: (e as Error).message, isError: e instanceof Error, name: (e as Error).name};
		}`, host)
	want := map[string]any{"message": "upstream said no", "isError": true, "name": "Error"}
	if !reflect.DeepEqual(res.Value, want) {
		t.Fatalf("Value = %#v, want %#v", res.Value, want)
	}

	se := wantError(t, "console.log('before');\nawait tools.demo.fail({});", host, Limits{}, KindRuntime, "upstream said no")
	if !strings.Contains(se.Message, "code.ts:2:") {
		t.Errorf("message %q has no frame for line 2", se.Message)
	}
	if !reflect.DeepEqual(se.Result.Logs, []string{"before"}) || se.Result.ToolCalls != 1 {
		t.Errorf("partial result = %+v", se.Result)
	}
	// .catch on the un-awaited promise works too.
	res = mustRun(t, `return tools.demo.fail().catch((e: Error) => "caught " + e.message)`, host)
	if res.Value != "caught upstream said no" {
		t.Fatalf("Value = %#v", res.Value)
	}
}

func TestToolArgumentMustBeJSON(t *testing.T) {
	t.Parallel()
	wantError(t, `await tools.x("y".repeat(5 << 20))`, nil, Limits{}, KindRuntime, "at most 4194304 are accepted")
	wantError(t, `await tools.x({cb() {}})`, nil, Limits{}, KindRuntime, `tools.x: the argument is not JSON-serializable: it has a function at key "cb"`)
	res := mustRun(t, `try { await tools.x(() => 1) } catch (e) { return (e as Error).message }`, nil)
	if res.Value != "tools.x: the argument is not JSON-serializable: it is a function" || res.ToolCalls != 0 {
		t.Fatalf("result = %+v", res)
	}
}

func TestPromiseAllOfToolCalls(t *testing.T) {
	t.Parallel()
	host := &fakeHost{handlers: map[string]func(context.Context, any) (any, error){
		"double": func(_ context.Context, args any) (any, error) { return args.(float64) * 2, nil },
	}}
	res := mustRun(t, `
		const results = await Promise.all([1, 2, 3, 4].map(n => tools.double(n)));
		const settled = await Promise.allSettled([tools.double(5), Promise.reject(new Error("x"))]);
		return {results, settled: settled.map(s => s.status)};`, host)
	want := map[string]any{"results": []any{2.0, 4.0, 6.0, 8.0}, "settled": []any{"fulfilled", "rejected"}}
	if !reflect.DeepEqual(res.Value, want) {
		t.Fatalf("Value = %#v, want %#v", res.Value, want)
	}
	if res.ToolCalls != 5 {
		t.Fatalf("ToolCalls = %d, want 5", res.ToolCalls)
	}
}

func TestSyntaxErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ code, want string }{
		{"const a = 1;\nlet b = ;", `2:9: Unexpected ";"`},
		{"return 1 +", "1:11: Unexpected end of code"},
		{"const x: number = 1;\nif (x {\n}", `2:7: Expected ")" but found "{"`},
		{"function f() {\n  return 1;\n", "3:1: Unexpected end of code"},
		{"const s = `unterminated", "1:24: Unexpected end of code"},
		{"import fs from 'fs';", "1:8: "},
		{"export const a = 1;", "1:1: "},
		{"const s = \"ünïcode\"; let = ;", "1:28: "},
	} {
		t.Run(tc.code, func(t *testing.T) {
			se := wantError(t, tc.code, nil, Limits{}, KindSyntax, tc.want)
			if _, err := Compile(tc.code); !errors.As(err, new(*Error)) {
				t.Fatalf("Compile error %v is not an *Error", err)
			}
			if se.Result.ToolCalls != 0 || len(se.Result.Logs) != 0 {
				t.Fatalf("partial result = %+v", se.Result)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	t.Parallel()
	js, err := Compile("const todo: {id: number} = await tools.demo.createTodo({title: \"x\"});\nreturn todo.id;")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"async () =>", "await tools.demo.createTodo", "return todo.id"} {
		if !strings.Contains(js, want) {
			t.Errorf("compiled JS lacks %q:\n%s", want, js)
		}
	}
	if strings.Contains(js, ": number") {
		t.Errorf("compiled JS still has types:\n%s", js)
	}
	p1, err1 := compileProgram("return 'cached'")
	p2, err2 := compileProgram("return 'cached'")
	if err1 != nil || err2 != nil || p1 != p2 {
		t.Fatalf("compileProgram did not reuse the cached program: %p %v, %p %v", p1, err1, p2, err2)
	}
}

func TestCodeSizeLimit(t *testing.T) {
	t.Parallel()
	code := "return " + `"` + strings.Repeat("x", MaxCodeSize) + `"`
	wantLimit(t, code, nil, Limits{}, LimitCodeSize, "at most")
	wantLimit(t, "return ["+strings.Repeat("{},", maxBraces+1)+"]", nil, Limits{}, LimitCodeSize, "'{' characters")
	// Just under the limit is fine.
	code = "return " + `"` + strings.Repeat("x", MaxCodeSize-20) + `".length`
	if res := mustRun(t, code, nil); res.Value != float64(MaxCodeSize-20) {
		t.Fatalf("Value = %v", res.Value)
	}
}

func TestDeeplyNestedScopesCompileFast(t *testing.T) {
	t.Parallel()
	// esbuild's default renamer is cubic in nested shadowing scopes; such code switches to the
	// minifying renamer. 2000 levels take minutes otherwise.
	code := "const f = " + strings.Repeat("x => ", 2000) + "1; let g: any = f; for (let i = 0; i < 2000; i++) g = g(i); return g"
	start := time.Now()
	if res := mustRun(t, code, nil); res.Value != 1.0 {
		t.Fatalf("Value = %v", res.Value)
	}
	// 0.8 s alone under the race detector; the cubic renamer takes minutes, so a generous bound
	// still catches it on loaded CI cores.
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("took %v", d)
	}
	// Function names survive minification.
	code = strings.Repeat("{", 500) + strings.Repeat("}", 500) + "function helper() { return 1 }\nclass Widget {}\nreturn [helper.name, Widget.name]"
	if res := mustRun(t, code, nil); !reflect.DeepEqual(res.Value, []any{"helper", "Widget"}) {
		t.Fatalf("Value = %v", res.Value)
	}
}

func TestRuntimeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ code, want string }{
		{"const a = 1;\nreturn notDefined + a;", "ReferenceError: notDefined is not defined\n    at code.ts:2:"},
		{"throw new Error('boom')", "boom\n    at code.ts:1:"},
		{"throw new RangeError('out')", "RangeError: out"},
		{"function inner() { throw new TypeError('deep') }\nfunction outer() { inner() }\nouter()",
			"TypeError: deep\n    at inner (code.ts:1:"},
		{"const o: any = undefined;\nreturn o.field", "TypeError: Cannot read property 'field' of undefined"},
		{"throw 'a string'", "a string"},
		{"throw {code: 42}", `{"code":42}`},
		{"await Promise.reject(new Error('rejected'))", "rejected"},
		{"function f(): number { return f() + 1 }\nreturn f()", "RangeError: Maximum call stack size exceeded"},
		{"await new Promise(() => {})", "never finished"},
		{"return () => 1", "the return value is not JSON-serializable: it is a function"},
		{"return {nested: {cb() {}}}", `the return value is not JSON-serializable: it has a function at key "cb"`},
		{"return Symbol('s')", "the return value is not JSON-serializable: it is a symbol"},
		{"const a: any = {}; a.self = a; return a", "the return value is not JSON-serializable: Converting circular structure to JSON"},
		{"return 1n", "BigInt"},
		{"return {toJSON() { throw new Error('nope') }}", "the return value is not JSON-serializable: nope"},
		{"let a: any = 1; for (let i = 0; i < 2000; i++) a = [a]; return a", "nested more than 1000 levels"},
		{"emit(() => 1)", "emit: the value is not JSON-serializable: it is a function"},
		{"await import('fs')", "dynamic modules not enabled"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			wantError(t, tc.code, nil, Limits{}, KindRuntime, tc.want)
		})
	}
}

func TestErrorResultKeepsOutput(t *testing.T) {
	t.Parallel()
	se := wantError(t, `console.log("a"); emit(1); await tools.t(); throw new Error("late")`, nil, Limits{}, KindRuntime, "late")
	want := Result{Emitted: []any{1.0}, Logs: []string{"a"}, ToolCalls: 1}
	if !reflect.DeepEqual(se.Result, want) {
		t.Fatalf("Result = %#v, want %#v", se.Result, want)
	}
	res, err := run(t, `console.log("a"); throw new Error("x")`, nil, Limits{})
	if !errors.As(err, &se) || !reflect.DeepEqual(res, se.Result) || !reflect.DeepEqual(res.Logs, []string{"a"}) {
		t.Fatalf("returned Result = %#v, error %v", res, err)
	}
	if got := se.Error(); !strings.HasPrefix(got, "sandbox runtime error: x\n    at code.ts:1:") {
		t.Fatalf("Error() = %q", got)
	}
}

func TestInfiniteLoopTimesOut(t *testing.T) {
	t.Parallel()
	for _, code := range []string{
		"while (true) {}",
		"for (;;) { Math.random() }",
		"await Promise.resolve(); while (true) {}",
		"console.log('start'); const f = () => { while (true) {} }; [1].map(f)",
		"let x = 0; while (true) { try { x++ } catch { } finally { continue } }",
	} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			wantLimit(t, code, nil, Limits{WallTime: 200 * time.Millisecond}, LimitWallTime, "timed out after 200ms")
			if d := time.Since(start); d > 200*time.Millisecond+2*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestCancelWhileHostBlocks(t *testing.T) {
	t.Parallel()
	for _, respectsCtx := range []bool{true, false} {
		t.Run(fmt.Sprintf("respectsCtx=%v", respectsCtx), func(t *testing.T) {
			t.Parallel()
			entered := make(chan struct{})
			release := make(chan struct{})
			defer close(release)
			host := HostFunc(func(ctx context.Context, path string, args any) (any, error) {
				close(entered)
				if respectsCtx {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				<-release // a Host that ignores ctx
				return nil, nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := Run(ctx, "console.log('waiting'); await tools.approval.wait(); return 'unreachable'", host, Limits{})
				done <- err
			}()
			<-entered
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) || errors.As(err, new(*Error)) {
					t.Fatalf("err = %v, want a plain error wrapping context.Canceled", err)
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("returned %v after cancel", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
		})
	}
}

func TestWallTimeWhileHostBlocks(t *testing.T) {
	t.Parallel()
	host := HostFunc(func(ctx context.Context, path string, args any) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	start := time.Now()
	se := wantLimit(t, "await tools.slow()", host, Limits{WallTime: 200 * time.Millisecond}, LimitWallTime, "timed out")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	if se.Result.ToolCalls != 1 {
		t.Fatalf("ToolCalls = %d", se.Result.ToolCalls)
	}
}

func TestCallerDeadlineIsTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, "while (true) {}", nil, Limits{})
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindTimeout || se.Limit != "" {
		t.Fatalf("err = %v (limit %q), want a timeout *Error naming no limit (the caller's deadline is not WallTime)", err, limitOf(se))
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, "return 1", nil, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestMaxToolCalls(t *testing.T) {
	t.Parallel()
	host := &fakeHost{}
	se := wantLimit(t, `
		let n = 0;
		try {
			for (let i = 0; i < 10; i++) { await tools.ping({i}); n++ }
		} catch (e) {
			return "caught: " + e;
		}
		return n;`, host, Limits{MaxToolCalls: 3}, LimitToolCalls, "more than 3 tools.* calls")
	if se.Result.ToolCalls != 3 || len(host.recorded()) != 3 {
		t.Fatalf("ToolCalls = %d, host saw %d", se.Result.ToolCalls, len(host.recorded()))
	}
	if res := mustRun(t, "for (let i = 0; i < 3; i++) await tools.ping(); return 'ok'", host); res.ToolCalls != 3 {
		t.Fatalf("ToolCalls = %d", res.ToolCalls)
	}
}

func TestMaxOutput(t *testing.T) {
	t.Parallel()
	se := wantLimit(t, `
		console.log("small");
		emit("x".repeat(50));
		try { emit("y".repeat(100)) } catch { }
		return "survived";`, nil, Limits{MaxOutput: 100}, LimitOutput, "output limit exceeded")
	want := Result{Logs: []string{"small"}, Emitted: []any{strings.Repeat("x", 50)}}
	if !reflect.DeepEqual(se.Result, want) {
		t.Fatalf("Result = %#v, want %#v", se.Result, want)
	}
	wantLimit(t, `for (let i = 0; ; i++) console.log("line " + i)`, nil, Limits{MaxOutput: 1000}, LimitOutput, "1000 bytes")
	// The return value counts too (it used to go to the client whole).
	wantLimit(t, `return "z".repeat(2000)`, nil, Limits{MaxOutput: 1000}, LimitOutput, "the return value exceeds the output limit")
	wantLimit(t, `emit("x".repeat(600)); return "z".repeat(600)`, nil, Limits{MaxOutput: 1000}, LimitOutput, "over 1000 bytes")
}

func TestMemoryBomb(t *testing.T) {
	t.Parallel() // MaxHeapGrowth is per execution: other tests' allocations do not count
	for _, code := range []string{
		`const a: any[] = []; while (true) a.push(new Array(1000).fill("x" + a.length));`,
		`let s = "x"; const keep: string[] = []; while (true) { s = s + s; keep.push(s) }`,
		`const m = new Map(); for (let i = 0; ; i++) m.set(i, {i, s: "v" + i});`,
	} {
		t.Run(code, func(t *testing.T) {
			start := time.Now()
			// A wall time the bomb cannot reach: it must be the memory bound that stops it.
			_, err := run(t, code, nil, Limits{MaxHeapGrowth: 64 << 20, WallTime: time.Minute})
			se := checkLimit(t, err, LimitHeap, "memory limit exceeded")
			// Stopped within a fraction of a second normally; the bound is generous for the race
			// detector on two loaded cores.
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("took %v", d)
			}
			t.Logf("%s after %v: %s", se.Kind, time.Since(start).Round(time.Millisecond), se.Message)
		})
	}
}

// standardGlobals are the global names a runtime may have: ECMAScript built-ins (sobek's subset)
// plus the sandbox's tools, emit and console.
var standardGlobals = strings.Fields(`
	AggregateError Array ArrayBuffer BigInt BigInt64Array BigUint64Array Boolean DataView Date Error
	EvalError Float32Array Float64Array Function Infinity Int16Array Int32Array Int8Array JSON Map Math
	NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set String Symbol SyntaxError
	TypeError URIError Uint16Array Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakSet
	decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis isFinite isNaN
	parseFloat parseInt undefined unescape
	console emit tools`)

func TestGlobalsAreStandard(t *testing.T) {
	t.Parallel()
	res := mustRun(t, `return Object.getOwnPropertyNames(globalThis)`, nil)
	var got []string
	for _, v := range res.Value.([]any) {
		got = append(got, v.(string))
	}
	allowed := map[string]bool{}
	for _, g := range standardGlobals {
		allowed[g] = true
	}
	var extra []string
	for _, g := range got {
		if !allowed[g] {
			extra = append(extra, g)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Fatalf("non-standard globals: %v", extra)
	}
	for _, g := range []string{"tools", "emit", "console", "JSON", "Promise"} {
		if !contains(got, g) {
			t.Errorf("global %s missing", g)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSandboxEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want any
	}{
		{`return typeof require`, "undefined"},
		{`return typeof process`, "undefined"},
		{`return typeof module + typeof exports + typeof __dirname`, "undefinedundefinedundefined"},
		{`return typeof setTimeout + typeof setInterval + typeof setImmediate + typeof queueMicrotask`, "undefinedundefinedundefinedundefined"},
		{`return typeof fetch + typeof XMLHttpRequest + typeof WebSocket + typeof Deno + typeof Bun`, "undefinedundefinedundefinedundefinedundefined"},
		{`return typeof GoError`, "undefined"},
		{`try { require("fs"); return "escaped" } catch (e) { return (e as Error).name }`, "ReferenceError"},
		{`try { setTimeout(() => {}, 1); return "escaped" } catch (e) { return (e as Error).name }`, "ReferenceError"},
		{`return Function("return this")() === globalThis`, true},
		{`return (0, eval)("this") === globalThis`, true},
		{`return emit.constructor("return this")() === globalThis`, true},
		{`return await tools.constructor.constructor("x")`, map[string]any{"path": "constructor.constructor", "args": "x"}},
		{`return Object.getOwnPropertyNames(Function("return this")()).includes("process")`, false},
		{`try { await import("fs"); return "escaped" } catch (e) { return "blocked" }`, "blocked"},
		{`try { await import("data:text/javascript,export default 1"); return "escaped" } catch { return "blocked" }`, "blocked"},
		// eval and Function must not load source maps from the file system.
		{`return eval("1 + 1\n//# sourceMappingURL=/etc/passwd")`, 2.0},
		{`return Function("return 3\n//# sourceMappingURL=file:///etc/shadow")()`, 3.0},
		{`return eval("typeof tools")`, "function"},
		// Host values are plain JS, not Go objects with methods.
		{`const r = await tools.x(); return Object.keys(r).sort()`, []any{"args", "path"}},
		{`const r: any = await tools.x(); return typeof r.path.constructor.prototype.Len`, "undefined"},
		{`globalThis.tools = null; return typeof tools`, "object"},
		{`return typeof Symbol.asyncIterator`, "symbol"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			res := mustRun(t, tc.code, nil)
			if !reflect.DeepEqual(res.Value, tc.want) {
				t.Fatalf("Value = %#v, want %#v", res.Value, tc.want)
			}
		})
	}
}

func TestNoStateLeaksBetweenRuns(t *testing.T) {
	t.Parallel()
	mustRun(t, `globalThis.leak = 1; (Object.prototype as any).polluted = true; Array.prototype.push = null as any; JSON.stringify = null as any`, nil)
	res := mustRun(t, `return [typeof (globalThis as any).leak, ({} as any).polluted, typeof [].push, typeof JSON.stringify]`, nil)
	if !reflect.DeepEqual(res.Value, []any{"undefined", nil, "function", "function"}) {
		t.Fatalf("Value = %#v", res.Value)
	}
}

func TestTamperedIntrinsicsDoNotBreakTheSandbox(t *testing.T) {
	t.Parallel()
	res := mustRun(t, `
		JSON.stringify = () => "tampered";
		JSON.parse = () => "tampered";
		(globalThis as any).Error = function () { return {} };
		Object.defineProperty(Object.prototype, "path", {set() { throw new Error("setter ran") }});
		emit({a: 1});
		const r = await tools.x({b: 2});
		return r;`, nil)
	if !reflect.DeepEqual(res.Emitted, []any{map[string]any{"a": 1.0}}) {
		t.Fatalf("Emitted = %#v", res.Emitted)
	}
	if !reflect.DeepEqual(res.Value, map[string]any{"path": "x", "args": map[string]any{"b": 2.0}}) {
		t.Fatalf("Value = %#v", res.Value)
	}
}

func TestRecursiveBuiltinsAreBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want any
	}{
		{`try { JSON.parse("[".repeat(100000) + "]".repeat(100000)); return "parsed" } catch (e) { return (e as Error).name }`, "SyntaxError"},
		{`let a: any = []; for (let i = 0; i < 5000; i++) a = [a]; try { JSON.stringify(a); return "done" } catch (e) { return (e as Error).name }`, "RangeError"},
		{`let a: any = []; for (let i = 0; i < 5000; i++) a = [a]; try { String(a); return "done" } catch (e) { return (e as Error).name }`, "RangeError"},
		{`let a: any = []; for (let i = 0; i < 5000; i++) a = [a]; try { a.toLocaleString(); return "done" } catch (e) { return (e as Error).name }`, "RangeError"},
		// Ordinary use is unchanged.
		{`return JSON.parse('{"a":[1,{"b":"[{"}]}', (k, v) => typeof v === "number" ? v * 10 : v)`, map[string]any{"a": []any{10.0, map[string]any{"b": "[{"}}}},
		{`return JSON.stringify({b: 1, a: 2, c: {a: 3, b: 4}}, ["a", "c"])`, `{"a":2,"c":{"a":3}}`},
		{`return JSON.stringify({a: 1, b: [1, 2]}, (k, v) => typeof v === "number" ? v + 1 : v)`, `{"a":2,"b":[2,3]}`},
		{`return JSON.stringify({a: [1]}, null, 2)`, "{\n  \"a\": [\n    1\n  ]\n}"},
		{`return JSON.stringify({d: new Date(0), u: undefined, f() {}})`, `{"d":"1970-01-01T00:00:00.000Z"}`},
		{`return JSON.stringify(undefined) === undefined`, true},
		{`return [JSON.parse.name, JSON.parse.length, JSON.stringify.length, [].join.name, [].join.length]`, []any{"parse", 2.0, 3.0, "join", 1.0}},
		{`return [[1, 2], [3]].join(";") + String([1, [2, [3]]])`, "1,2;31,2,3"},
		{`return Object.keys(JSON)`, []any{}},
	} {
		t.Run(tc.code, func(t *testing.T) {
			res := mustRun(t, tc.code, nil)
			if !reflect.DeepEqual(res.Value, tc.want) {
				t.Fatalf("Value = %#v, want %#v", res.Value, tc.want)
			}
		})
	}
}

func TestSeedAndClock(t *testing.T) {
	t.Parallel()
	const code = `return [Math.random(), Math.random(), Math.random()]`
	a, _ := run(t, code, nil, Limits{Seed: 42})
	b, _ := run(t, code, nil, Limits{Seed: 42})
	c, _ := run(t, code, nil, Limits{Seed: 43})
	if !reflect.DeepEqual(a.Value, b.Value) {
		t.Fatalf("same seed gave %v and %v", a.Value, b.Value)
	}
	if reflect.DeepEqual(a.Value, c.Value) {
		t.Fatalf("different seeds gave the same %v", a.Value)
	}
	for _, v := range a.Value.([]any) {
		if f := v.(float64); f < 0 || f >= 1 {
			t.Fatalf("Math.random() = %v", f)
		}
	}
	u1, _ := run(t, code, nil, Limits{})
	u2, _ := run(t, code, nil, Limits{})
	if reflect.DeepEqual(u1.Value, u2.Value) {
		t.Fatalf("unseeded runs repeated %v", u1.Value)
	}

	now := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	res, err := run(t, `return [Date.now(), new Date().toISOString(), new Date(0).toISOString()]`, nil,
		Limits{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{float64(now.UnixMilli()), "2026-03-04T05:06:07.008Z", "1970-01-01T00:00:00.000Z"}
	if !reflect.DeepEqual(res.Value, want) {
		t.Fatalf("Value = %#v, want %#v", res.Value, want)
	}
}

func TestHostPanicIsInternalError(t *testing.T) {
	t.Parallel()
	host := HostFunc(func(context.Context, string, any) (any, error) { panic("host bug") })
	_, err := run(t, `try { await tools.x() } catch { } return 1`, host, Limits{})
	if err == nil || errors.As(err, new(*Error)) || !strings.Contains(err.Error(), "host bug") {
		t.Fatalf("err = %v, want a plain internal error", err)
	}
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	p, _ := newTestPool(t, PoolOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Run(context.Background(), fmt.Sprintf(`
				let s = 0;
				for (let j = 0; j < 20; j++) { const r = await tools.echo({j}); s += r.args.j }
				console.log("run", %d);
				return s + %d;`, i, i), &fakeHost{}, Limits{WaitForSlot: true}) // 16 > the node cap on small machines
			if err != nil {
				errs <- err
				return
			}
			if res.Value != float64(190+i) || res.ToolCalls != 20 || len(res.Logs) != 1 {
				errs <- fmt.Errorf("run %d: %+v", i, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRunNeverPanics(t *testing.T) {
	t.Parallel()
	for _, code := range []string{
		"", ";", "}", "{", "return", "await", "\x00", "\uFFFD", "/*", "`${", "return /(a*)*b/.test('a'.repeat(25))",
		"return new Proxy({}, {get() { throw new Error('trap') }})",
		"return new Proxy({}, {ownKeys() { while (true) {} }})",
		"const p: any = new Proxy(function () {}, {}); return p",
		"return {get x() { throw new Error('getter') }}",
		"throw new Proxy({}, {get() { throw 1 }})",
		"throw Object.create(null)",
		"const e = new Error('m'); Object.defineProperty(e, 'stack', {get() { throw 1 }}); throw e",
		"tools()", "new tools.x()", "tools.then", "await tools", "return typeof tools.x", "return String(tools)",
	} {
		res, err := Run(context.Background(), code, nil, Limits{WallTime: 300 * time.Millisecond})
		var se *Error
		if err != nil && !errors.As(err, &se) {
			t.Errorf("Run(%q) = internal error %v", code, err)
		}
		_ = res
	}
}

// FuzzRun checks that no input makes Run panic or fail internally. `go test` runs only the seeds; use
// -fuzz=FuzzRun to explore.
func FuzzRun(f *testing.F) {
	for _, seed := range []string{
		"return 1", "await tools.a.b({x: [1, {y: null}]})", "emit(emit)", "throw 1", "let a = ;", "while(1){}",
		"return JSON.stringify(JSON.parse('[[[]]]'), null, 1)", "console.log(new Proxy({}, {}))",
		"const o: any = {}; o.o = o; console.log(o); return String([o])", `return [..."abc"].reverse().join("")`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, code string) {
		_, err := Run(context.Background(), code, nil, Limits{WallTime: 100 * time.Millisecond, MaxHeapGrowth: 256 << 20})
		if err != nil && !errors.As(err, new(*Error)) {
			t.Fatalf("Run(%q) = internal error %v", code, err)
		}
	})
}
