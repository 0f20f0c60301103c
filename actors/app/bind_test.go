package app

import (
	"context"
	"testing"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A context bound to handles finds its binding under later values and
// passes every other value, and cancellation, through.
func TestWithHandlesIsAContext(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "outer"))
	p := &pb.Principal{User: "alice"}
	var h Handles
	ctx := WithHandles(parent, h, p)
	if _, _, err := handlesOf(ctx); err == nil {
		t.Fatal("a nil service is no binding")
	}
	child, stop := context.WithCancel(context.WithValue(ctx, stepKey{}, "inner"))
	defer stop()
	b, ok := child.Value(handlesKey{}).(*handlesCtx)
	if !ok || b.p != p || child.Value(key{}) != "outer" {
		t.Fatalf("binding %v, outer value %v", b, child.Value(key{}))
	}
	cancel()
	<-child.Done()
	if child.Err() != context.Canceled {
		t.Fatalf("child %v after its parent's cancel", child.Err())
	}
}

// maxWithHandlesAllocs bounds the objects of binding a request to
// handles: the context, with the binding in it. 2 before (a value
// context and the binding boxed).
const maxWithHandlesAllocs = 1

func TestWithHandlesAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector changes allocation counts")
	}
	ctx, p := context.Background(), &pb.Principal{User: "alice"}
	var h Handles
	allocs := testing.AllocsPerRun(100, func() { ctx = WithHandles(context.Background(), h, p) })
	t.Logf("%.1f allocations a binding", allocs)
	if allocs > maxWithHandlesAllocs {
		t.Fatalf("%.1f allocations a binding, want ≤ %d", allocs, maxWithHandlesAllocs)
	}
	_ = ctx
}
