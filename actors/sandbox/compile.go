package sandbox

import (
	"container/list"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/evanw/esbuild/pkg/api"
	"github.com/grafana/sobek"
	"github.com/grafana/sobek/parser"
)

// sourceName is the file name the code carries in syntax errors and stack traces.
const sourceName = "code.ts"

// wrapPrefix and wrapSuffix turn the code into the body of an async arrow function whose call is the
// script's completion value. The prefix sits on its own line so that user line N is wrapped line N+1;
// compile errors and the source map are shifted back by wrapLines.
const (
	wrapPrefix = "(async () => {\n"
	wrapSuffix = "\n})()"
	wrapLines  = 1
)

// transformOptions is the esbuild configuration. ESNext keeps the output close to the input; the
// features sobek cannot parse are lowered by esbuild instead (found by running each feature on sobek):
// async generators and for-await (sobek has neither), `using` declarations and decorators.
var transformOptions = api.TransformOptions{
	Loader:         api.LoaderTS,
	Target:         api.ESNext,
	Sourcefile:     sourceName,
	Sourcemap:      api.SourceMapExternal,
	SourcesContent: api.SourcesContentExclude,
	Charset:        api.CharsetUTF8,
	LegalComments:  api.LegalCommentsNone,
	LogLimit:       maxReportedSyntaxErrors + 1,
	Supported: map[string]bool{
		"async-generator": false,
		"for-await":       false,
		"using":           false,
		"decorators":      false,
	},
}

// maxReportedSyntaxErrors bounds how many compiler messages a syntax Error lists.
const maxReportedSyntaxErrors = 5

// MaxCodeSize is the largest code, in bytes, that Compile and Run accept. esbuild and sobek parse
// recursively on the Go stack (up to ~4 KiB per nesting level, and a Go stack overflow kills the
// process) and parts of both are quadratic in nesting depth, so the input size bounds both the stack
// and the compile time: with maxBraces, the slowest shapes measured at this size (a 16k-term comma
// chain, 4k nested blocks) compile in 0.5-1.5s. Orchestration code is far smaller; large data belongs
// in tool results.
const MaxCodeSize = 32 << 10

// maxBraces bounds the number of '{' in the code. Nested scopes are the most expensive shape for both
// compilers (16k nested blocks take 8s within MaxCodeSize; 4k take well under a second), and counting
// every brace, quoted or not, is an over-estimate the code cannot hide nesting from. Ordinary code
// has a brace every 20-50 bytes.
const maxBraces = 4096

// maxReadableNesting bounds the scope nesting for which identifiers keep their names. esbuild's default
// renamer is cubic in the depth of nested scopes that shadow each other (1000 nested `x => x => ...`
// take seconds), while its minifying renamer is near-linear. scopeNestingBound over-estimates the depth
// (quoted text can only add to it), and code above the bound is compiled with minified identifiers
// (KeepNames keeps Function.prototype.name; only stack frames show the short names).
const maxReadableNesting = 400

// scopeNestingBound is an upper bound on how deeply scopes nest in code: every scope needs a brace, an
// arrow or a for loop.
func scopeNestingBound(code string) int {
	return strings.Count(code, "{") + strings.Count(code, "=>") + strings.Count(code, "for")
}

// Compile transforms TypeScript to the JavaScript the runtime executes (esbuild with the ts loader and a
// target sobek runs). The code is the body of an async function: top-level `await` and `return` are
// allowed, e.g.
//
//	const todo = await tools.demo.createTodo({title: "x"}); return todo.id;
//
// The result is a script whose completion value is the Promise of that function. A compile failure is an
// *Error of Kind "syntax" whose Message gives each problem as line:column (1-based, in the caller's
// code) with the offending line. Code longer than MaxCodeSize, or with more than 4096 '{' characters,
// is an *Error of Kind "limit".
func Compile(code string) (string, error) {
	js, _, err := transform(code)
	if err != nil {
		return "", err
	}
	return js, nil
}

// transform runs esbuild and returns the JavaScript and its source map (already shifted back to the
// caller's line numbers).
func transform(code string) (js string, sourceMap []byte, err error) {
	if len(code) > MaxCodeSize {
		return "", nil, &Error{Kind: KindLimit, Limit: LimitCodeSize, Message: fmt.Sprintf(
			"the code is %d bytes; at most %d are accepted (pass large data through tools instead)", len(code), MaxCodeSize)}
	}
	if n := strings.Count(code, "{"); n > maxBraces {
		return "", nil, &Error{Kind: KindLimit, Limit: LimitCodeSize, Message: fmt.Sprintf(
			"the code has %d '{' characters; at most %d are accepted (pass large data through tools instead)", n, maxBraces)}
	}
	opts := transformOptions
	if scopeNestingBound(code) > maxReadableNesting {
		opts.MinifyIdentifiers, opts.KeepNames = true, true
	}
	res := api.Transform(wrapPrefix+code+wrapSuffix, opts)
	if len(res.Errors) > 0 {
		return "", nil, syntaxError(code, res.Errors)
	}
	m, err := shiftSourceMap(res.Map, wrapLines)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: rewriting source map: %w", err)
	}
	return string(res.Code), m, nil
}

// syntaxError renders esbuild messages against the caller's code (undoing the wrapper's line).
func syntaxError(code string, msgs []api.Message) *Error {
	lines := strings.Split(code, "\n")
	var b strings.Builder
	for i, m := range msgs {
		if i == maxReportedSyntaxErrors {
			fmt.Fprintf(&b, "\n(and %d more errors)", len(msgs)-i)
			break
		}
		if i > 0 {
			b.WriteString("\n")
		}
		if m.Location == nil {
			b.WriteString(m.Text)
			continue
		}
		line, col := m.Location.Line-wrapLines, m.Location.Column
		lineText, text := m.Location.LineText, m.Text
		switch {
		case line < 1: // the wrapper's opening line
			line, col, lineText = 1, 0, lines[0]
		case line > len(lines): // the wrapper's closing line: something was left open
			line = len(lines)
			lineText = lines[line-1]
			col = len(lineText)
			text = "Unexpected end of code (is a bracket, string or expression left open?)"
		}
		// esbuild columns are 0-based byte offsets; report 1-based character columns.
		if col > len(lineText) {
			col = len(lineText)
		}
		charCol := len([]rune(lineText[:col])) + 1
		fmt.Fprintf(&b, "%d:%d: %s", line, charCol, text)
		if lineText != "" {
			fmt.Fprintf(&b, "\n    %s\n    %s^", lineText, strings.Repeat(" ", charCol-1))
		}
	}
	return &Error{Kind: KindSyntax, Message: b.String()}
}

// compiled is one cache entry: the program or the syntax error the code produced.
type compiled struct {
	prg *sobek.Program
	err error
}

// compileCacheSize bounds the LRU of compiled programs.
const compileCacheSize = 256

// programs caches compiled programs by code hash. A *sobek.Program is not tied to a runtime and may be
// run by several runtimes concurrently.
var programs = newLRU(compileCacheSize)

// compileProgram returns the sobek program for code, from the cache when possible.
func compileProgram(code string) (*sobek.Program, error) {
	key := sha256.Sum256([]byte(code))
	if c, ok := programs.get(key); ok {
		return c.prg, c.err
	}
	c := compileUncached(code)
	// Cache programs and syntax (or size) errors; an internal failure is retried next time.
	if _, isSyntax := c.err.(*Error); c.err == nil || isSyntax {
		programs.put(key, c)
	}
	return c.prg, c.err
}

func compileUncached(code string) compiled {
	js, sm, err := transform(code)
	if err != nil {
		return compiled{err: err}
	}
	src := js + "//# sourceMappingURL=data:application/json;base64," + base64.StdEncoding.EncodeToString(sm) + "\n"
	ast, err := sobek.Parse(sourceName, src, parser.WithSourceMapLoader(refuseSourceMap))
	if err != nil {
		return compiled{err: &Error{Kind: KindSyntax, Message: "the runtime cannot parse the compiled code: " + err.Error()}}
	}
	prg, err := sobek.CompileAST(ast, false)
	if err != nil {
		return compiled{err: &Error{Kind: KindSyntax, Message: "the runtime cannot compile the code: " + err.Error()}}
	}
	return compiled{prg: prg}
}

// refuseSourceMap stops sobek's default loader, which reads source maps named by a sourceMappingURL
// comment from the file system. Only the inline map this package writes is used.
func refuseSourceMap(path string) ([]byte, error) {
	return nil, fmt.Errorf("external source maps are not available in the sandbox")
}

// shiftSourceMap moves every original position in an esbuild source map up by delta lines (clamping at
// the first line), so that positions inside the wrapped code map to the caller's line numbers.
func shiftSourceMap(raw []byte, delta int) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	mappings, _ := m["mappings"].(string)
	shifted, err := shiftMappings(mappings, delta)
	if err != nil {
		return nil, err
	}
	m["mappings"] = shifted
	return json.Marshal(m)
}

// shiftMappings decodes a source map "mappings" string (base64 VLQ), subtracts delta from each
// segment's original line and re-encodes it.
func shiftMappings(mappings string, delta int) (string, error) {
	var (
		out                                 strings.Builder
		srcIdx, srcLine, srcCol, nameIdx    int // absolute values in the input
		oSrcIdx, oSrcLine, oSrcCol, oNameID int // absolute values already written
		fields                              [5]int
	)
	out.Grow(len(mappings))
	for li, line := range strings.Split(mappings, ";") {
		if li > 0 {
			out.WriteByte(';')
		}
		genCol, oGenCol, written := 0, 0, 0
		for _, seg := range strings.Split(line, ",") {
			if seg == "" {
				continue
			}
			n, err := decodeVLQs(seg, fields[:])
			if err != nil {
				return "", err
			}
			if written > 0 {
				out.WriteByte(',')
			}
			written++
			genCol += fields[0]
			appendVLQ(&out, genCol-oGenCol)
			oGenCol = genCol
			if n >= 4 {
				srcIdx += fields[1]
				srcLine += fields[2]
				srcCol += fields[3]
				line := max(srcLine-delta, 0)
				appendVLQ(&out, srcIdx-oSrcIdx)
				appendVLQ(&out, line-oSrcLine)
				appendVLQ(&out, srcCol-oSrcCol)
				oSrcIdx, oSrcLine, oSrcCol = srcIdx, line, srcCol
			}
			if n >= 5 {
				nameIdx += fields[4]
				appendVLQ(&out, nameIdx-oNameID)
				oNameID = nameIdx
			}
		}
	}
	return out.String(), nil
}

const vlqChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// decodeVLQs decodes up to len(dst) base64 VLQ values from seg and returns how many it read.
func decodeVLQs(seg string, dst []int) (int, error) {
	n := 0
	for i := 0; i < len(seg); {
		if n == len(dst) {
			return 0, fmt.Errorf("source map segment %q has too many fields", seg)
		}
		v, shift := 0, 0
		for {
			if i >= len(seg) {
				return 0, fmt.Errorf("truncated source map segment %q", seg)
			}
			d := strings.IndexByte(vlqChars, seg[i])
			if d < 0 {
				return 0, fmt.Errorf("bad source map character %q", seg[i])
			}
			i++
			v |= (d & 31) << shift
			shift += 5
			if d&32 == 0 {
				break
			}
			if shift > 60 {
				return 0, fmt.Errorf("source map value overflow in %q", seg)
			}
		}
		if v&1 != 0 {
			dst[n] = -(v >> 1)
		} else {
			dst[n] = v >> 1
		}
		n++
	}
	return n, nil
}

// appendVLQ writes v as a base64 VLQ.
func appendVLQ(b *strings.Builder, v int) {
	u := v << 1
	if v < 0 {
		u = (-v << 1) | 1
	}
	for {
		d := u & 31
		u >>= 5
		if u != 0 {
			d |= 32
		}
		b.WriteByte(vlqChars[d])
		if u == 0 {
			return
		}
	}
}

// lru is a small mutex-guarded least-recently-used cache of compiled programs.
type lru struct {
	mu    sync.Mutex
	cap   int
	order *list.List // front = most recent; values are *lruEntry
	items map[[sha256.Size]byte]*list.Element
}

type lruEntry struct {
	key [sha256.Size]byte
	val compiled
}

func newLRU(capacity int) *lru {
	return &lru{cap: capacity, order: list.New(), items: make(map[[sha256.Size]byte]*list.Element, capacity)}
}

func (c *lru) get(key [sha256.Size]byte) (compiled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return compiled{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry).val, true
}

func (c *lru) put(key [sha256.Size]byte, val compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*lruEntry).val = val
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, val: val})
	for c.order.Len() > c.cap {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).key)
	}
}
