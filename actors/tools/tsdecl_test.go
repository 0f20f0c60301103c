package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/mcpgrain/mcpgrain/actors/tools"
)

// checkTS fails the test when src is not valid TypeScript (esbuild's TS
// transform, the one code mode compiles with).
func checkTS(t *testing.T, src string) {
	t.Helper()
	res := api.Transform(src, api.TransformOptions{Loader: api.LoaderTS})
	for _, m := range res.Errors {
		line := ""
		if m.Location != nil {
			line = m.Location.LineText
		}
		t.Errorf("invalid TypeScript: %s (line %q)\n%s", m.Text, line, src)
	}
}

func TestSchemaType(t *testing.T) {
	cases := []struct{ name, schema, want string }{
		{"string", `{"type":"string"}`, "string"},
		{"integer", `{"type":"integer"}`, "number"},
		{"boolean", `{"type":"boolean"}`, "boolean"},
		{"null", `{"type":"null"}`, "null"},
		{"true", `true`, "unknown"},
		{"false", `false`, "never"},
		{"no type", `{"description":"x"}`, "unknown"},
		{"type list", `{"type":["string","null"]}`, "string | null"},
		{"enum", `{"type":"string","enum":["a","b\"c"]}`, `"a" | "b\"c"`},
		{"enum mixed", `{"enum":[1,true,null]}`, `1 | true | null`},
		{"const", `{"const":"x"}`, `"x"`},
		{"array", `{"type":"array","items":{"type":"string"}}`, "string[]"},
		{"array no items", `{"type":"array"}`, "unknown[]"},
		{"array of union", `{"type":"array","items":{"type":["string","number"]}}`, "(string | number)[]"},
		{"object", `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},"required":["a"]}`, "{ a: string; b?: number }"},
		{"quoted key", `{"type":"object","properties":{"x-y":{"type":"string"}}}`, `{ "x-y"?: string }`},
		{"empty object", `{"type":"object"}`, "Record<string, unknown>"},
		{"map", `{"type":"object","additionalProperties":{"type":"number"}}`, "Record<string, number>"},
		{"properties without type", `{"properties":{"a":{"type":"boolean"}}}`, "{ a?: boolean }"},
		{"oneOf", `{"oneOf":[{"type":"string"},{"type":"object","properties":{"a":{"type":"string","enum":["|"]}}}]}`, `string | { a?: "|" }`},
		{"anyOf nested union", `{"anyOf":[{"type":["string","null"]},{"type":"number"}]}`, "(string | null) | number"},
		{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{"type":"string"}}}]}`, "{ a?: string } & { b?: string }"},
		{"ref", `{"type":"object","properties":{"t":{"$ref":"#/$defs/T"}},"$defs":{"T":{"type":"string","enum":["x"]}}}`, `{ t?: "x" }`},
		{"definitions ref", `{"type":"array","items":{"$ref":"#/definitions/N"},"definitions":{"N":{"type":"number"}}}`, "number[]"},
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, "unknown"},
		{"missing ref", `{"$ref":"#/$defs/Nope"}`, "unknown"},
		{"cyclic ref", `{"type":"object","properties":{"next":{"$ref":"#"}}}`, "{ next?: unknown }"},
		{"deep", `{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"array"}}}}}}`, "unknown[][][][][]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var schema any
			if err := json.Unmarshal([]byte(c.schema), &schema); err != nil {
				t.Fatal(err)
			}
			got := tools.SchemaType(schema)
			if got != c.want {
				t.Errorf("SchemaType(%s) = %s, want %s", c.schema, got, c.want)
			}
			checkTS(t, "type T = "+got+";\n")
		})
	}
}

func TestDeclarationsRenderOperations(t *testing.T) {
	ops := []tools.Tool{
		{Path: "demo.listTodos", Source: "demo", Name: "listTodos", Description: "List to-dos\nIn creation order;\n\n */ not a comment end.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean","description":"Only these."},"limit":{"type":"integer"}}}`)},
		{Path: "demo.createTodo", Source: "demo", Name: "createTodo", RequiresApproval: true,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		{Path: "files.delete", Source: "files", Name: "delete", RequiresApproval: true},
		{Path: "files.get-file", Source: "files", Name: "get-file"},
	}
	got := tools.Declarations(ops, 0)
	want := `declare const tools: {
  /** Find operations: [{path, description, requiresApproval}]. */
  search(args: { query: string; limit?: number; offset?: number }): Promise<unknown>;
  /** An operation's description and input schema. */
  describe(args: { path: string }): Promise<unknown>;
  demo: {
    /** List to-dos. In creation order; *\/ not a comment end. */
    listTodos(args?: {
      /** Only these. */
      done?: boolean;
      limit?: number;
    }): Promise<unknown>;
    createTodo(args: {
      title: string;
    }): Promise<unknown>;
  };
  files: {
    delete(args?: Record<string, unknown>): Promise<unknown>;
    "get-file"(args?: Record<string, unknown>): Promise<unknown>;
  };
};
`
	if got != want {
		t.Errorf("Declarations:\n%s\nwant:\n%s", got, want)
	}
	checkTS(t, got)
	if tools.Declarations(nil, 0) != "" {
		t.Error("Declarations(nil) is not empty")
	}
}

// manyOps is n operations of two sources, every third one a write.
func manyOps(n int) []tools.Tool {
	var ops []tools.Tool
	for i := range n {
		src := "alpha"
		if i >= n/2 {
			src = "beta"
		}
		name := fmt.Sprintf("op%03d", i)
		ops = append(ops, tools.Tool{Path: src + "." + name, Source: src, Name: name, RequiresApproval: i%3 == 0,
			Description: strings.Repeat("word ", 30),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The id."},"n":{"type":"integer"}},"required":["id"]}`)})
	}
	return ops
}

func TestDeclarationsBudget(t *testing.T) {
	ops := manyOps(200)
	for _, budget := range []int{0, 2048, 4096, 16 << 10} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			got := tools.Declarations(ops, budget)
			limit := budget
			if limit == 0 {
				limit = tools.DefaultDeclarationBudget
			}
			if len(got) > limit {
				t.Errorf("%d bytes, budget %d", len(got), limit)
			}
			checkTS(t, got)
			if !strings.Contains(got, `tools.describe({path: "alpha.<name>"})`) || !strings.Contains(got, "more (tools.search)") {
				t.Errorf("the operations past the budget are not pointed to:\n%s", got)
			}
			// Reads first: no write is declared in full while a read is not.
			full := strings.Count(got, "): Promise<unknown>;") - 2
			if full == 0 {
				t.Fatalf("no operation declared in full:\n%s", got)
			}
			if full <= 2*len(ops)/3 && strings.Contains(got, "op000(args") {
				t.Errorf("a write (op000) is declared while reads are not:\n%s", got)
			}
		})
	}
	if got := tools.Declarations(manyOps(4), 0); strings.Contains(got, "Also") {
		t.Errorf("operations within the budget are not all declared:\n%s", got)
	}
}

func TestRegistryOperationsDeclareDemo(t *testing.T) {
	r := newDemoRegistry(t)
	ops := r.Operations(context.Background())
	if len(ops) == 0 {
		t.Fatal("no operations")
	}
	got := tools.Declarations(ops, 0)
	checkTS(t, got)
	for _, want := range []string{"  demo: {\n", "    listTodos(args?: {\n", "      done?: boolean;\n", "    createTodo(args: {\n", "      title: string;\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("declarations lack %q:\n%s", want, got)
		}
	}
}
