package mcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/session"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Code mode's `resume` from another session on the SDK's route (docs/sdk.md
// §6, "One pause path"): the caller finds the owner in the execution
// directory (the lookup and access rule of AskStatus, DecideAsk and
// ContinueAsk: sessionPauseAccess) and sends it an AskContinue naming the
// runtime's own continuation, session.CodeResumeContinuation, with the
// caller's decision — the message, the grain's principal check and the
// passivated owner's restore of the SDK's ContinueAsk. The owner checks the
// caller's role with app.InBandFor (the rule of a client's in-band
// decision) and resumes its engine's execution (the engine's replay
// journal stays its own). An owner of an earlier release does not take it
// — the previous release has no AskContinue and rejects it unrun, which
// session.ContinueThrough answers OUTCOME_RETRY; one with AskContinue but
// not the continuation answers OUTCOME_UNKNOWN — and the caller then
// sends the ExecutionResumeForModel it sent before (CodeMode.Forward).
// internal/upgrade's rolling-upgrade test drives both directions on
// processes of both releases.

// continueTo sends the resume to owner as an AskContinue, bounded by the
// forward timeout. earlier reports an owner that did not take it (an
// earlier release's: OUTCOME_UNKNOWN, or OUTCOME_RETRY when it could not
// read its questions), for the caller to forward instead.
func (c *codeRuntime) continueTo(ctx context.Context, owner, execID string, who engine.Principal, resp engine.Response, miss func(codemode.Miss) codemode.Miss) (res *mcp.CallToolResult, m codemode.Miss, earlier bool) {
	var content string
	if len(resp.Content) > 0 {
		b, _ := json.Marshal(resp.Content)
		content = string(b)
	}
	fctx, cancel := c.forwardContext(ctx)
	defer cancel()
	reply, err := c.fwd.cont(fctx, owner, &pb.AskContinue{
		Principal: &pb.Principal{User: who.User, Org: who.Org, Role: who.Role}, ExecutionId: execID,
		Continuation: session.CodeResumeContinuation, Action: resp.Action, ContentJson: content,
	})
	if err != nil {
		reason := "error"
		if errors.Is(fctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			reason = "timeout"
		}
		c.forwardMissed(execID, owner, reason, err)
		return nil, miss(codemode.Expired), false
	}
	switch reply.GetOutcome() {
	case pb.AskContinueReply_OUTCOME_OK:
		var out mcp.CallToolResult
		if err := json.Unmarshal([]byte(reply.GetResultJson()), &out); err != nil {
			c.forwardMissed(execID, owner, "bad_result", err)
			return nil, miss(codemode.Expired), false
		}
		return &out, "", false
	case pb.AskContinueReply_OUTCOME_UNKNOWN, pb.AskContinueReply_OUTCOME_RETRY:
		// An earlier release's owner: it has no AskContinue (rejected,
		// read as a retry), knows no such question, or could not read it
		// now. A new owner answers neither for a pause.
		if c.cfg.Forward == nil {
			c.forwardMissed(execID, owner, "owner_not_found", nil)
		}
		return nil, miss(codemode.Expired), true
	case pb.AskContinueReply_OUTCOME_FOREIGN, pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE:
		return nil, codemode.Forbidden, false
	case pb.AskContinueReply_OUTCOME_ALREADY_SETTLED:
		return nil, codemode.AlreadySettled, false
	case pb.AskContinueReply_OUTCOME_EXPIRED:
		c.forwardMissed(execID, owner, "owner_not_found", nil)
		return nil, miss(codemode.Expired), false
	}
	c.forwardMissed(execID, owner, "owner_expired", errors.New(reply.GetOutcome().String()+" "+reply.GetError()))
	return nil, miss(codemode.Expired), false
}

// continueCode serves code mode's resume of one of the session's paused
// executions (an AskContinue naming session.CodeResumeContinuation; the
// grain checked that the caller is the session's principal): a caller
// whose role may not decide is refused; otherwise the engine resumes the
// execution with the caller's decision, outside the grain's turn, and
// answer gets the model's tool result.
func (r *Runtime) continueCode(ctx context.Context, m *pb.AskContinue, answer func(*pb.AskContinueReply)) {
	if r.code == nil {
		answer(&pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_EXPIRED})
		return
	}
	if app.InBandFor(true, m.GetPrincipal().GetRole(), r.code.cfg.Approvers) != app.InBandOpen {
		answer(&pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE})
		return
	}
	r.code.log().Debug("mcpruntime: resume from another session on the continuation route", "session", r.code.id,
		"execution", m.GetExecutionId(), "action", m.GetAction())
	if r.asks != nil {
		r.asks.running.Add(1)
	}
	go func() {
		if r.asks != nil {
			defer r.asks.running.Add(-1)
		}
		res, st := r.code.resumeForModel(context.WithoutCancel(ctx), m.GetExecutionId(), &pb.ExecutionResumeForModel{
			Principal: m.GetPrincipal(), ExecutionId: m.GetExecutionId(), Action: m.GetAction(), ContentJson: m.GetContentJson(),
		})
		answer(codeContinueReply(res, st))
	}()
}

// codeContinueReply is the AskContinueReply of a code resume's outcome.
func codeContinueReply(resultJSON string, st pb.ExecutionReply_Status) *pb.AskContinueReply {
	switch st {
	case pb.ExecutionReply_STATUS_OK:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_OK, ResultJson: resultJSON}
	case pb.ExecutionReply_STATUS_ALREADY_SETTLED:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_ALREADY_SETTLED}
	case pb.ExecutionReply_STATUS_FORBIDDEN:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE}
	case pb.ExecutionReply_STATUS_EXPIRED, pb.ExecutionReply_STATUS_NOT_FOUND:
		return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_EXPIRED}
	}
	return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_RETRY, Error: fmt.Sprintf("resume: %s", st)}
}
