package sandbox

import (
	"fmt"
	"strconv"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/grafana/sobek"
)

// regexpMatchTimeout bounds one regular-expression match. sobek runs patterns Go's regexp cannot
// (backreferences, lookarounds) on regexp2, a backtracking engine; a catastrophic pattern runs inside a
// single built-in call, which Interrupt cannot stop, so without a bound the runtime's goroutine would
// spin long after Run gave up on it. On timeout sobek reports "no match".
const regexpMatchTimeout = 5 * time.Second

func init() {
	// regexp2 only offers a process-wide default; keep any value the program chose itself.
	if regexp2.DefaultMatchTimeout <= 0 || regexp2.DefaultMatchTimeout > regexpMatchTimeout {
		regexp2.DefaultMatchTimeout = regexpMatchTimeout
	}
}

// maxNesting bounds the nesting depth of data handled by sobek built-ins that recurse on the Go stack
// and check for cycles with a linear scan per level: JSON.parse, JSON.stringify and
// Array.prototype.join/toLocaleString (which String(array) uses). On a deep enough value they would run
// for minutes in one uninterruptible call or overflow the Go stack, which kills the process. It also
// bounds values leaving the runtime (encoding/json refuses deeper input anyway).
const maxNesting = 1000

// guardRecursiveBuiltins replaces JSON.parse, JSON.stringify and Array.prototype.join/toLocaleString
// with wrappers that enforce maxNesting and otherwise call the originals.
func (ex *execution) guardRecursiveBuiltins(jsonObj, arrayProto *sobek.Object) error {
	if err := ex.defineMethod(jsonObj, "parse", 2, ex.guardedParse); err != nil {
		return err
	}
	if err := ex.defineMethod(jsonObj, "stringify", 3, ex.guardedStringify); err != nil {
		return err
	}
	for _, name := range []string{"join", "toLocaleString"} {
		orig, ok := sobek.AssertFunction(arrayProto.Get(name))
		if !ok {
			return fmt.Errorf("sandbox: Array.prototype.%s missing", name)
		}
		length := 0
		if name == "join" {
			length = 1
		}
		if err := ex.defineMethod(arrayProto, name, length, ex.depthGuard("Array.prototype."+name, orig)); err != nil {
			return err
		}
	}
	return nil
}

// defineMethod installs fn as a built-in-like method (non-enumerable, with the given name and length).
func (ex *execution) defineMethod(obj *sobek.Object, name string, length int, fn func(sobek.FunctionCall) sobek.Value) error {
	f := ex.rt.ToValue(fn).ToObject(ex.rt)
	if err := f.DefineDataProperty("name", ex.rt.ToValue(name), sobek.FLAG_FALSE, sobek.FLAG_TRUE, sobek.FLAG_FALSE); err != nil {
		return fmt.Errorf("sandbox: naming %s: %w", name, err)
	}
	if err := f.DefineDataProperty("length", ex.rt.ToValue(length), sobek.FLAG_FALSE, sobek.FLAG_TRUE, sobek.FLAG_FALSE); err != nil {
		return fmt.Errorf("sandbox: sizing %s: %w", name, err)
	}
	if err := obj.DefineDataProperty(name, f, sobek.FLAG_TRUE, sobek.FLAG_TRUE, sobek.FLAG_FALSE); err != nil {
		return fmt.Errorf("sandbox: installing %s: %w", name, err)
	}
	return nil
}

// rethrow re-raises an error returned by a call back into JS from a native function.
func rethrow(err error) {
	propagateUncatchable(err)
	panic(err)
}

// depthGuard wraps a built-in that recurses through itself for nested arrays.
func (ex *execution) depthGuard(name string, orig sobek.Callable) func(sobek.FunctionCall) sobek.Value {
	return func(call sobek.FunctionCall) sobek.Value {
		if ex.joinDepth >= maxNesting {
			ex.throw(ex.rangeErrorCtor, fmt.Sprintf("%s: arrays nested more than %d levels deep", name, maxNesting))
		}
		ex.joinDepth++
		defer func() { ex.joinDepth-- }()
		v, err := orig(call.This, call.Arguments...)
		if err != nil {
			rethrow(err)
		}
		return v
	}
}

// guardedParse is JSON.parse with a nesting bound checked on the text first.
func (ex *execution) guardedParse(call sobek.FunctionCall) sobek.Value {
	text := call.Argument(0).ToString() // convert once: the original would call a toString again
	if jsonTextDepth(text.String()) > maxNesting {
		ex.throw(ex.syntaxErrCtor, fmt.Sprintf("JSON.parse: the text nests more than %d levels deep", maxNesting))
	}
	v, err := ex.parse(sobek.Undefined(), text, call.Argument(1))
	if err != nil {
		rethrow(err)
	}
	return v
}

// jsonTextDepth returns the maximum bracket nesting of JSON text (brackets inside strings do not count).
func jsonTextDepth(s string) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// guardedStringify is JSON.stringify with a nesting bound. The bound is enforced by a replacer
// function, composed with the caller's: a replacer function runs first, and a property-list replacer
// is emulated by replacing each plain object with a null-prototype copy holding just the listed
// properties in list order (the properties are read up front rather than as each is serialised).
func (ex *execution) guardedStringify(call sobek.FunctionCall) sobek.Value {
	value, replacer, space := call.Argument(0), call.Argument(1), call.Argument(2)
	userFn, _ := sobek.AssertFunction(replacer)
	var propertyList []string
	if userFn == nil {
		if obj, ok := replacer.(*sobek.Object); ok && ex.isArrayValue(obj) {
			propertyList = ex.propertyList(obj)
		}
	}
	var stack []*sobek.Object
	composed := ex.rt.ToValue(func(c sobek.FunctionCall) sobek.Value {
		key, v := c.Argument(0), c.Argument(1)
		if userFn != nil {
			var err error
			if v, err = userFn(c.This, key, v); err != nil {
				rethrow(err)
			}
		}
		obj, ok := v.(*sobek.Object)
		if !ok {
			return v
		}
		if _, isFunc := sobek.AssertFunction(obj); isFunc {
			return v
		}
		if propertyList != nil && !ex.isArrayValue(obj) {
			cp := ex.rt.CreateObject(nil)
			for _, p := range propertyList {
				if err := cp.DefineDataProperty(p, obj.Get(p), sobek.FLAG_TRUE, sobek.FLAG_TRUE, sobek.FLAG_TRUE); err != nil {
					rethrow(err)
				}
			}
			obj, v = cp, cp
		}
		holder, _ := c.This.(*sobek.Object)
		for n := len(stack); n > 0 && stack[n-1] != holder; n-- {
			stack = stack[:n-1]
		}
		stack = append(stack, obj)
		if len(stack) > maxNesting {
			ex.throw(ex.rangeErrorCtor, fmt.Sprintf("JSON.stringify: the value nests more than %d levels deep", maxNesting))
		}
		return v
	})
	out, err := ex.stringify(sobek.Undefined(), value, composed, space)
	if err != nil {
		rethrow(err)
	}
	return out
}

// isArrayValue is the original Array.isArray.
func (ex *execution) isArrayValue(v sobek.Value) bool {
	r, err := ex.isArray(sobek.Undefined(), v)
	if err != nil {
		rethrow(err)
	}
	return r.ToBoolean()
}

// maxPropertyList bounds a JSON.stringify replacer array (read in one uninterruptible loop).
const maxPropertyList = 100_000

// propertyList turns a JSON.stringify replacer array into its property list: strings, numbers and
// String/Number objects, converted to strings, first occurrence kept.
func (ex *execution) propertyList(arr *sobek.Object) []string {
	n := arr.Get("length").ToInteger()
	if n > maxPropertyList {
		ex.throw(ex.rangeErrorCtor, fmt.Sprintf("JSON.stringify: a replacer array may list at most %d properties", maxPropertyList))
	}
	seen := make(map[string]bool)
	var list []string
	for i := int64(0); i < n; i++ {
		item := arr.Get(strconv.FormatInt(i, 10))
		if !isPropertyListItem(item) {
			continue
		}
		if s := item.String(); !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	return list
}

// isPropertyListItem reports whether a replacer array element names a property.
func isPropertyListItem(v sobek.Value) bool {
	if obj, ok := v.(*sobek.Object); ok {
		cls := obj.ClassName()
		return cls == "String" || cls == "Number"
	}
	if v == nil {
		return false
	}
	switch v.Export().(type) {
	case string, int64, float64:
		return true
	}
	return false
}
