package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultDeclarationBudget is the default size, in bytes, of the
// TypeScript declarations that [Declarations] renders (the execute tool's
// description carries them).
const DefaultDeclarationBudget = 8 << 10

// Bounds of one declaration.
const (
	// declDescBytes is the most of a description a JSDoc comment keeps.
	declDescBytes = 240
	// declDepth is how deep a schema is rendered: deeper types are unknown.
	declDepth = 4
)

// Operations lists the tools of every source, source by source in name
// order, each source's tools in its own order (a source lists at most
// MaxSearchLimit of them).
func (r *Registry) Operations(ctx context.Context) []Tool {
	var out []Tool
	for _, name := range r.names {
		out = append(out, r.sources[name].Search(ctx, "", MaxSearchLimit)...)
	}
	return out
}

// Declarations renders TypeScript declarations of ops, the operations code
// calls as tools.<source>.<name>(args), as one `declare const tools: {…}`
// whose methods carry the operations' descriptions as JSDoc and their input
// schemas as argument types (see [SchemaType]); results are
// Promise<unknown>. tools.search and tools.describe are declared too.
//
// The output is at most budget bytes (zero or less:
// [DefaultDeclarationBudget]) and always valid TypeScript. Past the budget
// it keeps full declarations for as many operations as fit, read
// operations (RequiresApproval false) first, then in the order of ops; the
// others are named in a comment that points to tools.describe. An empty
// ops gives "".
func Declarations(ops []Tool, budget int) string {
	if len(ops) == 0 {
		return ""
	}
	if budget <= 0 {
		budget = DefaultDeclarationBudget
	}
	ranked := slices.Clone(ops)
	slices.SortStableFunc(ranked, func(a, b Tool) int {
		return cmp.Compare(boolRank(a.RequiresApproval), boolRank(b.RequiresApproval))
	})
	// Start from the skeleton with every operation in the shortest comment
	// ("… and N more"), and declare operations in full while they fit; a
	// source's comment goes when its last operation is declared.
	left, shortest := map[string]int{}, map[string]int{}
	for _, t := range ops {
		left[t.Source]++
	}
	for src, n := range left {
		shortest[src] = len(restComment(src, make([]string, n), 0))
	}
	full, kept := map[string]string{}, map[string]bool{}
	size := len(renderDecls(ops, full, kept, 0))
	for _, t := range ranked {
		d := operationDecl(t)
		next := size + len(d)
		if left[t.Source] == 1 {
			next -= shortest[t.Source]
		}
		if next > budget {
			continue
		}
		full[t.Path], kept[t.Path], size = d, true, next
		left[t.Source]--
	}
	out := renderDecls(ops, full, kept, budget)
	for i := len(ranked) - 1; len(out) > budget && i >= 0; i-- { // a bound of last resort
		if kept[ranked[i].Path] {
			delete(kept, ranked[i].Path)
			out = renderDecls(ops, full, kept, budget)
		}
	}
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// renderDecls renders the declarations: the kept operations in full, the
// others by name in one comment per source, cut to share what budget
// leaves.
func renderDecls(ops []Tool, full map[string]string, kept map[string]bool, budget int) string {
	const head = "declare const tools: {\n" +
		"  /** Find operations: [{path, description, requiresApproval}]. */\n" +
		"  search(args: { query: string; limit?: number; offset?: number }): Promise<unknown>;\n" +
		"  /** An operation's description and input schema. */\n" +
		"  describe(args: { path: string }): Promise<unknown>;\n"
	type group struct {
		source string
		decls  strings.Builder
		rest   []string
	}
	var groups []*group
	size := len(head) + len("};\n")
	for _, t := range ops {
		if len(groups) == 0 || groups[len(groups)-1].source != t.Source {
			groups = append(groups, &group{source: t.Source})
			size += len("  " + propName(t.Source) + ": {\n  };\n")
		}
		g := groups[len(groups)-1]
		if kept[t.Path] {
			g.decls.WriteString(full[t.Path])
			size += len(full[t.Path])
		} else {
			g.rest = append(g.rest, t.Name)
		}
	}
	withRest := 0
	for _, g := range groups {
		if len(g.rest) > 0 {
			withRest++
		}
	}
	var b strings.Builder
	b.WriteString(head)
	for _, g := range groups {
		b.WriteString("  " + propName(g.source) + ": {\n")
		b.WriteString(g.decls.String())
		if len(g.rest) > 0 {
			b.WriteString(restComment(g.source, g.rest, (budget-size)/withRest))
		}
		b.WriteString("  };\n")
	}
	b.WriteString("};\n")
	return b.String()
}

// restComment names the operations declared by name only, in a line
// comment of at most left bytes, or of the least it takes to say how many
// there are (the names that do not fit are counted).
func restComment(source string, names []string, left int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    // Also (signature: tools.describe({path: \"%s.<name>\"})): ", source)
	for i, n := range names {
		n = strings.Join(strings.Fields(n), " ")
		sep := ""
		if i > 0 {
			sep = ", "
		}
		more := fmt.Sprintf("%s… and %d more (tools.search)", sep, len(names)-i)
		if i < len(names)-1 && b.Len()+len(sep)+len(n)+len(more)+1 > left ||
			i == len(names)-1 && b.Len()+len(sep)+len(n)+1 > left {
			b.WriteString(more)
			break
		}
		b.WriteString(sep + n)
	}
	b.WriteString("\n")
	return b.String()
}

// operationDecl is one operation's full declaration, a method of its
// source's object.
func operationDecl(t Tool) string {
	var b strings.Builder
	if d := jsdoc(t.Description); d != "" {
		b.WriteString("    /** " + d + " */\n")
	}
	var schema map[string]any
	_ = json.Unmarshal(t.InputSchema, &schema)
	args, optional := argsType(schema)
	q := ""
	if optional {
		q = "?"
	}
	fmt.Fprintf(&b, "    %s(args%s: %s): Promise<unknown>;\n", propName(t.Name), q, args)
	return b.String()
}

// argsType renders the args object of an input schema: its properties one
// a line with their descriptions, optional when none is required.
func argsType(schema map[string]any) (string, bool) {
	props, _ := schema["properties"].(map[string]any)
	if schema == nil {
		return "Record<string, unknown>", true // no schema: an object all the same
	}
	if len(props) == 0 {
		return SchemaType(schema), !hasRequired(schema)
	}
	c := &schemaConv{root: schema, visiting: []string{"#"}}
	req := requiredSet(schema)
	var b strings.Builder
	b.WriteString("{\n")
	for _, name := range sortedNames(props) {
		p, _ := props[name].(map[string]any)
		if d := jsdoc(str(p["description"])); d != "" {
			b.WriteString("      /** " + d + " */\n")
		}
		opt := "?"
		if req[name] {
			opt = ""
		}
		fmt.Fprintf(&b, "      %s%s: %s;\n", propName(name), opt, c.conv(props[name], 1))
	}
	b.WriteString("    }")
	return b.String(), len(req) == 0
}

func hasRequired(schema map[string]any) bool { return len(requiredSet(schema)) > 0 }

func requiredSet(schema map[string]any) map[string]bool {
	req := map[string]bool{}
	list, _ := schema["required"].([]any)
	for _, r := range list {
		if s, ok := r.(string); ok {
			req[s] = true
		}
	}
	return req
}

func sortedNames(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// jsdoc makes a description safe and short for a one-line JSDoc comment.
func jsdoc(s string) string {
	var lines []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line == "" {
			continue
		}
		// A line without an end (an OpenAPI summary) ends a sentence.
		if n := len(lines); n > 0 && !strings.ContainsAny(lines[n-1][len(lines[n-1])-1:], ".!?:;") {
			lines[n-1] += "."
		}
		lines = append(lines, line)
	}
	s = strings.Join(lines, " ")
	s = strings.ReplaceAll(s, "*/", "*\\/")
	if len(s) <= declDescBytes {
		return s
	}
	cut := declDescBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

var identRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// propName is name as a property key: bare when it is an identifier, else
// a string literal.
func propName(name string) string {
	if identRE.MatchString(name) {
		return name
	}
	q, _ := json.Marshal(name)
	return string(q)
}

// SchemaType renders a JSON Schema (decoded from JSON) as a TypeScript
// type: objects as object types (properties, required, additionalProperties
// as Record), arrays, enum and const as literal unions, the primitive types,
// type lists, oneOf and anyOf as unions, allOf as an intersection, and
// local $refs (#/$defs/…, #/definitions/…) resolved. What it cannot render
// (a remote or cyclic $ref, a schema nested too deep, true or a missing
// schema) is unknown; false is never.
func SchemaType(schema any) string {
	root, _ := schema.(map[string]any)
	return (&schemaConv{root: root, visiting: []string{"#"}}).conv(schema, 0)
}

// schemaConv converts the schemas of one root schema (where its $refs
// point).
type schemaConv struct {
	root     map[string]any
	visiting []string // $refs being expanded: a cycle is unknown
}

func (c *schemaConv) conv(v any, depth int) string {
	if b, ok := v.(bool); ok && !b {
		return "never"
	}
	s, ok := v.(map[string]any)
	if !ok || depth > declDepth {
		return "unknown"
	}
	if ref, ok := s["$ref"].(string); ok {
		return c.ref(ref, depth)
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return literals(e)
	}
	if k, ok := s["const"]; ok {
		return literals([]any{k})
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		if alts, ok := s[kw].([]any); ok && len(alts) > 0 {
			return c.join(alts, " | ", depth)
		}
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		return c.join(all, " & ", depth)
	}
	switch t := s["type"].(type) {
	case string:
		return c.typed(t, s, depth)
	case []any:
		var alts []string
		for _, x := range t {
			if name, ok := x.(string); ok {
				alts = appendUnique(alts, c.typed(name, s, depth))
			}
		}
		if len(alts) > 0 {
			return strings.Join(alts, " | ")
		}
	}
	if _, ok := s["properties"]; ok {
		return c.typed("object", s, depth)
	}
	return "unknown"
}

// ref resolves a local $ref, or gives unknown.
func (c *schemaConv) ref(ref string, depth int) string {
	target, ok := c.resolve(ref)
	if !ok || slices.Contains(c.visiting, ref) {
		return "unknown"
	}
	c.visiting = append(c.visiting, ref)
	defer func() { c.visiting = c.visiting[:len(c.visiting)-1] }()
	return c.conv(target, depth)
}

// resolve finds a local JSON pointer ("#", "#/$defs/Todo") in the root.
func (c *schemaConv) resolve(ref string) (any, bool) {
	if ref == "#" {
		return c.root, c.root != nil
	}
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = c.root
	for _, part := range strings.Split(path, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func (c *schemaConv) join(alts []any, sep string, depth int) string {
	var parts []string
	for _, a := range alts {
		parts = appendUnique(parts, paren(c.conv(a, depth+1)))
	}
	return strings.Join(parts, sep)
}

// typed renders a schema of one JSON type.
func (c *schemaConv) typed(t string, s map[string]any, depth int) string {
	switch t {
	case "string", "boolean", "null":
		return t
	case "integer", "number":
		return "number"
	case "array":
		if _, ok := s["items"]; !ok {
			return "unknown[]"
		}
		return paren(c.conv(s["items"], depth+1)) + "[]"
	case "object":
		return c.object(s, depth)
	}
	return "unknown"
}

// object renders an object type on one line.
func (c *schemaConv) object(s map[string]any, depth int) string {
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 {
		if ap, ok := s["additionalProperties"]; ok && ap != true {
			return "Record<string, " + c.conv(ap, depth+1) + ">"
		}
		return "Record<string, unknown>"
	}
	req := requiredSet(s)
	var fields []string
	for _, name := range sortedNames(props) {
		opt := "?"
		if req[name] {
			opt = ""
		}
		fields = append(fields, propName(name)+opt+": "+c.conv(props[name], depth+1))
	}
	return "{ " + strings.Join(fields, "; ") + " }"
}

// literals renders enum values as a union of literal types.
func literals(vals []any) string {
	var parts []string
	for _, v := range vals {
		switch v.(type) {
		case string, float64, bool, nil:
			b, err := json.Marshal(v)
			if err != nil {
				return "unknown"
			}
			parts = appendUnique(parts, string(b))
		default:
			return "unknown" // an object or array literal: not worth a type
		}
	}
	return strings.Join(parts, " | ")
}

// paren wraps a type that is a union or an intersection at its top level,
// so that it can take [] or join another one.
func paren(t string) string {
	depth, quoted := 0, false
	for i := 0; i < len(t); i++ {
		switch ch := t[i]; {
		case quoted && ch == '\\':
			i++
		case ch == '"':
			quoted = !quoted
		case quoted:
		case ch == '{' || ch == '(' || ch == '[' || ch == '<':
			depth++
		case ch == '}' || ch == ')' || ch == ']' || ch == '>':
			depth--
		case depth == 0 && (ch == '|' || ch == '&'):
			return "(" + t + ")"
		}
	}
	return t
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
