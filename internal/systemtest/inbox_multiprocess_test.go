package systemtest

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// TestApprovalsInboxAcrossNodes: on three node processes sharing one
// store, a pause whose session lives on node 1 appears live in the inbox
// served by node 0 and in the one served by node 2; approved in node 0's,
// the call runs on node 1, and node 2's browser sees the decision arrive;
// when node 2 restarts, its page reconnects and goes on updating.
func TestApprovalsInboxAcrossNodes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "code", "--demo-api", "--keys-file", testcluster.KeysFile(t)}})
	owner := connectOwnedByAs(t, c, 0, 1, aliceToken, nil)
	ctx := browser(t)
	alice := inboxTab(t, ctx, c.Node(0).HTTP, aliceToken, true)
	bob := inboxTab(t, ctx, c.Node(2).HTTP, bobToken, true)
	for _, tab := range []context.Context{alice, bob} {
		browse(t, tab, chromedp.WaitVisible(chromedp.CSS("#empty")))
		markPage(t, tab)
	}

	id := pause(t, owner, "waiting_for_interaction")
	browse(t, bob, chromedp.WaitVisible(chromedp.CSS(entry(id))))
	browse(t, alice, chromedp.WaitVisible(chromedp.CSS(entry(id)+" button.approve")),
		chromedp.Click(chromedp.CSS(entry(id)+" button.approve")), chromedp.WaitVisible(chromedp.CSS(decision(id))))
	browse(t, bob, chromedp.WaitNotPresent(chromedp.CSS(entry(id))), chromedp.WaitVisible(chromedp.CSS(decision(id))))
	if who, what := text(t, bob, decision(id)+" .who"), text(t, bob, decision(id)+" .what"); who != "alice" || what != "accepted" {
		t.Fatalf("node 2's history: %q %q, want alice accepted", who, what)
	}
	if !pageMarked(t, bob) {
		t.Fatal("node 2's inbox reloaded: the pause and the decision should arrive live")
	}
	if res, sc := callTool(t, owner, "resume", map[string]any{"executionId": id}); res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, c.Node(1).HTTP, aliceToken)); n != 1 {
		t.Fatalf("owner's todos: %d, want 1", n)
	}

	// Node 2 dies and comes back: its page reconnects its stream by itself
	// and shows the next pause, still without a reload.
	c.Restart(2)
	next := pause(t, owner, "waiting_for_interaction")
	browse(t, bob, chromedp.WaitVisible(chromedp.CSS(entry(next))))
	if !pageMarked(t, bob) {
		t.Fatal("node 2's inbox reloaded: it should reconnect its stream")
	}
}
