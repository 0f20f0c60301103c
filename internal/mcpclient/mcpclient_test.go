package mcpclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// AnswerBody reads a JSON answer as it is, and an event stream's last data
// line.
func TestAnswerBodyReadsJSONAndEventStreams(t *testing.T) {
	for _, tc := range []struct{ contentType, body, want string }{
		{"application/json", `{"result":{}}`, `{"result":{}}`},
		{"text/event-stream", "event: message\ndata: {\"a\":1}\n\ndata: {\"result\":{}}\n\n", `{"result":{}}`},
	} {
		resp := &http.Response{Header: http.Header{"Content-Type": {tc.contentType}}, Body: io.NopCloser(strings.NewReader(tc.body))}
		got, err := AnswerBody(resp)
		if err != nil || strings.TrimSpace(string(got)) != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.contentType, got, err, tc.want)
		}
	}
}
