package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
)

// largeSpec returns a JSON OpenAPI 3.0 document with n operations: n/2
// resources, each with a GET (path and query parameters) and a POST (JSON
// body referring to a shared component schema).
func largeSpec(n int) []byte {
	paths := make(map[string]any, n/2)
	for i := range n / 2 {
		paths[fmt.Sprintf("/resources%d/{id}", i)] = map[string]any{
			"parameters": []any{map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}},
			"get": map[string]any{
				"operationId": fmt.Sprintf("getResource%d", i),
				"summary":     fmt.Sprintf("Get resource %d", i),
				"description": fmt.Sprintf("Returns one item of resource family %d, with optional expansion.", i),
				"tags":        []string{fmt.Sprintf("family%d", i%50)},
				"parameters":  []any{map[string]any{"name": "expand", "in": "query", "schema": map[string]any{"type": "boolean"}}},
				"responses": map[string]any{"200": map[string]any{"description": "ok",
					"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Item"}}}}},
			},
			"post": map[string]any{
				"operationId": fmt.Sprintf("updateResource%d", i),
				"summary":     fmt.Sprintf("Update resource %d", i),
				"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/NewItem"}}}},
				"responses": map[string]any{"200": map[string]any{"description": "ok"}},
			},
		}
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "large", "version": "1"},
		"servers": []any{map[string]any{"url": "http://127.0.0.1:1"}},
		"paths":   paths,
		"components": map[string]any{"schemas": map[string]any{
			"Item": map[string]any{"type": "object", "properties": map[string]any{
				"id": map[string]any{"type": "string"}, "name": map[string]any{"type": "string"},
				"tags": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Tag"}}}},
			"NewItem": map[string]any{"type": "object", "required": []string{"name"}, "properties": map[string]any{
				"name": map[string]any{"type": "string"}, "tags": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Tag"}}}},
			"Tag": map[string]any{"type": "object", "properties": map[string]any{"label": map[string]any{"type": "string", "nullable": true}}},
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	largeOnce sync.Once
	largeSrc  *openapi.Source
	largeErr  error
)

// loadLarge loads the 10,000-operation document once per test binary.
func loadLarge(tb testing.TB) *openapi.Source {
	tb.Helper()
	largeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "openapi-large")
		if err != nil {
			largeErr = err
			return
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "large.json")
		if largeErr = os.WriteFile(file, largeSpec(10000), 0o600); largeErr != nil {
			return
		}
		largeSrc, largeErr = openapi.Load(context.Background(), openapi.Options{Name: "large", Spec: file})
	})
	if largeErr != nil {
		tb.Fatal(largeErr)
	}
	return largeSrc
}

func TestLargeSpecLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("large spec")
	}
	data := largeSpec(10000)
	file := filepath.Join(t.TempDir(), "large.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "large", Spec: file})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("10,000-operation spec (%d KB JSON): load %v, allocated %d MB, retained heap %d MB",
		len(data)>>10, elapsed.Round(time.Millisecond), allocated>>20, retained>>20)
	if src.Len() != 10000 {
		t.Fatalf("Len = %d, want 10000", src.Len())
	}
	if _, ok := src.Lookup(t.Context(), "updateResource4999"); !ok {
		t.Fatal("updateResource4999 not found")
	}
	runtime.KeepAlive(src)
}

func TestLargeSpecLookupAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("large spec")
	}
	src := loadLarge(t)
	ctx := t.Context()
	if _, ok := src.Lookup(ctx, "getResource1234"); !ok { // builds the schema once
		t.Fatal("getResource1234 not found")
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := src.Lookup(ctx, "getResource1234"); !ok {
			t.Fatal("not found")
		}
	})
	if allocs > 1 {
		t.Fatalf("Lookup allocates %v times per call; want a small constant", allocs)
	}
	missAllocs := testing.AllocsPerRun(1000, func() {
		if _, ok := src.Lookup(ctx, "noSuchOperation"); ok {
			t.Fatal("found")
		}
	})
	if missAllocs > 0 {
		t.Fatalf("Lookup miss allocates %v times", missAllocs)
	}
	start := time.Now()
	hits := src.Search(ctx, "update resource 42", 5)
	t.Logf("Search over 10,000 operations: %v, top %s", time.Since(start), hits[0].Name)
	if len(hits) != 5 || hits[0].Name != "updateResource42" {
		t.Fatalf("Search top = %v", hits)
	}
}

func BenchmarkLookup10k(b *testing.B) {
	src := loadLarge(b)
	ctx := context.Background()
	names := []string{"getResource0", "updateResource2500", "getResource4999", "updateResource17"}
	for _, n := range names {
		src.Lookup(ctx, n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := src.Lookup(ctx, names[i%len(names)]); !ok {
			b.Fatal("not found")
		}
	}
}

func BenchmarkSearch10k(b *testing.B) {
	src := loadLarge(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		src.Search(ctx, "update resource 42", 12)
	}
}

func BenchmarkLoad10k(b *testing.B) {
	file := filepath.Join(b.TempDir(), "large.json")
	if err := os.WriteFile(file, largeSpec(10000), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openapi.Load(context.Background(), openapi.Options{Name: "large", Spec: file}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLargeSpecFirstCall reports (docs/benchmarks.md) the latency of the
// first and later calls of operations of the 10,000-operation document
// over real HTTP; TestLargeSpecLookupAllocs asserts the point lookup.
func TestLargeSpecFirstCall(t *testing.T) {
	if testing.Short() {
		t.Skip("large spec")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","name":"n"}`)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "large.json")
	if err := os.WriteFile(file, largeSpec(10000), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := openapi.Load(t.Context(), openapi.Options{Name: "large", Spec: file, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	call := func(op string) time.Duration {
		start := time.Now()
		if _, err := src.Call(t.Context(), op, map[string]any{"id": "7", "name": "x"}); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		return time.Since(start)
	}
	first := call("updateResource4321")
	var later []time.Duration
	for i := range 20 {
		later = append(later, call(fmt.Sprintf("updateResource%d", 4000+i)))
	}
	slices.Sort(later)
	t.Logf("10,000-operation spec over HTTP: first call %v, later calls (other operations) p50 %v",
		first.Round(time.Microsecond), later[len(later)/2].Round(time.Microsecond))
}
