package session_test

import (
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/session"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// An in-band decision (the pause's own client's answer) is taken only for
// a pause the runtime lets its client decide: a runtime that lets none
// (here one without session.InBandPauses) gets FORBIDDEN with
// InBandClosedText, even from the session's own admin, and nothing is
// handed over or recorded; the same decision from an approval surface
// then decides.
func TestAnInBandDecisionNeedsAPauseTheClientMayDecide(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	rt := e.durablePause("s1", "exec-1")
	r := e.do("s1", &pb.ExecutionDecide{Principal: alice, ExecutionId: "exec-1", Action: "accept", InBand: true}).(*pb.ExecutionReply)
	if r.GetStatus() != pb.ExecutionReply_STATUS_FORBIDDEN || r.GetText() != session.InBandClosedText {
		t.Fatalf("in-band decide: %v %q, want FORBIDDEN %q", r.GetStatus(), r.GetText(), session.InBandClosedText)
	}
	rt.mu.Lock()
	handed := rt.resolved["exec-1"]
	rt.mu.Unlock()
	if handed != nil {
		t.Fatalf("a refused in-band decision was handed over: %v", handed)
	}
	r = e.do("s1", &pb.ExecutionDecide{Principal: alice, ExecutionId: "exec-1", Action: "accept"}).(*pb.ExecutionReply)
	if r.GetStatus() != pb.ExecutionReply_STATUS_OK {
		t.Fatalf("the surface's decide after the refused in-band one: %v", r.GetStatus())
	}
	e.settleThenEvictable(rt, "s1", "exec-1")
}
