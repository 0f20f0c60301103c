package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// The messages other parties send to a session grain, next to the grain
// that answers them: a cap eviction from the node's residency registry,
// and a resume forwarded from the session that received it to the one that
// owns the execution (executor's resumeFallback).

// EvictThrough returns Config.Evict for a node: it asks the session grain
// id to give up its runtime (RequestCapEviction) through c, the node's
// grain.Cluster (a grain.Host gets it).
func EvictThrough(c grain.Requester) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		r, err := c.Request(ctx, KindName, id, &pb.RequestCapEviction{LinkContext: tracing.Inject(ctx)})
		if err != nil {
			return false, fmt.Errorf("session: cap eviction of %s: %w", id, err)
		}
		reply, _ := r.(*pb.CapEvictionReply)
		return reply.GetEvicted(), nil
	}
}

// ResumeForwarder returns the forward of a node's code mode
// (mcpruntime.CodeMode.Forward): it sends a resume to the session grain
// that owns the execution through c, the node's grain.Cluster, and counts the outcomes in
// mcpgrain_resume_forwards_total on reg.
func ResumeForwarder(c grain.Requester, reg prometheus.Registerer) (func(ctx context.Context, sessionID string, m *pb.ExecutionResumeForModel) (*pb.ExecutionReply, error), error) {
	forwards, err := resumeForwards(reg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, sessionID string, m *pb.ExecutionResumeForModel) (*pb.ExecutionReply, error) {
		r, err := c.Request(ctx, KindName, sessionID, m, grain.Idempotent())
		if err != nil {
			forwards.WithLabelValues("error").Inc()
			return nil, fmt.Errorf("session: forward resume to %s: %w", sessionID, err)
		}
		reply, ok := r.(*pb.ExecutionReply)
		if !ok {
			forwards.WithLabelValues("error").Inc()
			return nil, fmt.Errorf("session: forward resume to %s: unexpected reply %T", sessionID, r)
		}
		forwards.WithLabelValues(forwardOutcome(reply.GetStatus())).Inc()
		return reply, nil
	}, nil
}

// forwardOutcome is the resume_forwards_total label of a forward's reply.
func forwardOutcome(st pb.ExecutionReply_Status) string {
	switch st {
	case pb.ExecutionReply_STATUS_OK:
		return "ok"
	case pb.ExecutionReply_STATUS_FORBIDDEN:
		return "forbidden"
	case pb.ExecutionReply_STATUS_ALREADY_SETTLED:
		return "already_settled"
	case pb.ExecutionReply_STATUS_NOT_FOUND:
		return "not_found"
	case pb.ExecutionReply_STATUS_ALREADY_DECIDED:
		return "already_decided"
	}
	return "expired"
}

// resumeForwards is the node's mcpgrain_resume_forwards_total on reg,
// registered by the first of its two routes (ResumeForwarder,
// ContinueCounted) that asks for it.
func resumeForwards(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	forwards := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgrain_resume_forwards_total",
		Help: "Resumes forwarded from the session that received them to the session that owns the execution (executor #1300), by outcome: ok, forbidden, already_decided, already_settled, expired, not_found, error (no answer).",
	}, []string{"outcome"})
	if err := reg.Register(forwards); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if cv, ok := dup.ExistingCollector.(*prometheus.CounterVec); ok {
				return cv, nil
			}
		}
		return nil, fmt.Errorf("session: register resume forwards: %w", err)
	}
	return forwards, nil
}

// CodeResumeContinuation is the AskContinue.continuation of code mode's
// `resume` from another session (docs/sdk.md §6): the owner resumes its
// engine's paused execution with the message's action.
const CodeResumeContinuation = "mcpgrain.code.resume"

// ContinueCounted is ContinueThrough counting code mode's resumes
// (CodeResumeContinuation) in mcpgrain_resume_forwards_total on reg, as
// ResumeForwarder counts the ExecutionResumeForModel it sends. An
// answer after which the sender falls back to ExecutionResumeForModel (an
// owner of an earlier release's) is not counted: the fallback is.
func ContinueCounted(c grain.Requester, reg prometheus.Registerer) (func(ctx context.Context, id string, m *pb.AskContinue) (*pb.AskContinueReply, error), error) {
	forwards, err := resumeForwards(reg)
	if err != nil {
		return nil, err
	}
	through := ContinueThrough(c)
	return func(ctx context.Context, id string, m *pb.AskContinue) (*pb.AskContinueReply, error) {
		reply, err := through(ctx, id, m)
		if m.GetContinuation() != CodeResumeContinuation {
			return reply, err
		}
		switch {
		case err != nil:
			forwards.WithLabelValues("error").Inc()
		case !fallsBack(reply.GetOutcome()):
			forwards.WithLabelValues(continueOutcome(reply.GetOutcome())).Inc()
		}
		return reply, err
	}, nil
}

// fallsBack reports an AskContinueReply to a code resume after which the
// sender sends ExecutionResumeForModel instead (an earlier release's owner
// knows no such question, or could not read its questions).
func fallsBack(o pb.AskContinueReply_Outcome) bool {
	return o == pb.AskContinueReply_OUTCOME_UNKNOWN || o == pb.AskContinueReply_OUTCOME_RETRY
}

// continueOutcome is the resume_forwards_total label of a code resume's
// AskContinueReply.
func continueOutcome(o pb.AskContinueReply_Outcome) string {
	switch o {
	case pb.AskContinueReply_OUTCOME_OK:
		return "ok"
	case pb.AskContinueReply_OUTCOME_FOREIGN, pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE:
		return "forbidden"
	case pb.AskContinueReply_OUTCOME_ALREADY_SETTLED:
		return "already_settled"
	}
	return "expired"
}
