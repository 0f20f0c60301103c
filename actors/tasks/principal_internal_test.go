package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A round runs as the task's owner (user and organization) with the
// authority of whoever gave its input: the creator's role for a round
// without stored responses, the responder's role for one that carries
// them — and no role (which decides nothing) when a row of an earlier
// version recorded none.
func TestRoundPrincipal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		task     taskstore.Task
		wantRole string
	}{
		{"first round: the creator's role", taskstore.Task{Role: "viewer"}, "viewer"},
		{"a decision's round: the decider's role", taskstore.Task{Role: "viewer", InputResponses: `{"approval":{}}`, ResponderRole: "admin"}, "admin"},
		{"the creator's own decision", taskstore.Task{Role: "member", InputResponses: `{"approval":{}}`, ResponderRole: "member"}, "member"},
		{"responses without a recorded role", taskstore.Task{Role: "admin", InputResponses: `{"approval":{}}`}, ""},
		{"a row of an earlier version", taskstore.Task{}, ""},
	} {
		tc.task.User, tc.task.Org = "vic", "acme"
		p := roundPrincipal(tc.task)
		if p.GetRole() != tc.wantRole || p.GetUser() != "vic" || p.GetOrg() != "acme" {
			t.Errorf("%s: %v, want vic of acme with role %q", tc.name, p, tc.wantRole)
		}
	}
}

// asker is a read-only tool (safe to re-run after a node loss) that asks
// for an approval, then, given one, records the role of the principal its
// round runs as and waits for release.
type asker struct {
	roles   chan string
	release chan struct{}
}

func (a *asker) server(*mcp.ServerOptions, func(*mcp.Server)) (*mcp.Server, func(), error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "principal-test", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			a.roles <- exchange.PrincipalOf(req.Extra.Header).GetRole()
			if len(req.Params.InputResponses) == 0 {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"approval": &mcp.ElicitParams{Message: "go on?",
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)}}, RequestState: "s1"}, nil, nil
			}
			select {
			case <-a.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	return srv, func() {}, nil
}

// The principal travels whole: a viewer's task runs its first round as the
// viewer; the round that carries an admin's decision runs as the admin
// (who decided), and so does its re-run on a new activation after the
// node running it was lost — the decider's role is in the task's row.
func TestARoundRunsWithTheRoleOfWhoeverGaveItsInputAfterANodeLossToo(t *testing.T) {
	st, system := storeAndSystem(t)
	tool := &asker{roles: make(chan string, 8), release: make(chan struct{})}
	t.Cleanup(func() { close(tool.release) })
	h, err := NewHost(Config{NewServer: tool.server, Store: taskstore.New(st), Cluster: noCluster, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ctx := context.Background()

	g := activate(t, st, system, "t1", "n1")
	a := &taskGrain{h: h, id: "t1"}
	if err := a.Activate(ctx, g, nil); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]any{"name": "ask", "arguments": map[string]any{}})
	if _, err := a.start(ctx, g, &pb.TaskStart{Params: params, Principal: &pb.Principal{User: "vic", Org: "acme", Role: "viewer"}}); err != nil {
		t.Fatal(err)
	}
	if role := <-tool.roles; role != "viewer" {
		t.Fatalf("first round ran with role %q, want the creator's (viewer)", role)
	}
	a.HandleLocal(ctx, g, <-g.done)
	if a.task.Status != string(InputRequired) {
		t.Fatalf("after the first round: %s, want input_required", a.task.Status)
	}
	if _, err := a.respond(ctx, g, map[string]json.RawMessage{"approval": json.RawMessage(`{"action":"accept","content":{}}`)}, "admin"); err != nil {
		t.Fatal(err)
	}
	if role := <-tool.roles; role != "admin" {
		t.Fatalf("the decision's round ran with role %q, want the decider's (admin)", role)
	}

	// The node is lost while that round runs (it never reports back): the
	// grain's next activation finds the work lost and runs it again.
	ng := activate(t, st, system, "t1", "n2")
	b := &taskGrain{h: h, id: "t1"}
	if err := b.Activate(ctx, ng, nil); err != nil {
		t.Fatal(err)
	}
	b.recover(ctx, ng)
	if role := <-tool.roles; role != "admin" {
		t.Fatalf("the re-run after the loss ran with role %q, want the decider's (admin)", role)
	}
	if got, _ := taskstore.New(st).GetTask(ctx, "t1", time.Now()); got.Role != "viewer" || got.ResponderRole != "admin" || got.User != "vic" {
		t.Fatalf("stored: %+v, want vic's task (viewer) with the admin's responses", got)
	}
}
