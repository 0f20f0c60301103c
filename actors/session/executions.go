package session

import (
	"context"
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Approval surfaces (HTTP routes and page, gRPC, CLI) and cross-session
// resumes reach a session's paused executions through these messages.

func execReply(st pb.ExecutionReply_Status) *pb.ExecutionReply {
	return &pb.ExecutionReply{Status: st}
}

// sameOrg: anyone of the owner's organization may see the session's
// paused executions (executor's approvers); deciding takes a role
// ([policy.Approvers]).
func (s *session) sameOrg(p *pb.Principal) bool {
	return s.rec != nil && p.GetOrg() != "" && p.GetOrg() == s.rec.GetPrincipal().GetOrg()
}

// inspector is the runtime, if one is resident, to look at its pauses.
func (s *session) inspector() (Runtime, bool) {
	return s.rt, s.rt != nil
}

func (s *session) withSession(p *pb.PausedExecution) *pb.PausedExecution {
	p.SessionId = s.id
	return p
}

func (s *session) executionGet(m *pb.ExecutionGet) *pb.ExecutionReply {
	if !s.sameOrg(m.GetPrincipal()) {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND) // learn nothing about other orgs
	}
	pi, ok := s.inspector()
	if !ok {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND)
	}
	p, ok := pi.PausedExecution(m.GetExecutionId())
	if !ok {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND)
	}
	return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, Executions: []*pb.PausedExecution{s.withSession(p)}}
}

func (s *session) executionList(m *pb.ExecutionList) *pb.ExecutionReply {
	r := execReply(pb.ExecutionReply_STATUS_OK)
	if !s.sameOrg(m.GetPrincipal()) {
		return r
	}
	if pi, ok := s.inspector(); ok {
		for _, p := range pi.PausedExecutionList() {
			r.Executions = append(r.Executions, s.withSession(p))
		}
	}
	return r
}

// decisionTexts are executor's confirmations.
var decisionTexts = map[string][2]string{
	"accept":  {"I've accepted it", "accepted"},
	"decline": {"I've declined it", "declined"},
	"cancel":  {"I've cancelled it", "cancelled"},
}

// executionDecide records a human decision, once, and hands it to the
// runtime (which wakes a waiting browser-mode resume or resumes at once).
func (s *session) executionDecide(ctx context.Context, g grain.Context, m *pb.ExecutionDecide) (*pb.ExecutionReply, error) {
	texts, ok := decisionTexts[m.GetAction()]
	if !ok {
		return nil, grain.Reject("session: action must be accept, decline or cancel")
	}
	if !s.sameOrg(m.GetPrincipal()) {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND), nil
	}
	// The grain that owns the pause is the authority: a surface that
	// skipped the check, or runs with other settings, is still refused.
	if !s.h.cfg.Approvers.MayDecide(m.GetPrincipal().GetRole()) {
		return execReply(pb.ExecutionReply_STATUS_FORBIDDEN), nil
	}
	// An in-band decision is the pause's own client's: the session
	// principal's (as a resume from another session is), never another
	// user's of the organization, whatever the role.
	if m.GetInBand() && !principalEqual(s.rec.GetPrincipal(), m.GetPrincipal()) {
		return execReply(pb.ExecutionReply_STATUS_FORBIDDEN), nil
	}
	id := m.GetExecutionId()
	if s.rec.GetDecisions()[id] != nil {
		return execReply(pb.ExecutionReply_STATUS_ALREADY_DECIDED), nil
	}
	if err := s.restoreForExecutions(ctx, g); err != nil {
		return nil, err
	}
	pi, ok := s.inspector()
	if !ok {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND), nil
	}
	if _, ok := pi.PausedExecution(id); !ok {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND), nil
	}
	if inBandRefused(pi, m) {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_FORBIDDEN, Text: InBandClosedText}, nil
	}
	d := &pb.ApprovalDecision{
		Action: m.GetAction(), Reason: DecisionReason(m.GetContentJson()),
		OrgWriteAccess: m.GetPrincipal().GetRole() == "admin", DecidedAtMs: s.now().UnixMilli(),
		DecidedBy: m.GetPrincipal().GetUser(), ContentJson: m.GetContentJson(),
	}
	// The directory's entry (who decided, and why: the inbox's history)
	// commits with the decision: one transaction, not a second write by
	// the surface after the answer.
	var entry []store.Stmt
	if s.h.cfg.Directory != nil {
		entry = []store.Stmt{directory.DecisionIn(id, d.GetDecidedBy(), d.GetAction(), directory.ReasonShownOf(d.GetContentJson()), s.now())}
	}
	if err := s.recordDecision(ctx, g, id, d, entry); err != nil {
		return nil, err
	}
	if err := s.step(ctx, g, event{kind: evDecided, exec: id}); err != nil {
		return nil, err
	}
	return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, Text: texts[0], Recorded: entry != nil}, nil
}

// DecisionReason is the "reason" string of a decision's content, if any
// (at most 1,000 bytes), as the grain that owns a pause keeps it.
func DecisionReason(contentJSON string) string {
	var c struct {
		Reason string `json:"reason"`
	}
	if contentJSON == "" || json.Unmarshal([]byte(contentJSON), &c) != nil {
		return ""
	}
	if len(c.Reason) > 1000 {
		c.Reason = strings.ToValidUTF8(c.Reason[:1000], "")
	}
	return c.Reason
}

// recordDecision saves d as execution id's decision in the record, with
// entry (the directory's entry of a human decision, if any) in the same
// transaction.
func (s *session) recordDecision(ctx context.Context, g grain.Context, id string, d *pb.ApprovalDecision, entry []store.Stmt) error {
	rec := proto.Clone(s.rec).(*pb.SessionRecord)
	if rec.Decisions == nil {
		rec.Decisions = map[string]*pb.ApprovalDecision{}
	}
	rec.Decisions[id] = d
	return s.commit(ctx, g, rec, store.Writes{Also: entry})
}

// executionResume serves a `resume` forwarded from another session: only
// the session's own principal may, and only while the pause is live here
// (another organization's caller learns nothing: "not found").
// The resumed code runs until it pauses again or ends, which may take a
// while: the reply is deferred to its own goroutine, so the session serves
// its other requests meanwhile instead of queueing them behind the code.
func (s *session) executionResume(ctx context.Context, g grain.Context, m *pb.ExecutionResumeForModel) proto.Message {
	if !s.sameOrg(m.GetPrincipal()) {
		return execReply(pb.ExecutionReply_STATUS_NOT_FOUND)
	}
	if !principalEqual(s.rec.GetPrincipal(), m.GetPrincipal()) || !s.h.cfg.Approvers.MayDecide(m.GetPrincipal().GetRole()) {
		return execReply(pb.ExecutionReply_STATUS_FORBIDDEN)
	}
	if s.rt == nil {
		return execReply(pb.ExecutionReply_STATUS_EXPIRED)
	}
	mr := s.rt
	s.markActivity()
	answer := g.Defer()
	go func() {
		result, st := mr.ResumeForModel(context.WithoutCancel(ctx), m.GetExecutionId(), m)
		answer(&pb.ExecutionReply{Status: st, ResultJson: result}, nil)
	}()
	return nil
}

// askContinue serves a continuation of one of the session's pending
// questions (the SDK's ContinueAsk), from any session of its principal:
// another organization's caller learns nothing ("unknown"), another user
// of the organization is refused. The runtime is restored if the session
// had passivated; the continuation runs outside the grain's turn (the
// reply is deferred), counted as a running execution.
func (s *session) askContinue(ctx context.Context, g grain.Context, m *pb.AskContinue) (proto.Message, error) {
	if !s.sameOrg(m.GetPrincipal()) || s.ended {
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN}, nil
	}
	if !principalEqual(s.rec.GetPrincipal(), m.GetPrincipal()) {
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_FOREIGN}, nil
	}
	if err := s.restoreForExecutions(ctx, g); err != nil {
		return nil, err
	}
	k, ok := s.rt.(AskContinuer)
	if s.rt == nil || !ok {
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN}, nil
	}
	s.markActivity()
	answer := g.Defer()
	k.ContinueAsk(ctx, m, func(r *pb.AskContinueReply) { answer(r, nil) })
	return nil, nil
}

// unpublish drops the directory rows of pauses lost with a disposed
// runtime (the runtime itself publishes and settles them).
func (s *session) unpublish(ctx context.Context, execIDs ...string) {
	if s.h.cfg.Directory == nil || len(execIDs) == 0 {
		return
	}
	if err := s.h.cfg.Directory.DeleteExecutions(ctx, execIDs...); err != nil {
		s.h.log.Warn("session: unpublish executions", "session", s.id, "err", err)
	}
}
