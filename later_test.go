package mcpgrain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// laterTools are a server's tools over AskLater, AwaitAsk and AskStatus:
// ask_later answers "ID URL", await and status answer "state accepted by"
// or the error.
func laterTools(s *mcp.Server) {
	type idArgs struct {
		ID string `json:"id"`
	}
	answer := func(st mcpgrain.PendingStatus, err error) (*mcp.CallToolResult, any, error) {
		if err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("%s %v %s", st.State, st.Decision.Accepted, st.Decision.By)), nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ask_later"}, func(ctx context.Context, req *mcp.CallToolRequest, args struct {
		Summary string `json:"summary"`
	}) (*mcp.CallToolResult, any, error) {
		p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{Summary: args.Summary})
		if err != nil {
			return nil, nil, err
		}
		return textResult(p.ID + " " + p.URL), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "later_then_ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{Summary: "Later"})
		if err != nil {
			return nil, nil, err
		}
		d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{Summary: "Now"})
		if err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("%s %v", p.ID, d.Accepted)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "await"}, func(ctx context.Context, req *mcp.CallToolRequest, args idArgs) (*mcp.CallToolResult, any, error) {
		return answer(mcpgrain.AwaitAsk(ctx, req, args.ID))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "status"}, func(ctx context.Context, req *mcp.CallToolRequest, args idArgs) (*mcp.CallToolResult, any, error) {
		return answer(mcpgrain.AskStatus(ctx, req, args.ID))
	})
}

// callText calls tool with args and returns its text (an error result's
// text too).
func callText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return mcpclient.Text(res)
}

// AwaitAsk holds a call of the session that asked until the decision
// comes; in another session of the same user an undecided question is
// ErrAwaitElsewhere and a decided one's status is returned; an unknown id
// is ErrUnknownAsk.
func TestAwaitAskWaitsInTheSessionThatAsked(t *testing.T) {
	origin := runNode(t, mcpgrain.Server{Name: "later", Register: laterTools})
	connect := func() *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "later-test"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	cs, other := connect(), connect()
	id, url, _ := strings.Cut(callText(t, cs, "ask_later", map[string]any{"summary": "Await me"}), " ")
	if url != origin+"/approve/"+id {
		t.Fatalf("approval URL %q, want %q", url, origin+"/approve/"+id)
	}
	if got := callText(t, other, "await", map[string]any{"id": id}); !strings.Contains(got, mcpgrain.ErrAwaitElsewhere.Error()) {
		t.Fatalf("await in another session: %q, want ErrAwaitElsewhere", got)
	}
	if got := callText(t, cs, "status", map[string]any{"id": "exec_unknown"}); !strings.Contains(got, mcpgrain.ErrUnknownAsk.Error()) {
		t.Fatalf("status of an unknown id: %q, want ErrUnknownAsk", got)
	}
	got := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "await", Arguments: map[string]any{"id": id}})
		if err != nil {
			got <- err.Error()
			return
		}
		got <- mcpclient.Text(res)
	}()
	if pausedID(t, origin, "Await me") != id {
		t.Fatal("another question is listed")
	}
	resp, err := http.Post(origin+"/api/executions/"+id+"/resume", "application/json", strings.NewReader(`{"action":"accept"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	if g := <-got; g != "decided true anonymous" {
		t.Fatalf("await: %q, want %q", g, "decided true anonymous")
	}
	if g := callText(t, other, "await", map[string]any{"id": id}); g != "decided true anonymous" {
		t.Fatalf("await of a decided question in another session: %q", g)
	}

}

// Outside a tool call of a session, AskLater, AskStatus and AwaitAsk say
// so.
func TestAskLaterNeedsAToolCallOfASession(t *testing.T) {
	req := &mcp.CallToolRequest{}
	if _, err := mcpgrain.AskLater(context.Background(), req, mcpgrain.Question{Summary: "?"}); !errors.Is(err, mcpgrain.ErrNoSessionCall) || !errors.Is(err, mcpgrain.ErrNoCall) {
		t.Fatalf("AskLater: %v", err)
	}
	if _, err := mcpgrain.AskStatus(context.Background(), req, "exec_x"); !errors.Is(err, mcpgrain.ErrNoSessionCall) {
		t.Fatalf("AskStatus: %v", err)
	}
	if _, err := mcpgrain.AwaitAsk(context.Background(), nil, "exec_x"); err == nil {
		t.Fatal("AwaitAsk without a request: no error")
	}
}

// A call interrupted after AskLater (here while it then waits in Ask) is
// run again by the client's retry: AskLater returns the same question
// (journaled as a step) instead of asking a second one.
func TestARetriedCallAsksLaterOnce(t *testing.T) {
	origin := runNode(t, mcpgrain.Server{Name: "later", Register: laterTools})
	c := mcp.NewClient(&mcp.Implementation{Name: "later-test"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: origin + "/mcp", DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "later_then_ask", Arguments: map[string]any{}})
		first <- err
	}()
	later, now := pausedID(t, origin, "Later"), pausedID(t, origin, "Now")
	cancel() // the client gives up: the call stays open for its retry
	<-first
	// The cancellation reaches the server on its own time: a decision
	// taken before the server saw it would wake the run, which completes
	// the call with an answer written to a request the client left (the
	// MCP cancellation race: the client ignores it). The call is
	// interrupted once the run no longer waits for "Now": both questions
	// are then durable pauses of the session.
	untilNoneWaits(t, origin, cs.ID(), 2)
	got := make(chan string, 1)
	go func() { got <- callText(t, cs, "later_then_ask", map[string]any{}) }()
	resp, err := http.Post(origin+"/api/executions/"+now+"/resume", "application/json", strings.NewReader(`{"action":"accept"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("accept: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	if g := <-got; g != later+" true" {
		t.Fatalf("the retry: %q, want the first run's pending question %s", g, later)
	}
	n := 0
	for _, e := range listed(t, origin) {
		if e == "Later" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d pending questions listed, want 1", n)
	}
}

// untilNoneWaits waits until the inspection of session id shows no run
// waiting in memory for a decision and durable paused executions.
func untilNoneWaits(t *testing.T, origin, id string, durable int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	var last string
	for {
		resp, err := http.Get(origin + "/api/inspect/sessions/" + id)
		if err == nil {
			var s struct {
				Paused        int `json:"pausedExecutions"`
				DurablePaused int `json:"durablePausedExecutions"`
			}
			err = json.NewDecoder(resp.Body).Decode(&s)
			_ = resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK && s.Paused == 0 && s.DurablePaused == durable {
				return
			}
			last = fmt.Sprintf("%d: %+v %v", resp.StatusCode, s, err)
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("session %s: still a run waiting for a decision after 60s (%s)", id, last)
		}
	}
}

// listed is the messages of the pauses the approval API lists.
func listed(t *testing.T, origin string) []string {
	t.Helper()
	list, err := executions(origin, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		out = append(out, e.Message)
	}
	return out
}
