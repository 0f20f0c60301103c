package gateway_test

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// The real-runtime counterpart of actors/session
// TestDecidedDurablePausePinsTheRuntimeUntilItSettles (chaos regression: a
// cap eviction between a decision and the resumed run left an
// acknowledged decision waiting for the session's next activation). The
// fake there never runs the execution; here a node runs real sessions and
// a real durable pause, and the window is held open for real: a's pause
// is hibernated (b's build evicts it; a durable pause does not pin), the
// node's only sandbox slot is taken by b's endless loop, and the accept
// restores a's pause dormant, so its replay waits for the slot — decided
// and unsettled. A third session then needs a resident slot: a must not
// be evicted (the node builds over the cap), and once the slot frees a's
// execution completes, its write sent exactly once.
func TestDecidedPauseWaitingForASlotPinsItsRuntime(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.NodeID = "pin1"
		c.MCP.SoftCap = 1
		c.MCP.Code.Pool.MaxRunning = 1
		// b's loop holds the slot this long: the steps below must fit in it
		// on two loaded cores under -race (about 1 s normally; with 12 s,
		// CI's parallel test step once ran past it: b's loop ended, and a's
		// restore evicted the idle b instead of building over the cap).
		c.MCP.Code.Limits.WallTime = 30 * time.Second
	})
	p := metricsProbe{t, info.HTTPAddr}
	node := map[string]string{"node": "pin1"}
	with := func(k, v string) map[string]string { return map[string]string{"node": "pin1", k: v} }

	a := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, a, "waiting_for_interaction")
	p.handshakesEnded(node, 1) // the execute's exchange too: a durable pause does not pin
	b := connectMode(t, info.HTTPAddr, carolToken, "")
	p.waitFor("a hibernated by b's build", "mcpgrain_runtime_disposals_total", with("reason", "cap"), exactly(1))
	// a's execution, cancelled with its runtime, holds the slot until its
	// worker has stopped it (unparked, so counted running): "the loop runs"
	// below must not read it. Else the accept ran while b, its execute not
	// arrived yet, was idle, evicted b instead of building over the cap,
	// and b's execute rebuilt it: a second cap disposal that is no
	// eviction of a.
	p.waitFor("a's execution parked no more", "mcpgrain_sandbox_workers", with("state", "parked"), exactly(0))
	p.waitFor("a's execution ended", "mcpgrain_sandbox_workers", with("state", "running"), exactly(0))

	// Another organization's endless loop takes the only slot until its
	// wall time ends it.
	looped := make(chan string, 1)
	go func() {
		res, err := b.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": `while (true) {}`}})
		if err != nil {
			looped <- err.Error()
			return
		}
		looped <- mcpclient.Text(res)
	}()
	p.waitFor("the loop runs", "mcpgrain_sandbox_workers", with("state", "running"), exactly(1))
	// b, the only resident runtime, is pinned by its running loop: a's
	// restore cannot evict it.
	p.waitFor("b pinned by its loop", "mcpgrain_resident_evictable", node, exactly(0))

	// Accepted: a is restored (over the cap: b is running) with its pause
	// dormant; the replay, which sends the approved write, waits for the slot.
	if r := api(t, "POST", "http://"+info.HTTPAddr+"/api/executions/"+id+"/resume", aliceToken, `{"action":"accept"}`); r.status != 200 {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	p.waitFor("a restored", "mcpgrain_resident_runtimes", node, exactly(2))
	// Both resident runtimes are pinned before c asks for a slot — b runs, a
	// holds a decided execution — or the decision did not pin a (this names
	// that, where "built over the cap" below would not).
	p.waitFor("a pinned by its decision", "mcpgrain_resident_evictable", node, exactly(0))
	overflows := p.get("mcpgrain_cap_overflow_total", node)

	// A third session needs a resident slot; a's decided execution pins it.
	c := connectMode(t, info.HTTPAddr, aliceToken, "")
	if _, err := c.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	p.waitFor("built over the cap", "mcpgrain_cap_overflow_total", node, exactly(overflows+1))
	if v := p.get("mcpgrain_runtime_disposals_total", with("reason", "cap")); v != 1 {
		t.Fatalf("%v cap disposals, want 1 (a's hibernation): a decided execution waiting to run was evicted; the node's residency:\n%s", v, p.residency())
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("%d todos while the only slot was taken: the replay did not wait", n)
	}

	select {
	case got := <-looped:
		t.Logf("the loop ended: %.100s", got)
	case <-time.After(60 * time.Second):
		t.Fatal("the loop never ended")
	}
	// The slot is free: a's execution completes in its runtime, its write
	// sent once.
	res, sc := callTool(t, a, "resume", map[string]any{"executionId": id})
	if sc["status"] != "completed" {
		t.Fatalf("a's execution: %s %v", mcpclient.Text(res), sc)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("%d todos, want the accepted write once", n)
	}
	if v := p.get("mcpgrain_runtime_disposals_total", with("reason", "cap")); v != 1 {
		t.Fatalf("%v cap disposals, want 1", v)
	}
}
