package systemtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// An upstream MCP server nobody here wrote (go-sdk's example memory
// server, a separate process) exposed with pass-through: its tools are MCP
// tools "mem.<tool>" of the node; one the policy approves runs at once, one
// it blocks is refused, and an unannotated one (fail closed) pauses, is
// approved over the HTTP API and completes on the model's resume, once;
// a sessionless client approves one through its input request.
func TestPassthroughToolsOfAnUpstreamRunUnderThePolicy(t *testing.T) {
	upstream := startMemoryServer(t)
	rules, err := policy.New([]policy.Rule{
		{Pattern: "mem.read_graph", Action: policy.Approve},
		{Pattern: "mem.delete_*", Action: policy.Block},
	})
	if err != nil {
		t.Fatal(err)
	}
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Upstreams = []app.UpstreamSource{{Name: "mem", URL: upstream, Expose: true}}
		c.MCP.Code.Policy = rules
	})
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	assertPassthroughListed(t, cs)

	res, sc := callTool(t, cs, "mem.read_graph", nil)
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("mem.read_graph: %s / %v", mcpclient.Text(res), sc)
	}
	res, _ = callTool(t, cs, "mem.delete_entities", map[string]any{"entityNames": []any{"x"}})
	if !res.IsError || !strings.Contains(strings.ToLower(mcpclient.Text(res)), "block") {
		t.Fatalf("blocked mem.delete_entities: %s", mcpclient.Text(res))
	}

	res, sc = callTool(t, cs, "mem.create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "mcpgrain", "entityType": "project", "observations": []any{"passes tools through"}}}})
	id, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "waiting_for_interaction" || id == "" {
		t.Fatalf("mem.create_entities: want a pause, got %s / %v", mcpclient.Text(res), sc)
	}
	if strings.Contains(readGraph(t, cs), "passes tools through") {
		t.Fatal("the paused call ran")
	}
	url := fmt.Sprintf("http://%s/api/mcp-sessions/%s/executions/%s", info.HTTPAddr, cs.ID(), id)
	if r := api(t, "GET", url, bobToken, ""); r.status != 200 || r.body["execution"].(map[string]any)["tool"] != "mem.create_entities" {
		t.Fatalf("GET the pause: %d %v", r.status, r.body)
	}
	if r := api(t, "POST", url+"/resume", bobToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	res, sc = callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s / %v", mcpclient.Text(res), sc)
	}
	if g := readGraph(t, cs); strings.Count(g, "passes tools through") != 1 {
		t.Fatalf("after the approval the graph is %s", g)
	}

	// A 2026-07-28 (sessionless) client is asked through its input
	// request, and its retry runs the call.
	var asked string
	mrtr := connect(t, info.HTTPAddr, aliceToken, "", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = req.Params.Message
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	res, sc = callTool(t, mrtr, "mem.create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "retry", "entityType": "test", "observations": []any{"asked in the request"}}}})
	if res.IsError || sc["status"] != "completed" || !strings.Contains(asked, "mem.create_entities") {
		t.Fatalf("sessionless: asked %q, got %s / %v", asked, mcpclient.Text(res), sc)
	}
	if g := readGraph(t, cs); !strings.Contains(g, "asked in the request") {
		t.Fatalf("after the sessionless approval the graph is %s", g)
	}
}

// assertPassthroughListed checks tools/list: the upstream's tools under
// their namespaced names, with its descriptions and input schemas.
func assertPassthroughListed(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tool.Name] = tool
	}
	for _, name := range []string{"execute", "resume", "mem.read_graph", "mem.create_entities", "mem.delete_entities"} {
		if listed[name] == nil {
			t.Fatalf("tools/list has no %s: %v", name, listed)
		}
	}
	if c := listed["mem.create_entities"]; c.Description != "Create multiple new entities in the knowledge graph" ||
		!strings.Contains(fmt.Sprint(c.InputSchema), "entities") {
		t.Fatalf("mem.create_entities listed as %+v", c)
	}
}

// readGraph is the memory server's graph, read through the node.
func readGraph(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, sc := callTool(t, cs, "mem.read_graph", nil)
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("mem.read_graph: %s / %v", mcpclient.Text(res), sc)
	}
	return fmt.Sprint(sc["result"])
}

// startMemoryServer builds go-sdk's example memory server from the module
// cache, runs it with its streamable HTTP flag and returns its URL once it
// accepts connections.
func startMemoryServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memory")
	build := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/examples/server/memory")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build go-sdk's example memory server: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "-http", addr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) || errors.Is(err, net.ErrClosed) {
			t.Fatalf("the memory server did not listen at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polls a separate process's readiness
	}
}

// A tool the upstream adds after the node started becomes a pass-through
// tool of the node: the node's client hears tools/list_changed and lists
// it; one the upstream removes is no longer listed.
func TestPassthroughToolsFollowTheUpstreamsListChanged(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "changing"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	hello := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
	}
	up.AddTool(&mcp.Tool{Name: "first", InputSchema: map[string]any{"type": "object"}, Annotations: ro}, hello)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(ts.Close)
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Code.Upstreams = []app.UpstreamSource{{Name: "up", URL: ts.URL, Expose: true}}
	})
	changed := make(chan struct{}, 16)
	cs := connect(t, info.HTTPAddr, aliceToken, "2025-11-25", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if names := listedNames(t, cs); !slices.Contains(names, "up.first") || slices.Contains(names, "up.second") {
		t.Fatalf("tools before the change: %v", names)
	}
	up.AddTool(&mcp.Tool{Name: "second", InputSchema: map[string]any{"type": "object"}, Annotations: ro}, hello)
	up.RemoveTools("first")
	deadline := time.After(30 * time.Second)
	for {
		names := listedNames(t, cs)
		if slices.Contains(names, "up.second") && !slices.Contains(names, "up.first") {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the node's tools did not follow the upstream: %v", names)
		}
	}
	if res, sc := callTool(t, cs, "up.second", nil); res.IsError || sc["status"] != "completed" {
		t.Fatalf("up.second: %s / %v", mcpclient.Text(res), sc)
	}
}

// listedNames is the session's tools/list, by name.
func listedNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// A paused pass-through call is durable: its node stops, a node started
// on the same store takes the decision over HTTP, restores the execution
// and runs the call once; another session's resume gets its result.
func TestPassthroughPauseSurvivesARestartOfItsNode(t *testing.T) {
	upstream := startMemoryServer(t)
	store := "sqlite:" + filepath.Join(t.TempDir(), "g.db")
	tweak := codeNode(t, func(c *app.Config) {
		c.Store = store
		c.MCP.Code.Upstreams = []app.UpstreamSource{{Name: "mem", URL: upstream, Expose: true}}
		c.MCP.Code.Policy = approveReadGraph(t)
	})
	info, stop := startNodeStoppable(t, tweak)
	cs := connect(t, info.HTTPAddr, aliceToken, "2025-11-25", nil)
	res, sc := callTool(t, cs, "mem.create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "durable", "entityType": "test", "observations": []any{"outlived its node"}}}})
	id, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "waiting_for_interaction" || id == "" {
		t.Fatalf("want a pause, got %s / %v", mcpclient.Text(res), sc)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	info, _ = startNodeStoppable(t, tweak)
	if r := api(t, "POST", "http://"+info.HTTPAddr+"/api/executions/"+id+"/resume", bobToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("accept after the restart: %d %v", r.status, r.body)
	}
	other := connect(t, info.HTTPAddr, aliceToken, "2025-11-25", nil)
	res, sc = callTool(t, other, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume after the restart: %s / %v", mcpclient.Text(res), sc)
	}
	if g := readGraph(t, other); strings.Count(g, "outlived its node") != 1 {
		t.Fatalf("after the restart and approval the graph is %s", g)
	}
}

// approveReadGraph is a policy that runs mem.read_graph without approval.
func approveReadGraph(t *testing.T) *policy.Set {
	t.Helper()
	rules, err := policy.New([]policy.Rule{{Pattern: "mem.read_graph", Action: policy.Approve}})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}
