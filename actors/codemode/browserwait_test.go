package codemode_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
)

// deadlineRuntime is the tests' runtime with WaitDecision's deadline and
// the time it was asked recorded.
type deadlineRuntime struct {
	*testRuntime
	mu       sync.Mutex
	asked    time.Time
	deadline time.Time
	bounded  bool
}

func (r *deadlineRuntime) WaitDecision(ctx context.Context, execID string, a engine.Access) (engine.Response, bool) {
	r.mu.Lock()
	r.asked = time.Now()
	r.deadline, r.bounded = ctx.Deadline()
	r.mu.Unlock()
	return r.testRuntime.WaitDecision(ctx, execID, a)
}

// A browser-mode resume waits for the user's decision at most the approval
// window and a second (executor's wait bound, issue 27 edge): with no
// decision, it ends then with user_approval_required (the pause still
// live), instead of holding the call — and the session's handler — open.
func TestBrowserModeWaitIsBoundedByTheWindowAndASecond(t *testing.T) {
	const window = 100 * time.Millisecond
	h := newHarness(t, harnessOptions{window: window})
	rt := &deadlineRuntime{testRuntime: h.rt}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "codemode-test", Version: "v0.0.0"}, nil)
	codemode.Register(h.server, codemode.Options{Runtime: rt, Window: window})
	cs := h.connect(t, clientOptions{mode: "browser"})
	id := pauseBrowser(t, cs, orderTea)

	began := time.Now()
	res, sc := call(t, cs, "resume", map[string]any{"executionId": id}) // no decision is queued
	took := time.Since(began)
	if res.IsError || sc["status"] != "user_approval_required" || sc["executionId"] != id {
		t.Fatalf("resume without a decision: %s / %v, want user_approval_required", text(res), sc)
	}
	rt.mu.Lock()
	asked, deadline, bounded := rt.asked, rt.deadline, rt.bounded
	rt.mu.Unlock()
	bound := window + time.Second
	if !bounded || deadline.Before(began.Add(bound)) || deadline.After(asked.Add(bound)) {
		t.Fatalf("WaitDecision's deadline %v (bounded %v), want the window and a second (%s) after the resume (%v–%v)",
			deadline, bounded, bound, began, asked)
	}
	if took < bound {
		t.Fatalf("the resume returned after %s, before its wait bound %s", took, bound)
	}
	t.Logf("the wait ended after %s (bound %s)", took, bound)
}
