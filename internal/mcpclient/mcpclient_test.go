package mcpclient

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestBearerAddsTheToken(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Authorization") }))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := (&http.Client{Transport: Bearer("t0k", nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != "Bearer t0k" || req.Header.Get("Authorization") != "" {
		t.Fatalf("server saw %q; caller's request modified: %q", got, req.Header.Get("Authorization"))
	}
}

func TestStructuredAndText(t *testing.T) {
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{}, &mcp.TextContent{Text: "b"}},
		StructuredContent: struct{ Status string }{"ok"},
	}
	if Text(res) != "ab" {
		t.Fatalf("Text = %q", Text(res))
	}
	if s := Structured(res); s["Status"] != "ok" {
		t.Fatalf("Structured = %v", s)
	}
	if s := Structured(&mcp.CallToolResult{StructuredContent: []int{1}}); s != nil {
		t.Fatalf("a non-object: %v", s)
	}
}
