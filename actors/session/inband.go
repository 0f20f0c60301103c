package session

import (
	"context"
	"fmt"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// In-band decisions (pb.ExecutionDecide with in_band): the answer of a
// pause's own client in a tool call — the SDK's Question.ClientMayDecide:
// a native elicitation's answer, a later call's DecideAsk — sent by the
// runtime to the grain that owns the pause. The grain takes it as it
// takes an approval surface's decision (same organization, a role that
// may decide, recorded once with the directory's entry), only from the
// session's own principal (another user's: FORBIDDEN), and only for a
// pause its runtime lets the client decide (a code-mode pause always:
// the SDK's DecideAsk of an execution id).

// InBandPauses is implemented by a runtime whose pauses may let their
// client decide them in band (mcpruntime.Runtime). A runtime that does
// not implement it lets none.
type InBandPauses interface {
	// ClientMayDecide reports whether paused execution execID lets its
	// client decide it in band.
	ClientMayDecide(execID string) bool
}

// InBandClosedText is the Text of the FORBIDDEN reply to an in-band
// decision of a pause that does not let its client decide.
const InBandClosedText = "client_may_not_decide"

// inBandRefused reports whether m is an in-band decision that rt's pause
// does not take.
func inBandRefused(rt Runtime, m *pb.ExecutionDecide) bool {
	if !m.GetInBand() {
		return false
	}
	ib, ok := rt.(InBandPauses)
	return !ok || !ib.ClientMayDecide(m.GetExecutionId())
}

// DecideThrough returns the runtime's Config.Decide for a node: it sends
// an in-band decision to session grain id through c, the node's
// grain.Cluster.
func DecideThrough(c grain.Requester) func(ctx context.Context, id string, m *pb.ExecutionDecide) (*pb.ExecutionReply, error) {
	return func(ctx context.Context, id string, m *pb.ExecutionDecide) (*pb.ExecutionReply, error) {
		r, err := c.Request(ctx, KindName, id, m)
		if err != nil {
			return nil, fmt.Errorf("session: in-band decision to %s: %w", id, err)
		}
		reply, ok := r.(*pb.ExecutionReply)
		if !ok {
			return nil, fmt.Errorf("session: in-band decision to %s: unexpected reply %T", id, r)
		}
		return reply, nil
	}
}

// AskContinuer is implemented by a runtime that runs the continuations
// of its pending questions (mcpruntime.Runtime: the SDK's ContinueAsk).
type AskContinuer interface {
	// ContinueAsk starts the continuation of m's question (counted in
	// RunningExecutions until it ends) and calls answer with what came of
	// it, from another goroutine or before it returns.
	ContinueAsk(ctx context.Context, m *pb.AskContinue, answer func(*pb.AskContinueReply))
}

// ContinueThrough returns the runtime's Config.Continue for a node: it
// sends a continuation to session grain id through c, the node's
// grain.Cluster. A rejection (grain error CODE_REJECTED: the owner did
// not run it) is answered OUTCOME_RETRY: it is how an owner of an earlier
// release answers, one without AskContinue (its node cannot decode the
// message). Code mode's resume then falls back to ExecutionResumeForModel
// (docs/sdk.md §6, "Compatibility with the previous release"); the SDK's
// ContinueAsk answers ErrRetry, as for an owner it could not reach, and a
// retry after the owner's node is upgraded finds the question.
func ContinueThrough(c grain.Requester) func(ctx context.Context, id string, m *pb.AskContinue) (*pb.AskContinueReply, error) {
	return func(ctx context.Context, id string, m *pb.AskContinue) (*pb.AskContinueReply, error) {
		r, err := c.Request(ctx, KindName, id, m, grain.Idempotent())
		if ge, ok := grain.AsError(err); ok && ge.Code == pb.GrainError_CODE_REJECTED {
			return &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_RETRY, Error: ge.Error()}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("session: continuation to %s: %w", id, err)
		}
		reply, ok := r.(*pb.AskContinueReply)
		if !ok {
			return nil, fmt.Errorf("session: continuation to %s: unexpected reply %T", id, r)
		}
		return reply, nil
	}
}
