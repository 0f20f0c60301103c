package session

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// replying answers every request with reply (or err).
type replying struct {
	reply proto.Message
	err   error
}

func (r replying) Request(context.Context, string, string, proto.Message, ...grain.CallOption) (proto.Message, error) {
	return r.reply, r.err
}

// Code mode's resumes that travel as AskContinue are counted in
// mcpgrain_resume_forwards_total with the forward's labels, on the one
// counter both routes share; an owner of an earlier release's
// OUTCOME_UNKNOWN or OUTCOME_RETRY is not (the ExecutionResumeForModel
// sent after it counts), nor is the SDK's own ContinueAsk.
func TestContinueCountedCountsCodeResumes(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := ResumeForwarder(replying{}, reg); err != nil {
		t.Fatal(err)
	}
	code := &pb.AskContinue{ExecutionId: "exec_1", Continuation: CodeResumeContinuation}
	for _, tc := range []struct {
		m     *pb.AskContinue
		reply proto.Message
		err   error
		label string // "": not counted
	}{
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_OK}, nil, "ok"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_FOREIGN}, nil, "forbidden"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_MAY_NOT_DECIDE}, nil, "forbidden"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_ALREADY_SETTLED}, nil, "already_settled"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_EXPIRED}, nil, "expired"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_PENDING}, nil, "expired"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_RETRY}, nil, ""},
		{code, nil, errors.New("no answer"), "error"},
		{code, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_UNKNOWN}, nil, ""},
		{code, nil, rejectedByEarlier, ""},
		{&pb.AskContinue{ExecutionId: "exec_2"}, &pb.AskContinueReply{Outcome: pb.AskContinueReply_OUTCOME_OK}, nil, ""},
	} {
		cont, err := ContinueCounted(replying{tc.reply, tc.err}, reg)
		if err != nil {
			t.Fatal(err)
		}
		before, label := forwardsOf(t, reg, ""), forwardsOf(t, reg, tc.label)
		_, _ = cont(t.Context(), "sess-a", tc.m)
		if tc.label == "" {
			if forwardsOf(t, reg, "") != before {
				t.Errorf("%v %v: counted", tc.m.GetContinuation(), tc.reply)
			}
			continue
		}
		if forwardsOf(t, reg, "") != before+1 || forwardsOf(t, reg, tc.label) != label+1 {
			t.Errorf("%v %v: not counted as %s", tc.m.GetContinuation(), tc.reply, tc.label)
		}
	}
}

// rejectedByEarlier is how a node of the previous release answers an
// AskContinue (cluster/placement's activation cannot decode a message it
// has no type for).
var rejectedByEarlier = &grain.Error{Code: pb.GrainError_CODE_REJECTED, Message: `cannot decode payload "type.googleapis.com/mcpgrain.v1.AskContinue": not found`, Node: "n2"}

// An owner that rejects the continuation unrun (an earlier release's, which
// has no AskContinue) is read as one that cannot take it now:
// OUTCOME_RETRY, after which code mode's resume falls back to
// ExecutionResumeForModel (and the SDK's ContinueAsk answers ErrRetry, as
// it did for the error); any other failure stays an error.
func TestContinueThroughReadsARejectionAsARetry(t *testing.T) {
	m := &pb.AskContinue{ExecutionId: "exec_1", Continuation: CodeResumeContinuation}
	reply, err := ContinueThrough(replying{err: fmt.Errorf("cluster: %w", rejectedByEarlier)})(t.Context(), "sess-a", m)
	if err != nil || reply.GetOutcome() != pb.AskContinueReply_OUTCOME_RETRY {
		t.Fatalf("rejected: %v, %v; want OUTCOME_RETRY", reply, err)
	}
	for _, fail := range []error{
		errors.New("no answer"),
		&grain.Error{Code: pb.GrainError_CODE_INTERNAL, Message: "boom"},
	} {
		if reply, err := ContinueThrough(replying{err: fail})(t.Context(), "sess-a", m); err == nil {
			t.Errorf("%v: answered %v, want the error", fail, reply)
		}
	}
}

// forwardsOf is the node's mcpgrain_resume_forwards_total of outcome
// label ("": every outcome).
func forwardsOf(t *testing.T, reg *prometheus.Registry, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "mcpgrain_resume_forwards_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && (label == "" || lp.GetValue() == label) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
