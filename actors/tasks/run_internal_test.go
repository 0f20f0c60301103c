package tasks

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A node that stops while a task's first run builds the runner's server
// stops that server, and a run after the stop builds nothing (the build
// and the stop raced: seen by the race detector in a gateway test whose
// node stopped as its task started).
func TestRunnerClosedAroundItsFirstRun(t *testing.T) {
	var built, stopped atomic.Int32
	r := &runner{newServer: func() (*mcp.Server, func(), error) {
		built.Add(1)
		return mcp.NewServer(&mcp.Implementation{Name: "t"}, nil), func() { stopped.Add(1) }, nil
	}}
	done := make(chan outcome, 1)
	go func() { done <- r.run(context.Background(), nil, "task-1", []byte(`{"name":"none"}`), nil, "") }()
	r.close()
	<-done
	if b, s := built.Load(), stopped.Load(); b != s || b > 1 {
		t.Fatalf("servers built %d, stopped %d: want each one built stopped", b, s)
	}
	out := r.run(context.Background(), nil, "task-2", []byte(`{"name":"none"}`), nil, "")
	if out.err == nil || built.Load() > 1 {
		t.Fatalf("a run after close: %+v (servers built %d)", out, built.Load())
	}
}
