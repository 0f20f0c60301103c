// Package mcpclient holds the small helpers our MCP clients (mcpgrain try,
// mcpgrain bench, the chaos harness) share on top of the go-sdk client.
package mcpclient

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bearer returns a RoundTripper that adds "Authorization: Bearer token" to
// every request it sends through rt (http.DefaultTransport when nil).
func Bearer(token string, rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return bearer{token: token, rt: rt}
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// Structured returns a tool result's structured content as a JSON object
// (nil when it has none or it is not an object).
func Structured(res *mcp.CallToolResult) map[string]any {
	if m, ok := res.StructuredContent.(map[string]any); ok {
		return m
	}
	var m map[string]any
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// Text concatenates a tool result's text content ("" for no result, as a
// failed call returns: a test's failure message then shows the error).
func Text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
