package systemtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool reports progress during a call: every notification reaches the
// calling client's stream.
func TestProgressNotificationsReachTheCallersStream(t *testing.T) {
	addr := startNode(t, nil)
	var progress atomic.Int32
	cs := connect(t, addr, aliceToken, "2025-11-25", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	p := &mcp.CallToolParams{Name: "count_to", Arguments: map[string]any{"n": 3}}
	p.SetProgressToken("tok")
	res, err := cs.CallTool(t.Context(), p)
	if err != nil || res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
	// go-sdk's client hands notifications to their handler asynchronously,
	// so the call can return before the handler ran.
	awaitCount(t, "progress notifications", &progress, 3)
}

func awaitCount(t *testing.T, what string, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s, want %d", n.Load(), what, want)
		}
		time.Sleep(time.Millisecond)
	}
	if got := n.Load(); got != want {
		t.Fatalf("%d %s, want %d", got, what, want)
	}
}
