// Package mcpclient holds the small helpers our MCP clients (mcpgrain try,
// mcpgrain bench, the chaos harness, tests) share on top of the go-sdk
// client, and a raw 2026-07-28 request for what that client does not
// speak (PostModern).
package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// PostModern posts one 2026-07-28 JSON-RPC request (no session) with id to
// endpoint through hc. params gain the request's _meta (the protocol
// version, clientInfo named client, and the client capabilities caps); the
// routing headers go with it (Mcp-Method; Mcp-Name: name, unless empty).
// It returns the HTTP status (0: no response) and the answer's JSON
// (AnswerBody).
func PostModern(ctx context.Context, hc *http.Client, endpoint string, id any, method, name, client string, caps, params map[string]any) (int, []byte, error) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": client, "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := AnswerBody(resp)
	return resp.StatusCode, raw, err
}

// AnswerBody reads the JSON-RPC answer of a response: its JSON body (at
// most 1 MiB), or the last data line of its event stream.
func AnswerBody(resp *http.Response) ([]byte, error) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
	var raw []byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
			raw = []byte(d)
		}
	}
	return raw, sc.Err()
}
