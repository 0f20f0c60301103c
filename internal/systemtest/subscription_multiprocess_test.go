package systemtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// A resource subscription survives the SIGKILL of the node that owns the
// session: a survivor restores the session, replays its subscribe (the
// session record keeps it beside the handshake), and the watched
// resource's updates reach the client again on its standalone stream,
// without the client subscribing again. Before, the restored session had
// no subscription and the updates stopped.
func TestSubscriptionSurvivesOwnerKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: 2 * time.Second, ExtraArgs: []string{"--tools", "demo,conformance"}})
	var updates atomic.Int64
	cs := connectOwnedBy(t, c, 0, 1, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updates.Add(1) },
	})
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	waitUpdates := func(what string, above int64) int64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // updates come every 2 s
		for updates.Load() <= above {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no resource update within 30s (%d so far)", what, updates.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return updates.Load()
	}
	before := waitUpdates("on the owner", 0)
	c.Kill(1)
	c.WaitMembersOn([]int{0}, 2, 15*time.Second)
	start := time.Now()
	echo(t, cs, "after the owner was killed") // a survivor restores the session
	// Updates the killed node sent may still arrive; count from now.
	after := waitUpdates("after the owner was killed", updates.Load())
	t.Logf("%d updates from the owner, then updates again %s after the restoring call (%d)", before, time.Since(start).Round(time.Millisecond), after)
}
