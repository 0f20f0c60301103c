package mcpruntime

import (
	"context"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/session"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A resume from another session travels on the SDK's continuation route
// (an AskContinue naming session.CodeResumeContinuation, with the caller
// and its decision): the private ExecutionResumeForModel is not sent when
// the owner takes it. An owner of an earlier release answers
// OUTCOME_UNKNOWN (it does not know the field) and then gets the
// ExecutionResumeForModel it understands; without a Forward that is a
// miss. Each of the owner's answers maps to the miss the forward's did.
func TestCrossSessionResumeTravelsAsAContinuation(t *testing.T) {
	okResult := `{"content":[{"type":"text","text":"done"}]}`
	forwardOK := func(context.Context) (*pb.ExecutionReply, error) {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, ResultJson: okResult}, nil
	}
	for _, tc := range []struct {
		name     string
		outcome  pb.AskContinueReply_Outcome
		forward  bool // a Forward is configured
		settled  bool // the directory shows the execution settled
		want     codemode.Miss
		forwards int
	}{
		{"the owner resumes it", pb.AskContinueReply_OUTCOME_OK, true, false, "", 0},
		{"an owner of an earlier release", pb.AskContinueReply_OUTCOME_UNKNOWN, true, false, "", 1},
		{"no forward for an earlier owner", pb.AskContinueReply_OUTCOME_UNKNOWN, false, false, codemode.Expired, 0},
		{"another user", pb.AskContinueReply_OUTCOME_FOREIGN, true, false, codemode.Forbidden, 0},
		{"a role that may not decide", pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE, true, false, codemode.Forbidden, 0},
		{"settled before", pb.AskContinueReply_OUTCOME_ALREADY_SETTLED, true, false, codemode.AlreadySettled, 0},
		{"the owner lost it", pb.AskContinueReply_OUTCOME_EXPIRED, true, false, codemode.Expired, 0},
		{"the owner lost a settled one", pb.AskContinueReply_OUTCOME_EXPIRED, true, true, codemode.AlreadySettled, 0},
		{"an earlier owner that cannot read its questions now", pb.AskContinueReply_OUTCOME_RETRY, true, false, "", 1},
		{"an outcome this release does not know", pb.AskContinueReply_OUTCOME_PENDING, true, false, codemode.Expired, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newForwardEdge(t, "sess-a", tc.settled, forwardOK)
			if !tc.forward {
				e.c.cfg.Forward = nil
			}
			var sent []*pb.AskContinue
			var owners []string
			e.c.fwd = &codeForward{timeout: ForwardTimeout, cont: func(_ context.Context, owner string, m *pb.AskContinue) (*pb.AskContinueReply, error) {
				sent, owners = append(sent, m), append(owners, owner)
				return &pb.AskContinueReply{Outcome: tc.outcome, ResultJson: okResult}, nil
			}}
			res, miss := e.c.Forward(t.Context(), "exec_1", engine.Principal{User: "alice", Org: "acme", Role: "member"},
				engine.Response{Action: engine.Accept, Content: map[string]any{"n": 1}})
			if miss != tc.want || (tc.want == "") != (res != nil) {
				t.Fatalf("result %v, miss %q; want miss %q", res, miss, tc.want)
			}
			if e.forwards != tc.forwards {
				t.Errorf("%d ExecutionResumeForModel sent, want %d", e.forwards, tc.forwards)
			}
			if len(sent) != 1 || owners[0] != "sess-a" {
				t.Fatalf("AskContinue sent %d times (to %v), want once to the owner", len(sent), owners)
			}
			m := sent[0]
			if m.GetContinuation() != session.CodeResumeContinuation || m.GetExecutionId() != "exec_1" || m.GetAction() != engine.Accept ||
				m.GetContentJson() != `{"n":1}` || m.GetPrincipal().GetUser() != "alice" || m.GetPrincipal().GetOrg() != "acme" || m.GetPrincipal().GetRole() != "member" {
				t.Errorf("AskContinue %v", m)
			}
		})
	}
	t.Run("the directory names this session", func(t *testing.T) {
		e := newForwardEdge(t, "sess-b", false, forwardOK)
		e.c.fwd = &codeForward{timeout: ForwardTimeout, cont: func(context.Context, string, *pb.AskContinue) (*pb.AskContinueReply, error) {
			t.Error("an AskContinue to this session itself")
			return nil, nil
		}}
		if miss := e.resume(t); miss != codemode.Expired {
			t.Errorf("miss %q, want %q", miss, codemode.Expired)
		}
	})
}

// The owner's side: a caller whose role may not decide is refused before
// anything runs, a runtime without code mode or without the pause answers
// expired, and a continuation this release does not know is answered as
// an earlier release answers an unknown one (OUTCOME_UNKNOWN).
func TestCodeResumeContinuationOnTheOwner(t *testing.T) {
	e := newForwardEdge(t, "sess-a", false, nil)
	r := &Runtime{code: e.c}
	ask := func(r *Runtime, continuation, role string) pb.AskContinueReply_Outcome {
		got := make(chan *pb.AskContinueReply, 1)
		r.ContinueAsk(t.Context(), &pb.AskContinue{Principal: &pb.Principal{User: "alice", Org: "acme", Role: role},
			ExecutionId: "exec_1", Continuation: continuation, Action: engine.Accept}, func(m *pb.AskContinueReply) { got <- m })
		return (<-got).GetOutcome()
	}
	for _, tc := range []struct {
		name, continuation, role string
		r                        *Runtime
		want                     pb.AskContinueReply_Outcome
	}{
		{"a viewer", session.CodeResumeContinuation, "viewer", r, pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE},
		{"no such pause", session.CodeResumeContinuation, "member", r, pb.AskContinueReply_OUTCOME_EXPIRED},
		{"no code mode", session.CodeResumeContinuation, "member", &Runtime{}, pb.AskContinueReply_OUTCOME_EXPIRED},
		{"a later release's continuation", "mcpgrain.something.else", "member", r, pb.AskContinueReply_OUTCOME_UNKNOWN},
	} {
		if got := ask(tc.r, tc.continuation, tc.role); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// What the owner's resume statuses become as AskContinue outcomes.
func TestCodeContinueReply(t *testing.T) {
	for st, want := range map[pb.ExecutionReply_Status]pb.AskContinueReply_Outcome{
		pb.ExecutionReply_STATUS_OK:              pb.AskContinueReply_OUTCOME_OK,
		pb.ExecutionReply_STATUS_ALREADY_SETTLED: pb.AskContinueReply_OUTCOME_ALREADY_SETTLED,
		pb.ExecutionReply_STATUS_FORBIDDEN:       pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE,
		pb.ExecutionReply_STATUS_EXPIRED:         pb.AskContinueReply_OUTCOME_EXPIRED,
		pb.ExecutionReply_STATUS_NOT_FOUND:       pb.AskContinueReply_OUTCOME_EXPIRED,
		pb.ExecutionReply_STATUS_ALREADY_DECIDED: pb.AskContinueReply_OUTCOME_RETRY,
	} {
		if got := codeContinueReply("{}", st).GetOutcome(); got != want {
			t.Errorf("%s: %s, want %s", st, got, want)
		}
	}
}
