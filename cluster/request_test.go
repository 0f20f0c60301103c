package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/placement"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// What one attempt's answer means for the request: a reply, a final error,
// or a retry (and which retry reason is counted).
func TestClassify(t *testing.T) {
	target := actor.NewPID("10.0.0.2:7070", placement.ActorName)
	reply := &pb.ProbeState{Count: 3}
	payload, err := anypb.New(reply)
	if err != nil {
		t.Fatal(err)
	}
	notOwner := &grain.Error{Code: pb.GrainError_CODE_NOT_OWNER, Message: "not mine"}
	rejected := &grain.Error{Code: pb.GrainError_CODE_REJECTED, Message: "no"}
	storeGone := &grain.Error{Code: pb.GrainError_CODE_STORE_UNAVAILABLE, Message: "store down"}
	for _, tc := range []struct {
		name       string
		res        any
		err        error
		idempotent bool
		wantReply  bool
		wantErr    func(error) bool
		wantRetry  bool
		wantReason string
	}{
		{name: "a local reply", res: &placement.LocalReply{Msg: reply}, wantReply: true},
		{name: "a remote reply", res: &pb.GrainResponse{Payload: payload}, wantReply: true},
		{name: "an undecodable remote reply", res: &pb.GrainResponse{Payload: &anypb.Any{TypeUrl: "x/unknown"}},
			wantErr: func(err error) bool { return err != nil && !errors.Is(err, ErrUnknownOutcome) }},
		{name: "a dead letter did not execute: retry", err: actor.ErrDeadLetter, wantRetry: true, wantReason: "dead_letter",
			wantErr: func(err error) bool { return errors.Is(err, actor.ErrDeadLetter) }},
		{name: "a timeout of a non-idempotent request is an unknown outcome", err: actor.ErrTimeout,
			wantErr: func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{name: "a timeout of an idempotent request retries", err: actor.ErrTimeout, idempotent: true, wantRetry: true, wantReason: "timeout",
			wantErr: func(err error) bool { return errors.Is(err, ErrUnknownOutcome) }},
		{name: "another transport error is final", err: fmt.Errorf("boom"),
			wantErr: func(err error) bool { return err != nil && !errors.Is(err, ErrUnknownOutcome) }},
		{name: "not the owner: retry", res: &placement.LocalReply{Err: notOwner}, wantRetry: true, wantReason: retryReason(notOwner.Code),
			wantErr: func(err error) bool { ge, ok := grain.AsError(err); return ok && ge.Code == notOwner.Code }},
		{name: "a remote not-owner: retry", res: notOwner.Proto(), wantRetry: true, wantReason: retryReason(notOwner.Code),
			wantErr: func(err error) bool { ge, ok := grain.AsError(err); return ok && ge.Code == notOwner.Code }},
		{name: "a grain's own refusal is final", res: &placement.LocalReply{Err: rejected},
			wantErr: func(err error) bool { ge, ok := grain.AsError(err); return ok && ge.Code == rejected.Code }},
		{name: "store gone mid-request, idempotent: retry", res: &placement.LocalReply{Err: storeGone}, idempotent: true, wantRetry: true, wantReason: retryReason(storeGone.Code),
			wantErr: func(err error) bool { ge, ok := grain.AsError(err); return ok && ge.Code == storeGone.Code }},
		{name: "store gone mid-request, not idempotent: unknown outcome, not a plain failure", res: &placement.LocalReply{Err: storeGone},
			wantErr: func(err error) bool {
				_, isGrain := grain.AsError(err)
				return errors.Is(err, ErrUnknownOutcome) && !isGrain
			}},
		{name: "an unexpected answer is final", res: "hello",
			wantErr: func(err error) bool { return err != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classify(tc.res, tc.err, tc.idempotent, target)
			if (v.reply != nil) != tc.wantReply {
				t.Errorf("reply %v, want reply: %v", v.reply, tc.wantReply)
			}
			if tc.wantErr == nil && v.err != nil || tc.wantErr != nil && !tc.wantErr(v.err) {
				t.Errorf("err %v", v.err)
			}
			if v.retry != tc.wantRetry || v.reason != tc.wantReason {
				t.Errorf("retry %v (%q), want %v (%q)", v.retry, v.reason, tc.wantRetry, tc.wantReason)
			}
		})
	}
}
