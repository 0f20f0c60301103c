package mcpgrain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// releases counts the runs of the release tool's step.
var releases atomic.Int32

// release journals a step, then asks for a name with a form.
func release(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	n, err := mcpgrain.Step(ctx, req, "number", func(context.Context) (int32, error) { return releases.Add(1), nil })
	if err != nil {
		return nil, nil, err
	}
	d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{
		Summary: "Name release " + fmt.Sprint(n),
		Form:    &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}}},
	})
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d %v %s %v", n, d.Accepted, d.By, d.Input["name"])}}}, nil, nil
}

// runNode runs s as a dev node in this process (no auth) and returns its
// HTTP origin once it answers.
func runNode(t *testing.T, s mcpgrain.Server) string {
	t.Helper()
	return runDevNode(t, s, "/api/executions", "--no-auth")
}

// runDevNode runs s as a dev node in this process with the extra flags and
// returns its HTTP origin once GET ready answers 200.
func runDevNode(t *testing.T, s mcpgrain.Server, ready string, flags ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args := append(append([]string{"dev"}, flags...), "--http", addr, "--grpc", "", "--data", t.TempDir())
	go func() {
		done <- mcpgrain.Run(ctx, s, args, io.Discard, t.Output())
	}()
	t.Cleanup(func() { cancel(); <-done })
	origin := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(origin + ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return origin
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the node stopped: %v", err)
		default:
		}
	}
	t.Fatal("the node did not answer within 60s")
	return ""
}

// Ask with a form: the approver's content comes back as the decision's
// Input, with who decided; the step before it ran once. In the
// sessionless 2026-07-28 era too, through input_required and the retry.
func TestAskWithAFormReturnsTheApproversInput(t *testing.T) {
	origin := runNode(t, mcpgrain.Server{Name: "rel", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "release"}, release)
	}})
	c := mcp.NewClient(&mcp.Implementation{Name: "ask-test"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "release", Arguments: map[string]any{}})
		got <- answer{res, err}
	}()
	id := pausedID(t, origin, "Name release 1")
	body := `{"action":"accept","content":{"name":"Aurora"}}`
	resp, err := http.Post(origin+"/api/executions/"+id+"/resume", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	a := <-got
	if a.err != nil || a.res.IsError || mcpclient.Text(a.res) != "1 true anonymous Aurora" {
		t.Fatalf("release: %v %q, want %q", a.err, mcpclient.Text(a.res), "1 true anonymous Aurora")
	}
	if n := releases.Load(); n != 1 {
		t.Fatalf("the step ran %d times", n)
	}

	// In the sessionless 2026-07-28 era the question is an input_required
	// result asking for the form, and also a pause on the approval
	// surfaces; the approver's content reaches the handler on the
	// client's retry; the step ran once for this call.
	mc := mcp.NewClient(&mcp.Implementation{Name: "ask-test"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	modern, err := mc.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer modern.Close()
	res, err := modern.CallTool(t.Context(), &mcp.CallToolParams{Name: "release", Arguments: map[string]any{}})
	if err != nil || !res.NeedsInput() || res.InputRequests["approval"] == nil || res.RequestState == "" {
		t.Fatalf("sessionless release: %v %+v, want input_required asking for approval", err, res)
	}
	id = pausedID(t, origin, "Name release 2")
	resp, err = http.Post(origin+"/api/executions/"+id+"/resume", "application/json", strings.NewReader(`{"action":"accept","content":{"name":"Borealis"}}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept the sessionless question: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	res, err = modern.CallTool(t.Context(), &mcp.CallToolParams{Name: "release", Arguments: map[string]any{}, RequestState: res.RequestState})
	if err != nil || res.IsError || mcpclient.Text(res) != "2 true anonymous Borealis" {
		t.Fatalf("sessionless retry: %v %q, want %q", err, mcpclient.Text(res), "2 true anonymous Borealis")
	}
	if n := releases.Load(); n != 2 {
		t.Fatalf("the step ran %d times, want 2 (once per call)", n)
	}
}

// pausedID polls the approval API until a pause with message want is
// listed and returns its id.
func pausedID(t *testing.T, origin, want string) string {
	t.Helper()
	return awaitListed(t, origin, "", want)
}

// listedExecution is an execution the approval API lists.
type listedExecution struct {
	ID      string `json:"executionId"`
	Message string `json:"message"`
}

// executions is what GET /api/executions lists to the bearer of token
// ("": no Authorization, a --no-auth node).
func executions(origin, token string) ([]listedExecution, error) {
	req, err := http.NewRequest(http.MethodGet, origin+"/api/executions", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/executions: %s", resp.Status)
	}
	var list struct {
		Executions []listedExecution `json:"executions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Executions, nil
}

// awaitListed polls the approval API as the bearer of token ("": none)
// until it lists a pause with message want, and returns its id.
func awaitListed(t *testing.T, origin, token, want string) string {
	t.Helper()
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		list, err := executions(origin, token)
		for _, e := range list {
			if e.Message == want {
				return e.ID
			}
		}
		last = err
	}
	t.Fatalf("no pause %q listed within 60s (last error: %v)", want, last)
	return ""
}

// Outside a tool call of a session, Ask and Step say so.
func TestAskAndStepNeedAToolCallOfASession(t *testing.T) {
	req := &mcp.CallToolRequest{}
	if _, err := mcpgrain.Ask(context.Background(), req, mcpgrain.Question{Summary: "?"}); !errors.Is(err, mcpgrain.ErrNoCall) {
		t.Fatalf("Ask: %v", err)
	}
	ran := false
	_, err := mcpgrain.Step(context.Background(), req, "s", func(context.Context) (int, error) { ran = true; return 1, nil })
	if !errors.Is(err, mcpgrain.ErrNoCall) || ran {
		t.Fatalf("Step: %v (ran %v), want ErrNoCall without running", err, ran)
	}
	if _, err := mcpgrain.Ask(context.Background(), nil, mcpgrain.Question{Summary: "?"}); err == nil {
		t.Fatal("Ask without a request: no error")
	}
}

// counted is a tool whose step counts its runs per call argument.
var counted atomic.Int32

func countedTool(ctx context.Context, req *mcp.CallToolRequest, args struct {
	N int `json:"n"`
}) (*mcp.CallToolResult, any, error) {
	v, err := mcpgrain.Step(ctx, req, "count", func(context.Context) (int32, error) { return counted.Add(1), nil })
	if err != nil {
		return nil, nil, err
	}
	d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{Summary: fmt.Sprintf("Count %d", args.N)})
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d %v", v, d.Accepted)}}}, nil, nil
}

// The same call again (same session, tool and arguments) while the first
// run waits for its decision takes the call over: the first run ends with
// a retryable error, the second waits for the same pause and gets the
// decision; the step ran once. Once completed, the same arguments are a
// new call; a client that gives up on it leaves it open, its question
// listed.
func TestASecondRunOfAnOpenCallTakesItOver(t *testing.T) {
	origin := runNode(t, mcpgrain.Server{Name: "cnt", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "counted"}, countedTool)
	}})
	c := mcp.NewClient(&mcp.Implementation{Name: "ask-test"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(ctx context.Context) chan *mcp.CallToolResult {
		out := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counted", Arguments: map[string]any{"n": 7}})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			out <- res
		}()
		return out
	}
	first := call(t.Context())
	id := pausedID(t, origin, "Count 7")
	second := call(t.Context())
	if res := <-first; !res.IsError || !strings.Contains(mcpclient.Text(res), "took over") {
		t.Fatalf("the first run: %+v %q, want the take-over error", res, mcpclient.Text(res))
	}
	resp, err := http.Post(origin+"/api/executions/"+id+"/resume", "application/json", strings.NewReader(`{"action":"accept"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	if res := <-second; res.IsError || mcpclient.Text(res) != "1 true" {
		t.Fatalf("the second run: %q, want %q", mcpclient.Text(res), "1 true")
	}
	ctx, cancel := context.WithCancel(t.Context())
	third := call(ctx)
	if next := pausedID(t, origin, "Count 7"); next == id {
		t.Fatal("the completed call's pause was reused")
	}
	if n := counted.Load(); n != 2 {
		t.Fatalf("the step ran %d times, want 2 (once per call)", n)
	}
	// The client gives up on the call: the handler's wait ends.
	cancel()
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not end")
	}
	// The call stays open, its question listed, for the client's retry.
	if n := pausedCount(t, origin); n != 1 {
		t.Fatalf("%d pauses listed after the client gave up, want 1", n)
	}
}

// pausedCount is how many pauses the approval API lists.
func pausedCount(t *testing.T, origin string) int {
	t.Helper()
	list, err := executions(origin, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}
