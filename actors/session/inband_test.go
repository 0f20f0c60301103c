package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/session"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// An in-band decision (the pause's own client's answer) is taken only for
// a pause the runtime lets its client decide: a pause the runtime does not
// let its client decide gets FORBIDDEN with
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

// An in-band decision is the session principal's own: another user of the
// organization, an admin whose role may decide, is refused (FORBIDDEN, not
// the closed pause's text) for a pause the client may decide, nothing is
// handed over or recorded, and the principal's own then decides it. (A
// caller's node refuses another user's DecideAsk before sending; this is
// the owner's own check, as for a resume from another session.)
func TestAnInBandDecisionIsTheSessionPrincipalsOnly(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	rt := e.durablePause("s1", "exec-1")
	rt.mu.Lock()
	rt.inBand = map[string]bool{"exec-1": true}
	rt.mu.Unlock()
	adminBob := &pb.Principal{User: "bob", Org: "acme", Role: "admin"}
	r := e.do("s1", &pb.ExecutionDecide{Principal: adminBob, ExecutionId: "exec-1", Action: "accept", InBand: true}).(*pb.ExecutionReply)
	if r.GetStatus() != pb.ExecutionReply_STATUS_FORBIDDEN || r.GetText() == session.InBandClosedText {
		t.Fatalf("another user's in-band decide: %v %q, want FORBIDDEN (not %q)", r.GetStatus(), r.GetText(), session.InBandClosedText)
	}
	rt.mu.Lock()
	handed := rt.resolved["exec-1"]
	rt.mu.Unlock()
	if handed != nil {
		t.Fatalf("another user's in-band decision was handed over: %v", handed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.node.Request(ctx, session.KindName, "s1", &pb.ExecutionDecide{Principal: alice, ExecutionId: "exec-1", Action: "maybe", InBand: true}); err == nil {
		t.Fatal("an in-band decision with an unknown action was taken")
	}
	rt.mu.Lock()
	handed = rt.resolved["exec-1"]
	rt.mu.Unlock()
	if handed != nil {
		t.Fatalf("an unknown action was handed over: %v", handed)
	}
	r = e.do("s1", &pb.ExecutionDecide{Principal: alice, ExecutionId: "exec-1", Action: "accept", InBand: true}).(*pb.ExecutionReply)
	if r.GetStatus() != pb.ExecutionReply_STATUS_OK {
		t.Fatalf("the principal's in-band decide: %v %q", r.GetStatus(), r.GetText())
	}
	e.settleThenEvictable(rt, "s1", "exec-1")
}

// ContinueAsk implements session.AskContinuer: it answers OK with the
// question's id as the result, and counts the continuations it got.
func (r *fakeRuntime) ContinueAsk(_ context.Context, m *pb.AskContinue, answer func(*pb.AskContinueReply)) {
	r.mu.Lock()
	if r.resolved == nil {
		r.resolved = map[string]*pb.ApprovalDecision{}
	}
	r.resolved["continued:"+m.GetExecutionId()] = &pb.ApprovalDecision{DecidedBy: m.GetPrincipal().GetUser()}
	r.mu.Unlock()
	go answer(&pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_OK, ResultJson: `"` + m.GetExecutionId() + `"`})
}

// A continuation (AskContinue) is the session principal's only: the
// grain answers another user of the organization FOREIGN and another
// organization UNKNOWN without handing anything to the runtime, runs the
// principal's (the reply deferred until the runtime answers), and an
// ended session is UNKNOWN.
func TestAContinuationIsTheSessionPrincipalsOnly(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	rt := e.rt("s1")
	ask := func(p *pb.Principal) *pb.AskContinueReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := e.node.Request(ctx, session.KindName, "s1", &pb.AskContinue{Principal: p, ExecutionId: "exec-1"})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*pb.AskContinueReply)
	}
	if r := ask(bob); r.GetOutcome() != pb.AskContinueReply_OUTCOME_FOREIGN {
		t.Fatalf("another user's continuation: %v, want FOREIGN", r.GetOutcome())
	}
	if r := ask(&pb.Principal{User: "alice", Org: "evil", Role: "admin"}); r.GetOutcome() != pb.AskContinueReply_OUTCOME_UNKNOWN {
		t.Fatalf("another organization's continuation: %v, want UNKNOWN", r.GetOutcome())
	}
	rt.mu.Lock()
	handed := len(rt.resolved)
	rt.mu.Unlock()
	if handed != 0 {
		t.Fatalf("a refused continuation reached the runtime (%d)", handed)
	}
	viewer := &pb.Principal{User: "alice", Org: "acme", Role: "viewer"} // the principal, whatever the key's role
	if r := ask(viewer); r.GetOutcome() != pb.AskContinueReply_OUTCOME_OK || r.GetResultJson() != `"exec-1"` {
		t.Fatalf("the principal's continuation: %v %s", r.GetOutcome(), r.GetResultJson())
	}
	if r := e.do("s1", &pb.SessionDelete{Principal: alice}).(*pb.SessionReply); r.GetStatus() != pb.SessionReply_STATUS_OK {
		t.Fatalf("delete: %v", r.GetStatus())
	}
	if r := ask(alice); r.GetOutcome() != pb.AskContinueReply_OUTCOME_UNKNOWN {
		t.Fatalf("an ended session's continuation: %v, want UNKNOWN", r.GetOutcome())
	}
}
