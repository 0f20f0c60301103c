package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// aliceViewerToken is alice's key with the viewer role (the test adds it).
const aliceViewerToken = "mcpg_alicev_token_0123456789"

// Code mode's resume from another session travels as the SDK's
// continuation (docs/sdk.md §6, "One pause path"): an AskContinue to the
// owning session grain, which restores a passivated owner and its pause by
// replay, as a ContinueAsk does. Before, the forward (a private message)
// found no runtime at a passivated owner and the pause, still waiting in
// the inbox, answered execution_expired. Another user (a member, a
// viewer) is refused, another organization does not find it, alice's own
// viewer key may not decide it, and none of them ran the write; alice's
// member key from a second session completes it, once, counted as a
// forwarded resume.
func TestCrossSessionResumeRestoresAPassivatedOwner(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.NodeID = "rc1"
		c.MCP.SoftCap = 1
		k, err := c.MCP.Keys.Merge(mustKeys(t, veraToken, "vera", "acme", "viewer"))
		if err == nil {
			k, err = k.Merge(mustKeys(t, aliceViewerToken, "alice", "acme", "viewer"))
		}
		if err != nil {
			t.Fatal(err)
		}
		c.MCP.Keys = k
	})
	p := metricsProbe{t, info.HTTPAddr}
	owner := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, owner, "waiting_for_interaction")
	recycled := connectMode(t, info.HTTPAddr, aliceToken, "") // over the cap: the owner passivates
	p.waitFor("owner passivated", "mcpgrain_runtime_disposals_total", map[string]string{"node": "rc1", "reason": "cap"}, atLeast(1))

	hostile := []struct{ who, token, status string }{
		{"bob (a member of acme)", bobToken, "execution_forbidden"},
		{"vera (a viewer of acme)", veraToken, "insufficient_role"},
		{"alice's viewer key", aliceViewerToken, "insufficient_role"},
		{"carol (globex)", carolToken, "execution_not_found"},
	}
	for _, h := range hostile {
		cs := connectMode(t, info.HTTPAddr, h.token, "")
		res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
		if !res.IsError || sc["status"] != h.status {
			t.Fatalf("%s: %s / %v, want %s", h.who, mcpclient.Text(res), sc, h.status)
		}
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("a refused resume ran the write: %d todos", n)
	}

	res, sc := callTool(t, recycled, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" || !strings.Contains(fmt.Sprint(sc["result"]), "ship it") {
		t.Fatalf("resume from another session of a passivated owner: %s / %v", mcpclient.Text(res), sc)
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 {
		t.Fatalf("todos %v, want the one write", got)
	}
	p.waitFor("forward", "mcpgrain_resume_forwards_total", map[string]string{"node": "rc1", "outcome": "ok"}, exactly(1))
	if _, err := owner.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("the owner after the resume: %v", err)
	}
}
