package systemtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// A client that recycles its MCP session resumes from a new session owned
// by another node: the resume is forwarded to the owner, with the caller's
// identity checked there, on three real nodes behind one gateway.
func TestCrossSessionResumeIsForwardedToTheOwnerNode(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "code", "--demo-api", "--keys-file", testcluster.KeysFile(t)}})
	owner := connectOwnedByAs(t, c, 0, 1, aliceToken, nil)
	id := pause(t, owner, "waiting_for_interaction")
	recycled := connectOwnedByAs(t, c, 0, 2, aliceToken, nil)
	other := connectOwnedByAs(t, c, 0, 2, bobToken, nil)

	res, sc := callTool(t, other, "resume", map[string]any{"executionId": id, "action": "accept"})
	if !res.IsError || sc["status"] != "execution_forbidden" || !strings.Contains(mcpclient.Text(res), "same account and organization") {
		t.Fatalf("another principal: %s / %v", mcpclient.Text(res), sc)
	}
	// Another organization learns nothing: the id is "not found", as an
	// unknown one, also when the owner is asked across nodes.
	stranger := connectOwnedByAs(t, c, 0, 2, carolToken, nil)
	res, sc = callTool(t, stranger, "resume", map[string]any{"executionId": id, "action": "accept"})
	if !res.IsError || sc["status"] != "execution_not_found" {
		t.Fatalf("another organization: %s / %v", mcpclient.Text(res), sc)
	}
	if n := len(todos(t, c.Node(1).HTTP, aliceToken)); n != 0 {
		t.Fatalf("forbidden resume ran the call: %d todos", n)
	}

	res, sc = callTool(t, recycled, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("forwarded resume: %s / %v", mcpclient.Text(res), sc)
	}
	first := fmt.Sprint(sc["result"])
	if !strings.Contains(first, "ship it") {
		t.Fatalf("result %v", sc["result"])
	}
	// The call ran once, on the owner's node.
	if got := todos(t, c.Node(1).HTTP, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("owner's todos %v", got)
	}
	// Again, from either session: the owner replays the same result.
	for name, s := range map[string]*mcp.ClientSession{"recycled": recycled, "owner": owner} {
		res, sc = callTool(t, s, "resume", map[string]any{"executionId": id, "action": "accept"})
		if res.IsError || fmt.Sprint(sc["result"]) != first {
			t.Fatalf("second resume from the %s session: %s", name, mcpclient.Text(res))
		}
	}
	if n := len(todos(t, c.Node(1).HTTP, aliceToken)); n != 1 {
		t.Fatalf("replays ran the call again: %d todos", n)
	}
	res, sc = callTool(t, recycled, "resume", map[string]any{"executionId": "exec_00000000000000000000000000000000", "action": "accept"})
	if !res.IsError || sc["status"] != "execution_not_found" || sc["recovery"] != "re_execute" {
		t.Fatalf("unknown id: %s / %v", mcpclient.Text(res), sc)
	}
}
