package mcpgrain_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// planTool asks two questions in one call (who deploys, then whether to).
func planTool(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	who, err := mcpgrain.Elicit(ctx, req, "name", "Who deploys?", nameForm)
	if err != nil {
		return nil, nil, err
	}
	if who.Action != "accept" {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "nobody: " + who.Action}}}, nil, nil
	}
	name := fmt.Sprint(who.Content["name"])
	ok, err := mcpgrain.Elicit(ctx, req, "confirm", "Deploy as "+name+"?", confirmForm)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %s %v", name, ok.Action, ok.Content["confirm"])}}}, nil, nil
}

// nameForm asks for a name.
var nameForm = &jsonschema.Schema{
	Type:       "object",
	Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}},
	Required:   []string{"name"},
}

// startDev runs a dev node of a server with the plan tool in the test's
// process and returns its MCP endpoint.
func startDev(t *testing.T) string {
	t.Helper()
	s := mcpgrain.Server{Name: "planner", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "plan"}, planTool)
	}}
	return runDev(t, s, t.Output())
}

// runDev runs a dev node of s in the test's process (mcpgrain.Run, as a
// user's program would), its logs to logs and extra flags added, and
// returns its MCP endpoint once it serves.
func runDev(tb testing.TB, s mcpgrain.Server, logs io.Writer, extra ...string) string {
	tb.Helper()
	out, w := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		args := append([]string{"dev", "--no-auth", "--http", "127.0.0.1:0", "--grpc", "", "--data", tb.TempDir()}, extra...)
		done <- mcpgrain.Run(ctx, s, args, w, logs)
		_ = w.Close()
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				tb.Errorf("the node: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Error("the node did not stop within 30s")
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[0]+f[1] == "MCPendpoint:" {
				found <- f[2]
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case endpoint := <-found:
		return endpoint
	case err := <-done:
		tb.Fatalf("the node stopped before serving: %v", err)
	case <-time.After(60 * time.Second):
		tb.Fatal("the node named no MCP endpoint within 60s")
	}
	return ""
}

// answering is a client whose user answers from answers (by message; an
// unknown question is cancelled) and reports what it was asked on asked.
func answering(answers map[string]*mcp.ElicitResult, asked chan<- string) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "v0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			select {
			case asked <- req.Params.Message:
			default: // a runaway client: the test sees the questions it recorded
			}
			if r, ok := answers[req.Params.Message]; ok {
				return r, nil
			}
			return &mcp.ElicitResult{Action: "cancel"}, nil
		},
	})
}

// callPlan calls plan on endpoint with c in the era of version and
// returns the result's text.
func callPlan(t *testing.T, c *mcp.Client, endpoint, version string) (string, bool) {
	t.Helper()
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%q): %v", version, err)
	}
	defer func() { _ = cs.Close() }()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plan"})
	if err != nil {
		t.Fatalf("era %q: plan: %v", version, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// drain returns what was sent on ch so far.
func drain(ch <-chan string) []string {
	var got []string
	for {
		select {
		case s := <-ch:
			got = append(got, s)
		default:
			return got
		}
	}
}

// Elicit on a dev node, over HTTP, with go-sdk clients: in a stateful
// session natively, and in 2026-07-28 by input_required rounds through the
// node's continuation grains (whose sealed requestState carries the first
// answer to the last round); a decline ends the call; a client that
// cannot elicit gets a clear error.
func TestElicitOnANodeInBothEras(t *testing.T) {
	endpoint := startDev(t)
	ada := map[string]*mcp.ElicitResult{
		"Who deploys?":   {Action: "accept", Content: map[string]any{"name": "Ada"}},
		"Deploy as Ada?": {Action: "accept", Content: map[string]any{"confirm": true}},
	}
	for _, version := range []string{"2025-11-25", ""} {
		asked := make(chan string, 8)
		if got, isErr := callPlan(t, answering(ada, asked), endpoint, version); isErr || got != "Ada: accept true" {
			t.Errorf("era %q: plan = %q (isError %v), want %q", version, got, isErr, "Ada: accept true")
		}
		if got := strings.Join(drain(asked), "|"); got != "Who deploys?|Deploy as Ada?" {
			t.Errorf("era %q: the user was asked %q, want each question once", version, got)
		}
		declines := map[string]*mcp.ElicitResult{"Who deploys?": {Action: "decline"}}
		if got, isErr := callPlan(t, answering(declines, asked), endpoint, version); isErr || got != "nobody: decline" {
			t.Errorf("era %q: declined plan = %q (isError %v)", version, got, isErr)
		}
		mute := mcp.NewClient(&mcp.Implementation{Name: "mute", Version: "v0"}, nil)
		if got, isErr := callPlan(t, mute, endpoint, version); !isErr || !strings.Contains(got, "did not declare the elicitation capability") {
			t.Errorf("era %q: plan without elicitation = %q (isError %v), want the capability error", version, got, isErr)
		}
	}
}

// On the node the requestState Elicit writes is sealed: the client sees
// only the node's token, and an unsealed state of Elicit's own form is
// refused rather than trusted.
func TestElicitStateIsSealedOnANode(t *testing.T) {
	endpoint := startDev(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "rounds", Version: "v0"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	ada := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plan", InputResponses: mcp.InputResponseMap{"name": ada}})
	if err != nil || !res.NeedsInput() || res.InputRequests["confirm"] == nil {
		t.Fatalf("second round: %v, needsInput %v, requests %v", err, res != nil && res.NeedsInput(), res)
	}
	if strings.HasPrefix(res.RequestState, "mcpgrain-elicit.") || res.RequestState == "" {
		t.Fatalf("the requestState %q is not sealed", res.RequestState)
	}
	yes := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plan", RequestState: res.RequestState, InputResponses: mcp.InputResponseMap{"confirm": yes}})
	if err != nil || res.IsError || res.NeedsInput() {
		t.Fatalf("last round: %v %+v", err, res)
	}
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plan", RequestState: "mcpgrain-elicit.v1.e30", InputResponses: mcp.InputResponseMap{"confirm": yes}})
	if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("an unsealed state: %v, want invalid requestState", err)
	}
}

// The official TypeScript SDK's client (stateful session, 2025-11-25)
// answers the plan tool's two forms natively (tools/tsclient/call-tool.mjs
// with MCP_ELICIT).
func TestElicitWithTheTypeScriptSDK(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tools", "tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "the TypeScript SDK is not installed (run: npm ci --prefix tools/tsclient)")
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH")
	}
	endpoint := startDev(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join(dir, "call-tool.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL="+endpoint, "MCP_TOOL=plan",
		`MCP_ELICIT={"action":"accept","content":{"name":"Ada","confirm":true}}`)
	cmd.Stderr = t.Output()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	var res struct {
		Asked  []string `json:"asked"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("TypeScript client output %q: %v", out, err)
	}
	if res.Result.IsError || len(res.Result.Content) != 1 || res.Result.Content[0].Text != "Ada: accept true" {
		t.Fatalf("plan with the TypeScript SDK: %+v, want Ada: accept true", res.Result)
	}
	if got := strings.Join(res.Asked, "|"); got != "Who deploys?|Deploy as Ada?" {
		t.Fatalf("the TypeScript client was asked %q", got)
	}
}
