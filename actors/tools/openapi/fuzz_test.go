package openapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// Loading a hostile document (as --openapi with a URL would) never panics
// or hangs, and whatever loads can be searched and looked up.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{"/a/{id}":{"get":{"operationId":"getA","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],"responses":{"200":{"description":"ok"}}}}}}`,
		"openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /b:\n    post:\n      requestBody: {content: {application/json: {schema: {$ref: '#/components/schemas/B'}}}}\n      responses: {'201': {description: ok}}\ncomponents:\n  schemas:\n    B: {type: object, properties: {x: {$ref: '#/components/schemas/B'}}}\n",
		`{"swagger":"2.0"}`, `{"openapi":"2.0"}`, `{"openapi":"3.0.0","paths":{"/x":{"get":{"parameters":[{"$ref":"#/nope"}]}}}}`,
		`{"openapi":"3.0.0","paths":{"/x":{"get":{"parameters":[{"$ref":"other.json#/p"}]}}}}`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		src, err := openapi.Load(ctx, openapi.Options{Name: "fuzz", Document: doc, BaseURL: "http://127.0.0.1:1"})
		if err != nil {
			return
		}
		for _, tool := range src.Search(ctx, "a", 20) {
			if _, ok := src.Lookup(ctx, tool.Name); !ok {
				t.Fatalf("search returned %q, which Lookup cannot find", tool.Name)
			}
		}
	})
}
