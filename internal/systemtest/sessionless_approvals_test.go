package systemtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Issue 23, finding 8: a 2026-07-28 (sessionless) pause appeared on no
// approval surface, so only the client could answer it — and a viewer's
// client, whose own answer is refused, could have its execution decided
// by no one. Such a pause is now in the execution directory like a
// session's or a task's: every surface lists and shows it to the owner's
// organization and lets a role that may decide decide it, in the
// continuation grain that holds it; the client's retry then gets what the
// execution came to, whatever the retry answers, and the write runs once.

// sessionlessPause runs createCode from token's 2026-07-28 client (no
// automatic retry) to its pause, and returns the client, the retry that
// would answer it with action, and the execution id.
func sessionlessPause(t *testing.T, addr, token, action string) (*mcp.ClientSession, *mcp.CallToolParams, string) {
	t.Helper()
	cs := mrtrClient(t, addr, token)
	args := map[string]any{"code": createCode}
	first, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("execute did not pause: %+v %v", first, err)
	}
	claims, err := requeststate.Verify(testStateKey, first.RequestState, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cs, &mcp.CallToolParams{Name: "execute", Arguments: args, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: action, Content: map[string]any{}}}}, claims.Inner
}

// A sessionless client's pause appears on the approval surfaces of its
// organization (not of another one), and can be decided there like a
// session's.
func TestSessionlessPausesAreOnTheApprovalSurfaces(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		k, err := c.MCP.Keys.Merge(mustKeys(t, veraToken, "vera", "acme", "viewer"))
		if err != nil {
			t.Fatal(err)
		}
		c.MCP.Keys = k
	})
	base := "http://" + info.HTTPAddr
	alice, aliceDeclines, id := sessionlessPause(t, info.HTTPAddr, aliceToken, "decline")

	// Listed and shown to the organization, not to another one.
	listed := func(token string) []any {
		t.Helper()
		r := api(t, "GET", base+"/api/executions", token, "")
		if r.status != 200 {
			t.Fatalf("list: %d %v", r.status, r.body)
		}
		l, _ := r.body["executions"].([]any)
		return l
	}
	l := listed(bobToken)
	if len(l) != 1 {
		t.Fatalf("bob's list: %v, want alice's sessionless pause", l)
	}
	row, _ := l[0].(map[string]any)
	if row["executionId"] != id || row["tool"] != "demo.createTodo" || !strings.HasPrefix(fmt.Sprint(row["sessionId"]), "c-") {
		t.Fatalf("listed %v, want %s of a continuation grain", row, id)
	}
	if r := api(t, "GET", base+"/api/executions/"+id, veraToken, ""); r.status != 200 {
		t.Fatalf("viewer's show: %d %v", r.status, r.body)
	}
	if got, err := approvalClient(t, info.GRPCAddr).GetPausedExecution(withToken(t, bobToken), &pb.GetPausedExecutionRequest{ExecutionId: id}); err != nil || got.GetExecution().GetAddress() != "demo.createTodo" {
		t.Fatalf("gRPC show: %v %v", got, err)
	}
	if len(listed(carolToken)) != 0 {
		t.Fatal("another organization lists alice's sessionless pause")
	}
	for _, r := range []apiResponse{
		api(t, "GET", base+"/api/executions/"+id, carolToken, ""),
		api(t, "POST", base+"/api/executions/"+id+"/resume", carolToken, `{"action":"accept"}`),
	} {
		if r.status != 404 || r.body["error"] != "execution_not_found" {
			t.Fatalf("another organization: %d %v, want 404 execution_not_found", r.status, r.body)
		}
	}
	// A role that may not decide cannot, here either.
	if r := api(t, "POST", base+"/api/executions/"+id+"/resume", veraToken, `{"action":"accept"}`); r.status != 403 || r.body["error"] != "insufficient_role" {
		t.Fatalf("viewer's decision: %d %v, want 403 insufficient_role", r.status, r.body)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("refused decisions ran the write: %d to-dos", n)
	}

	// A member decides; the first decision wins.
	if r := api(t, "POST", base+"/api/executions/"+id+"/resume", bobToken, `{"action":"accept"}`); r.status != 200 || r.body["status"] != "accepted" {
		t.Fatalf("bob's decision: %d %v", r.status, r.body)
	}
	if r := api(t, "POST", base+"/api/executions/"+id+"/resume", aliceToken, `{"action":"decline"}`); r.status != 409 || r.body["error"] != "execution_already_decided" {
		t.Fatalf("second decision: %d %v, want 409", r.status, r.body)
	}
	// alice's client answers "decline" too late: its retry gets what bob's
	// decision made of the execution, as often as it retries.
	for i := range 2 {
		res, err := alice.CallTool(t.Context(), aliceDeclines)
		if err != nil || res.IsError || !strings.Contains(mcpclient.Text(res), "ship it") {
			t.Fatalf("alice's retry %d after bob's decision: %+v %v", i+1, res, err)
		}
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("%d to-dos, want exactly 1", n)
	}
	if r := api(t, "GET", base+"/api/executions/"+id, aliceToken, ""); r.status != 409 || len(listed(aliceToken)) != 0 {
		t.Fatalf("settled pause: %d %v, still listed %v", r.status, r.body, listed(aliceToken))
	}

	// A viewer's own sessionless execution: its client may not decide it
	// (insufficient_role, nothing decided); an approver does on a surface,
	// and the viewer's retry gets the outcome.
	vera, veraAccepts, vid := sessionlessPause(t, info.HTTPAddr, veraToken, "accept")
	res, err := vera.CallTool(t.Context(), veraAccepts)
	if err != nil || !res.IsError || structured(t, res)["status"] != "insufficient_role" {
		t.Fatalf("viewer's own answer: %+v %v, want insufficient_role", res, err)
	}
	if r := api(t, "POST", base+"/api/executions/"+vid+"/resume", aliceToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("alice decides vera's sessionless pause: %d %v", r.status, r.body)
	}
	res, err = vera.CallTool(t.Context(), veraAccepts)
	if err != nil || res.IsError || !strings.Contains(mcpclient.Text(res), "ship it") {
		t.Fatalf("viewer's retry after the approval: %+v %v", res, err)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 2 {
		t.Fatalf("%d to-dos, want 2", n)
	}
}
