package approvals

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// settlingDirectory is an execution directory whose one row settles after
// its first read: the execution settles while a decision request is on
// its way to the session.
type settlingDirectory struct {
	reads   int
	settles bool
	records int // RecordDecision calls
}

func (d *settlingDirectory) GetExecution(_ context.Context, id string) (directory.Execution, error) {
	d.reads++
	row := directory.Execution{ID: id, Session: "S1", User: "u", Org: "acme"}
	if d.settles && d.reads > 1 {
		row.Settled = time.Unix(1, 0)
	}
	return row, nil
}

func (d *settlingDirectory) ListExecutions(context.Context, string, time.Time, int) ([]directory.Execution, error) {
	return nil, nil
}

func (d *settlingDirectory) RecordDecision(context.Context, string, string, string, string, time.Time) error {
	d.records++
	return nil
}

func (d *settlingDirectory) ListDecided(context.Context, string, int) ([]directory.Execution, error) {
	return nil, nil
}

// forgetfulSession answers as a session that no longer holds the
// execution: settled, its decision released.
type forgetfulSession struct{}

func (forgetfulSession) Request(context.Context, string, string, proto.Message, ...cluster.CallOption) (proto.Message, error) {
	return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}, nil
}

// TestDecisionRacingTheSettlementIsAlreadyDecided: a decision (or a look)
// whose directory read saw the execution unsettled, and which reached the
// session after it settled (the session forgets a settled execution's
// decision), is told "already decided", like every later request — not
// "not found". The directory and session are fakes: in a real cluster the
// window is a few milliseconds wide; the chaos harness's racing approvers
// meet it with real parts (docs/reliability.md: 47 of 1,198 executions in a
// CI round answered 404 before this fix).
func TestDecisionRacingTheSettlementIsAlreadyDecided(t *testing.T) {
	who := &pb.Principal{User: "u", Org: "acme", Role: "member"}
	for _, tc := range []struct {
		name    string
		settles bool
		want    error
	}{
		{"settled meanwhile", true, ErrAlreadyDecided},
		{"never settled (not the session's)", false, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := NewService(forgetfulSession{}, &settlingDirectory{settles: tc.settles}, ServiceOptions{})
			if _, err := svc.Decide(context.Background(), who, "", "exec_1", "accept", nil); !errors.Is(err, tc.want) {
				t.Errorf("Decide = %v, want %v", err, tc.want)
			}
			svc = NewService(forgetfulSession{}, &settlingDirectory{settles: tc.settles}, ServiceOptions{})
			if _, err := svc.Get(context.Background(), who, "", "exec_1"); !errors.Is(err, tc.want) {
				t.Errorf("Get = %v, want %v", err, tc.want)
			}
		})
	}
}

// decidingSession decides, and says whether it wrote the directory's
// entry with its decision.
type decidingSession struct{ recorded bool }

func (s decidingSession) Request(context.Context, string, string, proto.Message, ...cluster.CallOption) (proto.Message, error) {
	return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, Text: "I've accepted it", Recorded: s.recorded}, nil
}

// TestDecisionRecordedByTheOwnerIsNotWrittenAgain: an owner that wrote the
// decision's directory entry in its decision's transaction (a session
// grain) says so, and the surface writes nothing more; an owner that does
// not (a task, a continuation, a node of an older version) leaves the
// entry to the surface, as before.
func TestDecisionRecordedByTheOwnerIsNotWrittenAgain(t *testing.T) {
	who := &pb.Principal{User: "u", Org: "acme", Role: "member"}
	for _, tc := range []struct {
		recorded bool
		writes   int
	}{{true, 0}, {false, 1}} {
		dir := &settlingDirectory{}
		svc := NewService(decidingSession{recorded: tc.recorded}, dir, ServiceOptions{})
		if _, err := svc.Decide(context.Background(), who, "", "exec_1", "accept", map[string]any{"reason": "ok"}); err != nil {
			t.Fatalf("recorded=%v: Decide: %v", tc.recorded, err)
		}
		if dir.records != tc.writes {
			t.Errorf("recorded=%v: the surface wrote the entry %d times, want %d", tc.recorded, dir.records, tc.writes)
		}
	}
}
