package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// TestTypeScriptSDKClientAsReadmeShows runs README's "Clients" TypeScript
// SDK command (tools/tsclient/bearer-client.mjs: Streamable HTTP with a
// bearer header) against a node: it lists execute and runs code to
// completion.
func TestTypeScriptSDKClientAsReadmeShows(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools", "tsclient", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "the TypeScript SDK is not installed (run: npm ci --prefix tools/tsclient)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH")
	}
	info := startCodeNode(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tools/tsclient/bearer-client.mjs")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "MCP_URL=http://"+info.HTTPAddr+"/mcp", "MCPGRAIN_TOKEN="+aliceToken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s\n%s", err, out, stderr.String())
	}
	var res struct {
		Tools  []string `json:"tools"`
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("TypeScript client output %q: %v", out, err)
	}
	if !slices.Contains(res.Tools, "execute") || res.Result.StructuredContent["status"] != "completed" {
		t.Fatalf("TypeScript client: %s", out)
	}
}

// readmeBearer is README's "Clients" go-sdk example's round tripper: it
// adds the bearer token to every request.
type readmeBearer struct{ token string }

func (b readmeBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestGoSDKClientAsReadmeShows runs README's "Clients" go-sdk example
// (the same calls) against a node: connect with a bearer header, call
// execute, read the structured result.
func TestGoSDKClientAsReadmeShows(t *testing.T) {
	info := startCodeNode(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "my-agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + info.HTTPAddr + "/mcp",
		HTTPClient: &http.Client{Transport: readmeBearer{token: aliceToken}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute",
		Arguments: map[string]any{"code": "return await tools.demo.listTodos()"}})
	if err != nil || res.IsError || mcpclient.Structured(res)["status"] != "completed" {
		t.Fatalf("execute: %v %+v", err, res)
	}
}
