package openapi

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

const componentSchemaPrefix = "#/components/schemas/"

// inputSchema returns the operation's input schema, building it on first
// use.
func (s *Source) inputSchema(op *operation) json.RawMessage {
	op.schemaOnce.Do(func() { op.schema = s.buildInputSchema(op) })
	return op.schema
}

// buildInputSchema returns the JSON Schema of an operation's args object:
// one property per parameter and, for the request body, either its
// properties (when flattened) or a "body" property. Component schemas the
// properties refer to are copied into $defs and referred to as
// #/$defs/<name>.
func (s *Source) buildInputSchema(op *operation) json.RawMessage {
	b := &schemaBuilder{components: s.schemas, defs: map[string]any{}, openapi30: !s.is31Plus}
	props := map[string]any{}
	var required []string
	for _, p := range op.params {
		sch := b.top(p.schema)
		if p.description != "" {
			if _, ok := sch["description"]; !ok {
				sch["description"] = p.description
			}
		}
		props[p.name] = sch
		if p.required {
			required = append(required, p.name)
		}
	}
	out := map[string]any{"type": "object"}
	if bd := op.body; bd != nil {
		sch := b.top(bd.schema)
		if bd.description != "" {
			if _, ok := sch["description"]; !ok {
				sch["description"] = bd.description
			}
		}
		if bd.flatten {
			if ps, ok := sch["properties"].(map[string]any); ok {
				for name, v := range ps {
					props[name] = v
				}
			}
			if bd.required {
				if req, ok := sch["required"].([]any); ok {
					for _, r := range req {
						if name, ok := r.(string); ok {
							required = append(required, name)
						}
					}
				}
			}
			if d, ok := sch["description"].(string); ok {
				out["description"] = "Request body fields (" + bd.mediaType + "): " + d
			}
		} else {
			if _, ok := sch["description"]; !ok {
				sch["description"] = "Request body (" + bd.mediaType + ")."
			}
			props["body"] = sch
			if bd.required {
				required = append(required, "body")
			}
		}
	}
	out["properties"] = props
	if len(required) > 0 {
		slices.Sort(required)
		out["required"] = slices.Compact(required)
	}
	if len(b.defs) > 0 {
		out["$defs"] = b.defs
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}

// schemaBuilder converts kin-openapi schemas to JSON Schema values.
type schemaBuilder struct {
	components map[string]*openapi3.SchemaRef
	defs       map[string]any
	openapi30  bool
}

// top converts a schema inline (a reference at the top is resolved, so its
// properties can be flattened), as a fresh map the caller may modify.
func (b *schemaBuilder) top(sr *openapi3.SchemaRef) map[string]any {
	if sr == nil || sr.Value == nil {
		return map[string]any{}
	}
	m, ok := b.convert(sr.Value).(map[string]any)
	if !ok {
		return map[string]any{}
	}
	return m
}

// convert marshals a schema value and rewrites what it refers to.
func (b *schemaBuilder) convert(v *openapi3.Schema) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return map[string]any{}
	}
	return b.walk(out)
}

// Keywords whose values are schemas, arrays of schemas and maps of schemas.
var (
	schemaKeywords = []string{"items", "not", "additionalProperties", "contains", "propertyNames",
		"if", "then", "else", "contentSchema", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "dependentSchemas"}
)

// walk rewrites component references to $defs (copying the component in)
// and, for OpenAPI 3.0 documents, turns nullable and boolean
// exclusiveMinimum/Maximum into their JSON Schema forms.
func (b *schemaBuilder) walk(v any) any {
	x, ok := v.(map[string]any)
	if !ok {
		return v // a boolean schema
	}
	if ref, ok := x["$ref"].(string); ok {
		if name, ok := strings.CutPrefix(ref, componentSchemaPrefix); ok {
			name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
			if sr, ok := b.components[name]; ok && sr != nil && sr.Value != nil {
				if _, done := b.defs[name]; !done {
					b.defs[name] = true // placeholder: stops recursion
					b.defs[name] = b.convert(sr.Value)
				}
			}
			x["$ref"] = "#/$defs/" + escapePointer(name)
		}
	}
	for _, k := range schemaKeywords {
		if e, ok := x[k]; ok {
			x[k] = b.walk(e)
		}
	}
	for _, k := range schemaListKeywords {
		if list, ok := x[k].([]any); ok {
			for i, e := range list {
				list[i] = b.walk(e)
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if m, ok := x[k].(map[string]any); ok {
			for name, e := range m {
				m[name] = b.walk(e)
			}
		}
	}
	if b.openapi30 {
		fix30(x)
	}
	return x
}

// fix30 rewrites the OpenAPI 3.0 keywords that mean something else in JSON
// Schema 2020-12.
func fix30(x map[string]any) {
	if n, ok := x["nullable"].(bool); ok {
		delete(x, "nullable")
		if t, ok := x["type"].(string); ok && n {
			x["type"] = []any{t, "null"}
		}
	}
	for _, bound := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if ex, ok := x[bound[0]].(bool); ok {
			delete(x, bound[0])
			if lim, ok := x[bound[1]]; ok && ex {
				x[bound[0]] = lim
				delete(x, bound[1])
			}
		}
	}
}

// escapePointer escapes a JSON Pointer token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
