package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grafana/sobek"
	"github.com/grafana/sobek/parser"
)

// maxCallStackSize bounds JS recursion (sobek's default is unbounded, so a runaway recursion would
// grow the Go heap until the memory guard fires).
const maxCallStackSize = 10_000

// nonStandardGlobals are globals sobek defines that ECMAScript does not; they are deleted.
var nonStandardGlobals = []string{"GoError"}

// setupProgram runs in every fresh runtime before the code. sobek lacks some well-known symbols; define
// them the way esbuild's lowering helpers look them up (Symbol.for("Symbol.<name>")) so that lowered
// for-await and `using` agree with code that names Symbol.asyncIterator or Symbol.dispose.
var setupProgram = sobek.MustCompile("setup.js", `(function () {
	"use strict";
	for (const n of ["asyncIterator", "dispose", "asyncDispose"]) {
		if (typeof Symbol[n] !== "symbol") {
			Object.defineProperty(Symbol, n, { value: Symbol.for("Symbol." + n) });
		}
	}
})();`, true)

// outcome is what one execution in a worker ends with: the return value as JSON ("" for undefined)
// or an error.
type outcome struct {
	value string
	err   error
}

// errInterrupted is the stop reason when the parent interrupts the execution (its wall time ran out or
// its caller gave up); the parent reports its own reason.
var errInterrupted = errors.New("sandbox: interrupted by the node")

// execution is one run inside a worker: the runtime, the intrinsics captured before the code could
// alter them, and the output produced so far. Everything but stop runs on the worker's main goroutine.
type execution struct {
	ctx    context.Context // ended by stop, so that a tool call waiting for its result returns
	cancel context.CancelCauseFunc
	link   *workerLink
	lim    wireLimits
	now    int64 // Unix nanoseconds of the last Limits.Now the parent sent (lim.FixedClock)
	rt     *sobek.Runtime
	timer  *workerTimer // nil: the execution is not traced

	// Captured intrinsics: the code may overwrite JSON or Error, but not these references.
	stringify      sobek.Callable
	parse          sobek.Callable
	isArray        sobek.Callable
	errorCtor      *sobek.Object
	syntaxErrCtor  *sobek.Object
	rangeErrorCtor *sobek.Object
	replacer       sobek.Value // JSON.stringify replacer; see jsonReplacer

	// State of the stringify call in progress (saved and restored around nested calls).
	jsonStrict bool            // reject functions and symbols instead of dropping them
	jsonStack  []*sobek.Object // objects being serialised, outermost first

	codeLines int // lines in the caller's code; stack frames past it are the wrapper's

	joinDepth int // nesting of Array.prototype.join/toLocaleString calls in progress

	waiting func() (resume func()) // called while a tool call waits for its result (the watchdog pauses)

	outBytes  int // bytes of output sent so far (MaxOutput)
	toolCalls int // tools.* calls sent so far (MaxToolCalls)

	mu       sync.Mutex
	reason   error // why the runtime was interrupted; first one wins
	reasonVM bool  // reason was raised by the code's own calls (a limit)
}

func newExecution(link *workerLink, lim wireLimits, now int64) (ex *execution, err error) {
	defer func() {
		if x := recover(); x != nil {
			ex, err = nil, fmt.Errorf("sandbox: setting up the runtime: %v", x)
		}
	}()
	rt := sobek.New()
	ctx, cancel := context.WithCancelCause(context.Background())
	ex = &execution{ctx: ctx, cancel: cancel, link: link, lim: lim, now: now, rt: rt}
	rt.SetMaxCallStackSize(maxCallStackSize)
	// eval and Function would otherwise honour sourceMappingURL comments by reading the file system.
	rt.SetParserOptions(parser.WithDisableSourceMaps)
	if lim.Seed != 0 {
		rng := rand.New(rand.NewPCG(uint64(lim.Seed), 0x9e3779b97f4a7c15))
		rt.SetRandSource(rng.Float64)
	}
	if lim.FixedClock {
		rt.SetTimeSource(func() time.Time { return time.Unix(0, ex.now) })
	}

	global := rt.GlobalObject()
	for _, name := range nonStandardGlobals {
		if err := global.Delete(name); err != nil {
			return nil, fmt.Errorf("sandbox: removing %s: %w", name, err)
		}
	}
	jsonObj := global.Get("JSON").ToObject(rt)
	var ok bool
	if ex.stringify, ok = sobek.AssertFunction(jsonObj.Get("stringify")); !ok {
		return nil, errors.New("sandbox: JSON.stringify missing")
	}
	if ex.parse, ok = sobek.AssertFunction(jsonObj.Get("parse")); !ok {
		return nil, errors.New("sandbox: JSON.parse missing")
	}
	arrayCtor := global.Get("Array").ToObject(rt)
	if ex.isArray, ok = sobek.AssertFunction(arrayCtor.Get("isArray")); !ok {
		return nil, errors.New("sandbox: Array.isArray missing")
	}
	ex.errorCtor = global.Get("Error").ToObject(rt)
	ex.syntaxErrCtor = global.Get("SyntaxError").ToObject(rt)
	ex.rangeErrorCtor = global.Get("RangeError").ToObject(rt)
	ex.replacer = rt.ToValue(ex.jsonReplacer)
	if err := ex.guardRecursiveBuiltins(jsonObj, arrayCtor.Get("prototype").ToObject(rt)); err != nil {
		return nil, err
	}

	if _, err := rt.RunProgram(setupProgram); err != nil {
		return nil, fmt.Errorf("sandbox: setup: %w", err)
	}
	for name, v := range map[string]any{
		"tools":   ex.toolsProxy(""),
		"emit":    ex.emit,
		"console": ex.console(),
	} {
		if err := global.DefineDataProperty(name, rt.ToValue(v), sobek.FLAG_TRUE, sobek.FLAG_TRUE, sobek.FLAG_FALSE); err != nil {
			return nil, fmt.Errorf("sandbox: defining %s: %w", name, err)
		}
	}
	return ex, nil
}

// stop records why the runtime must end (the first reason wins) and interrupts it. It is safe from any
// goroutine.
func (ex *execution) stop(reason error) { ex.stopWith(reason, false) }

// fail is stop for reasons raised on the runtime goroutine by the code's own calls.
func (ex *execution) fail(reason error) { ex.stopWith(reason, true) }

func (ex *execution) stopWith(reason error, byVM bool) {
	ex.mu.Lock()
	if ex.reason == nil {
		ex.reason, ex.reasonVM = reason, byVM
	}
	ex.mu.Unlock()
	ex.rt.Interrupt(reason)
	ex.cancel(reason)
}

// stopReason returns why the runtime was interrupted.
func (ex *execution) stopReason() error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.reason == nil {
		return errors.New("sandbox: internal error: the runtime was interrupted without a reason")
	}
	return ex.reason
}

// vmFailure returns the reason raised by the code's own calls, if any.
func (ex *execution) vmFailure() error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.reasonVM {
		return ex.reason
	}
	return nil
}

// run compiles and executes the code on the calling goroutine and extracts the value of its Promise.
func (ex *execution) run(code string) (out outcome) {
	defer func() {
		if x := recover(); x != nil {
			if err, ok := x.(error); ok && isUncatchable(err) {
				// Raised by JS run from Go after the program (a getter of the result, a toJSON).
				out = outcome{err: ex.classify(err)}
				return
			}
			out = outcome{err: fmt.Errorf("sandbox: internal error: %v", x)}
		}
	}()
	var began time.Time
	if ex.timer != nil {
		began = time.Now()
	}
	prg, err := compileProgram(code)
	ex.timer.compiled(began)
	if err != nil {
		return outcome{err: err}
	}
	v, err := ex.rt.RunProgram(prg)
	if err != nil {
		return outcome{err: ex.classify(err)}
	}
	if err := ex.vmFailure(); err != nil {
		return outcome{err: err}
	}
	result := v
	if obj, ok := v.(*sobek.Object); ok {
		if p, ok := obj.Export().(*sobek.Promise); ok {
			switch p.State() {
			case sobek.PromiseStatePending:
				return outcome{err: &Error{Kind: KindRuntime, Message: "the code never finished: it awaits a Promise " +
					"that nothing can settle (the sandbox has no timers or other events)"}}
			case sobek.PromiseStateRejected:
				return outcome{err: &Error{Kind: KindRuntime, Message: ex.describeThrown(p.Result(), true)}}
			}
			result = p.Result()
		}
	}
	value, err := ex.resultJSON(result)
	if err != nil {
		var se *Error
		if !errors.As(err, &se) {
			return outcome{err: err}
		}
		se.Message = "the return value " + se.Message
		return outcome{err: se}
	}
	return outcome{value: value}
}

// resultJSON is toJSON for the return value ("" for undefined), which counts against MaxOutput like
// emitted values and logs (a huge result would otherwise go to the client whole).
func (ex *execution) resultJSON(v sobek.Value) (string, error) {
	s, ok, err := ex.toJSON(v)
	if err != nil || !ok {
		return "", err
	}
	if ex.outBytes+len(s) > ex.lim.MaxOutput {
		return "", &Error{Kind: KindLimit, Limit: LimitOutput, Message: fmt.Sprintf(
			"exceeds the output limit: %d bytes as JSON, with emitted values and log lines over %d bytes", len(s), ex.lim.MaxOutput)}
	}
	return s, nil
}

// classify maps an error from the runtime to what Run reports.
func (ex *execution) classify(err error) error {
	var (
		interrupted *sobek.InterruptedError
		overflow    *sobek.StackOverflowError
		exception   *sobek.Exception
		syntax      *sobek.CompilerSyntaxError
	)
	switch {
	case errors.As(err, &interrupted):
		return ex.stopReason()
	case errors.As(err, &overflow):
		return &Error{Kind: KindRuntime, Message: "RangeError: Maximum call stack size exceeded"}
	case errors.As(err, &exception):
		return &Error{Kind: KindRuntime, Message: ex.describeThrown(exception.Value(), true)}
	case errors.As(err, &syntax):
		return &Error{Kind: KindSyntax, Message: syntax.Error()}
	default:
		return fmt.Errorf("sandbox: internal error: %w", err)
	}
}

// propagateUncatchable re-raises sobek's uncatchable errors (interrupts, stack overflow) met while a
// native function called back into JS, so they keep unwinding the code instead of becoming JS errors.
func propagateUncatchable(err error) {
	if isUncatchable(err) {
		panic(err)
	}
}

// isUncatchable reports whether err is one of sobek's errors that JS code cannot catch.
func isUncatchable(err error) bool {
	var (
		interrupted *sobek.InterruptedError
		overflow    *sobek.StackOverflowError
	)
	return errors.As(err, &interrupted) || errors.As(err, &overflow)
}

// maxJSONDepth bounds the nesting of values leaving the runtime. sobek's JSON.stringify recurses on the
// Go stack, and a Go stack overflow kills the process; encoding/json refuses deeper input anyway.
const maxJSONDepth = 1000

// jsonReplacer is the JSON.stringify replacer used for every value leaving the runtime. In strict
// mode (return values, emits, tool arguments) it rejects functions and symbols, which JSON would
// silently drop but which are almost always a mistake. It also bounds the nesting depth: stringify
// calls it for each value before descending into it, with the containing object as this, so the
// chain of containers is kept in jsonStack.
func (ex *execution) jsonReplacer(call sobek.FunctionCall) sobek.Value {
	key, v := call.Argument(0).String(), call.Argument(1)
	if ex.jsonStrict {
		what := ""
		if _, ok := sobek.AssertFunction(v); ok {
			what = "a function"
		} else if _, ok := v.(*sobek.Symbol); ok {
			what = "a symbol"
		}
		if what != "" {
			if key == "" && len(ex.jsonStack) == 0 {
				panic(ex.rt.NewTypeError("is not JSON-serializable: it is %s", what))
			}
			panic(ex.rt.NewTypeError("is not JSON-serializable: it has %s at key %s", what, strconv.Quote(key)))
		}
	}
	if obj, ok := v.(*sobek.Object); ok {
		if _, isFunc := sobek.AssertFunction(obj); !isFunc {
			holder, _ := call.This.(*sobek.Object)
			for n := len(ex.jsonStack); n > 0 && ex.jsonStack[n-1] != holder; n-- {
				ex.jsonStack = ex.jsonStack[:n-1]
			}
			ex.jsonStack = append(ex.jsonStack, obj)
			if len(ex.jsonStack) > maxJSONDepth {
				panic(ex.rt.NewTypeError("is not JSON-serializable: it is nested more than %d levels deep", maxJSONDepth))
			}
		}
	}
	return v
}

// stringifyJSON calls the captured JSON.stringify with the replacer (strict or lenient), saving the
// state of any stringify call it interrupts (a toJSON method may emit or log).
func (ex *execution) stringifyJSON(v sobek.Value, strict bool) (sobek.Value, error) {
	savedStrict, savedStack := ex.jsonStrict, ex.jsonStack
	ex.jsonStrict, ex.jsonStack = strict, nil
	defer func() { ex.jsonStrict, ex.jsonStack = savedStrict, savedStack }()
	return ex.stringify(sobek.Undefined(), v, ex.replacer)
}

// toJSON serialises v with the captured JSON.stringify. ok is false for undefined (no JSON). A value
// that cannot be serialised (function, symbol, cycle, BigInt, a throwing toJSON) is a runtime *Error
// whose message reads after a subject ("... is not JSON-serializable: ...").
func (ex *execution) toJSON(v sobek.Value) (s string, ok bool, err error) {
	if sobek.IsUndefined(v) {
		return "", false, nil
	}
	out, err := ex.stringifyJSON(v, true)
	if err != nil {
		propagateUncatchable(err)
		var exc *sobek.Exception
		if errors.As(err, &exc) {
			msg := ex.describeThrown(exc.Value(), false)
			msg = strings.TrimPrefix(msg, "TypeError: ")
			if !strings.HasPrefix(msg, "is not JSON-serializable") {
				msg = "is not JSON-serializable: " + msg
			}
			return "", false, &Error{Kind: KindRuntime, Message: msg}
		}
		return "", false, fmt.Errorf("sandbox: internal error: %w", err)
	}
	if sobek.IsUndefined(out) {
		return "", false, nil
	}
	return out.String(), true, nil
}

func (ex *execution) parseJSON(b []byte) (sobek.Value, error) {
	out, err := ex.parse(sobek.Undefined(), ex.rt.ToValue(string(b)))
	if err != nil {
		propagateUncatchable(err)
		return nil, err
	}
	return out, nil
}

// throwError throws a JS Error (built with the original Error constructor) from a native function.
func (ex *execution) throwError(msg string) { ex.throw(ex.errorCtor, msg) }

// throw throws a JS error built with ctor (an original error constructor) from a native function.
func (ex *execution) throw(ctor *sobek.Object, msg string) {
	obj, err := ex.rt.New(ctor, ex.rt.ToValue(msg))
	if err != nil {
		propagateUncatchable(err)
		panic(ex.rt.NewTypeError(msg))
	}
	panic(obj)
}

// newError builds a JS Error with the original Error constructor.
func (ex *execution) newError(msg string) sobek.Value {
	obj, err := ex.rt.New(ex.errorCtor, ex.rt.ToValue(msg))
	if err != nil {
		propagateUncatchable(err)
		return ex.rt.NewTypeError(msg)
	}
	return obj
}

// describeThrown renders a thrown or rejected value: "Name: message" (just the message for a plain
// Error), followed by the JS stack when withStack is set, or the value itself for non-Error throws.
func (ex *execution) describeThrown(v sobek.Value, withStack bool) string {
	obj, ok := v.(*sobek.Object)
	if !ok || !ex.isError(obj) {
		return ex.formatValue(v)
	}
	name := ex.safeString(ex.safeGet(obj, "name"))
	message := ex.safeString(ex.safeGet(obj, "message"))
	head := message
	if name != "" && name != "Error" {
		head = name + ": " + message
	}
	if !withStack {
		return head
	}
	stack := ex.safeString(ex.safeGet(obj, "stack"))
	var frames []string
	for _, line := range strings.Split(stack, "\n") {
		if line = ex.cleanFrame(strings.TrimSpace(line)); line != "" {
			frames = append(frames, "    "+line)
		}
	}
	if len(frames) == 0 {
		return head
	}
	return head + "\n" + strings.Join(frames, "\n")
}

// framePC matches the program counter sobek appends to a frame position ("code.ts:3:5(12)").
var framePC = regexp.MustCompile(`(:\d+:\d+)\(\d+\)`)

// frameLine extracts the line of a frame in the caller's code.
var frameLine = regexp.MustCompile(`\b` + regexp.QuoteMeta(sourceName) + `:(\d+):\d+`)

// cleanFrame tidies one line of a JS stack: it drops sobek's program counters, the tools proxy's own
// frame and the wrapper's frame (the call of the async function, past the caller's last line). It
// returns "" for lines to drop.
func (ex *execution) cleanFrame(line string) string {
	if !strings.HasPrefix(line, "at ") || line == "at proxy (native)" {
		return ""
	}
	if m := frameLine.FindStringSubmatch(line); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > ex.codeLines {
			return ""
		}
	}
	return framePC.ReplaceAllString(line, "$1")
}

// isError reports whether obj inherits from the original Error.prototype.
func (ex *execution) isError(obj *sobek.Object) (is bool) {
	if exc := ex.rt.Try(func() { is = ex.rt.InstanceOf(obj, ex.errorCtor) }); exc != nil {
		return false
	}
	return is
}

// safeGet reads a property, returning nil if that throws (a getter or a proxy trap may).
func (ex *execution) safeGet(obj *sobek.Object, name string) (v sobek.Value) {
	if exc := ex.rt.Try(func() { v = obj.Get(name) }); exc != nil {
		return nil
	}
	return v
}

// safeString converts v to a string, returning "" if that throws.
func (ex *execution) safeString(v sobek.Value) (s string) {
	if v == nil || sobek.IsUndefined(v) || sobek.IsNull(v) {
		return ""
	}
	if exc := ex.rt.Try(func() { s = v.String() }); exc != nil {
		return ""
	}
	return s
}

// formatValue renders a value for a log line or an error message: strings as they are, primitives as
// String() gives them, functions as [Function: name], errors as "Name: message" and anything else as
// JSON (falling back to String() when it is not JSON-able).
func (ex *execution) formatValue(v sobek.Value) string {
	if v == nil {
		return "undefined"
	}
	obj, ok := v.(*sobek.Object)
	if !ok {
		if sym, ok := v.(*sobek.Symbol); ok {
			return "Symbol(" + sym.String() + ")"
		}
		if _, isBig := v.Export().(interface{ Sign() int }); isBig {
			return v.String() + "n"
		}
		return v.String()
	}
	if _, ok := sobek.AssertFunction(obj); ok {
		name := ex.safeString(ex.safeGet(obj, "name"))
		if name == "" {
			name = "(anonymous)"
		}
		return "[Function: " + name + "]"
	}
	if ex.isError(obj) {
		name, msg := ex.safeString(ex.safeGet(obj, "name")), ex.safeString(ex.safeGet(obj, "message"))
		if name == "" {
			name = "Error"
		}
		return name + ": " + msg
	}
	out, err := ex.stringifyJSON(obj, false)
	if err == nil && !sobek.IsUndefined(out) {
		return out.String()
	}
	if err != nil {
		propagateUncatchable(err)
	}
	if s := ex.safeString(obj); s != "" {
		return s
	}
	return "[object]"
}

// record counts n bytes of output and streams f (an emit or log frame) to the parent, or fails the
// execution when MaxOutput would be exceeded.
func (ex *execution) record(n int, f frame) {
	if ex.outBytes+n > ex.lim.MaxOutput {
		ex.fail(&Error{Kind: KindLimit, Limit: LimitOutput, Message: fmt.Sprintf(
			"output limit exceeded: emitted values and log lines exceed %d bytes", ex.lim.MaxOutput)})
		return
	}
	ex.outBytes += n
	ex.link.send(f)
}

// emit implements the global emit(value).
func (ex *execution) emit(call sobek.FunctionCall) sobek.Value {
	arg := call.Argument(0)
	s, ok, err := ex.toJSON(arg)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			ex.throwError("emit: the value " + se.Message)
		}
		ex.fail(err)
		return sobek.Undefined()
	}
	f := frame{T: frameEmit}
	if ok {
		f.JSON = json.RawMessage(s)
	}
	ex.record(len(s), f)
	return sobek.Undefined()
}

// console builds the console object.
func (ex *execution) console() *sobek.Object {
	c := ex.rt.NewObject()
	for _, level := range []struct{ name, prefix string }{
		{"log", ""}, {"info", "info: "}, {"warn", "warn: "}, {"error", "error: "}, {"debug", "debug: "},
	} {
		prefix := level.prefix
		fn := func(call sobek.FunctionCall) sobek.Value {
			var b strings.Builder
			b.WriteString(prefix)
			for i, a := range call.Arguments {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(ex.formatValue(a))
			}
			line := b.String()
			ex.record(len(line), frame{T: frameLog, Text: line})
			return sobek.Undefined()
		}
		if err := c.Set(level.name, fn); err != nil {
			panic(err)
		}
	}
	return c
}

// reservedToolProps are property names the tools proxy does not turn into tool paths, so that the
// proxy is not mistaken for a thenable or coerced into a tool call.
var reservedToolProps = map[string]bool{"then": true, "toJSON": true, "toString": true, "valueOf": true}

// toolsProxy returns the proxy for tools.<path>: reading a property extends the path, calling it calls
// the Host.
func (ex *execution) toolsProxy(path string) sobek.Proxy {
	target := ex.rt.ToValue(func(sobek.FunctionCall) sobek.Value { return sobek.Undefined() }).ToObject(ex.rt)
	child := func(prop string) sobek.Value {
		if path != "" {
			prop = path + "." + prop
		}
		return ex.rt.ToValue(ex.toolsProxy(prop))
	}
	return ex.rt.NewProxy(target, &sobek.ProxyTrapConfig{
		Get: func(_ *sobek.Object, prop string, _ sobek.Value) sobek.Value {
			if reservedToolProps[prop] {
				return sobek.Undefined()
			}
			return child(prop)
		},
		GetIdx: func(_ *sobek.Object, idx int, _ sobek.Value) sobek.Value {
			return child(strconv.Itoa(idx))
		},
		GetSym: func(*sobek.Object, *sobek.Symbol, sobek.Value) sobek.Value {
			return sobek.Undefined()
		},
		Apply: func(_ *sobek.Object, _ sobek.Value, args []sobek.Value) sobek.Value {
			if path == "" {
				panic(ex.rt.NewTypeError("tools is not a function; call a tool such as tools.search({query})"))
			}
			var arg sobek.Value = sobek.Undefined()
			if len(args) > 0 {
				arg = args[0]
			}
			return ex.callTool(path, arg)
		},
	})
}

// maxToolArgBytes bounds a tool call's argument as JSON: it crosses into the node's process, which must
// not be made to hold an execution's memory.
const maxToolArgBytes = 4 << 20

// callTool performs tools.<path>(arg): it sends the call to the parent, which calls the Host, waits
// for the answer and returns a Promise settled with it.
func (ex *execution) callTool(path string, arg sobek.Value) sobek.Value {
	args, ok, err := ex.toJSON(arg)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			panic(ex.rt.NewTypeError("tools.%s: the argument %s", path, se.Message))
		}
		ex.fail(err)
		return sobek.Undefined()
	}
	if len(args) > maxToolArgBytes {
		panic(ex.rt.NewTypeError("tools.%s: the argument is %d bytes as JSON; at most %d are accepted", path, len(args), maxToolArgBytes))
	}
	if ex.toolCalls >= ex.lim.MaxToolCalls {
		ex.fail(&Error{Kind: KindLimit, Limit: LimitToolCalls, Message: fmt.Sprintf(
			"tool call limit exceeded: more than %d tools.* calls (at tools.%s)", ex.lim.MaxToolCalls, path)})
		return sobek.Undefined()
	}
	ex.toolCalls++
	seq := ex.toolCalls
	call := frame{T: frameCall, Seq: seq, Path: path}
	if ok {
		call.JSON = json.RawMessage(args)
	}
	ex.link.send(call)
	resume := func() {}
	if ex.waiting != nil {
		resume = ex.waiting()
	}
	var r frame
	for r.Seq != seq {
		select {
		case r = <-ex.link.results:
		case <-ex.ctx.Done():
			resume()
			return sobek.Undefined() // stopped: the runtime is interrupted
		}
	}
	resume()
	if ex.lim.FixedClock {
		ex.now = r.Now
	}

	promise, resolve, reject := ex.rt.NewPromise()
	if r.Kind == resultError {
		settle(reject(ex.newError(r.Err)))
		return ex.rt.ToValue(promise)
	}
	v, err := ex.parseJSON(r.JSON)
	if err != nil {
		settle(reject(ex.newError(fmt.Sprintf("tools.%s returned a result that is not JSON: %v", path, err))))
		return ex.rt.ToValue(promise)
	}
	settle(resolve(v))
	return ex.rt.ToValue(promise)
}

// settle propagates an uncatchable error from a promise resolving function (the only kind they return).
func settle(err error) {
	if err != nil {
		panic(err)
	}
}
