package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// validToolName is MCP's tool-name rule (1 to 128 of A-Z a-z 0-9 _ - .).
var validToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// PassthroughName is the name a pass-through tool has on the node:
// "<source>.<tool>".
func PassthroughName(source, tool string) string { return source + "." + tool }

// Passthrough is the pass-through tools of one source on one server: each
// upstream tool as "<source>.<tool>" with the upstream's title,
// description, input schema and annotations. A call is a one-call
// code-mode execution (`return await tools.<source>["<tool>"](arguments)`)
// run by the session's engine as execute runs code: the same policies
// decide it (approve runs it, block refuses it, require_approval pauses it,
// and a tool's annotations give its default), a pause is answered as
// execute's pauses are (and resumed, decided and made durable the same
// ways), and a 2026-07-28 retry resumes it. It holds its server weakly: a
// server nothing else uses is not kept alive by a source that watches its
// tools.
type Passthrough struct {
	server weak.Pointer[mcp.Server]
	t      *tools
	source string
	mu     sync.Mutex
	names  []string // the tools registered now
}

// NewPassthrough returns the pass-through tools of source on server, with
// the options of [Register] (which registers execute's companion resume);
// it has none until [Passthrough.Set].
func NewPassthrough(server *mcp.Server, o Options, source string) *Passthrough {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Passthrough{server: weak.Make(server), t: &tools{o: o}, source: source}
}

// Set makes list the source's tools on the server: it removes those no
// longer listed and adds (or replaces) the others; the server tells its
// clients (notifications/tools/list_changed). Tools whose namespaced name
// is not a valid MCP tool name are left out (logged). It returns false,
// doing nothing, once the server is gone.
func (p *Passthrough) Set(list []*mcp.Tool) bool {
	server := p.server.Value()
	if server == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(list))
	for _, up := range list {
		name := PassthroughName(p.source, up.Name)
		if !validToolName.MatchString(name) {
			p.t.o.Logger.Warn("upstream tool not passed through: its name is not a valid MCP tool name", "source", p.source, "tool", up.Name)
			continue
		}
		tool := &mcp.Tool{Name: name, Title: up.Title, Description: up.Description, InputSchema: up.InputSchema,
			Annotations: up.Annotations}
		if tool.InputSchema == nil {
			tool.InputSchema = map[string]any{"type": "object"}
		}
		server.AddTool(tool, p.t.passthrough(p.source, up.Name))
		names = append(names, name)
	}
	var gone []string
	for _, n := range p.names {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		server.RemoveTools(gone...)
	}
	p.names = names
	return true
}

// passthrough is the handler of one pass-through tool.
func (t *tools) passthrough(source, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		code, err := passthroughCode(source, tool, req.Params.Arguments)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: " + err.Error()}}}, nil
		}
		res, _, err := t.execute(ctx, req, executeInput{Code: code})
		return res, err
	}
}

// passthroughCode is the one-call program of a pass-through call: its
// arguments (a JSON object; empty: {}) as a literal.
func passthroughCode(source, tool string, args json.RawMessage) (string, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var lit bytes.Buffer // the arguments as sent: big numbers keep their digits
	if err := json.Compact(&lit, args); err != nil || lit.Len() == 0 || lit.Bytes()[0] != '{' {
		return "", errors.New("arguments must be a JSON object")
	}
	name, err := json.Marshal(tool)
	if err != nil {
		return "", fmt.Errorf("tool name: %w", err)
	}
	return fmt.Sprintf("return await tools.%s[%s](%s);", source, name, lit.String()), nil
}
