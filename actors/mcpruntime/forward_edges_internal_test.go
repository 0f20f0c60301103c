package mcpruntime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// forwardEdge is a code runtime of session "sess-b" whose directory says
// execution "exec_1" is owned by owner, and whose forward answers with
// forward. It records the forwards and what was logged.
type forwardEdge struct {
	c    *codeRuntime
	logs *testenv.SyncBuffer

	mu        sync.Mutex
	forwards  int
	deadline  time.Time
	hasExpiry bool
}

func newForwardEdge(t *testing.T, owner string, settled bool, forward func(ctx context.Context) (*pb.ExecutionReply, error)) *forwardEdge {
	t.Helper()
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	e := &forwardEdge{logs: &testenv.SyncBuffer{}}
	rec := directory.Execution{ID: "exec_1", Session: owner, User: "alice", Org: "acme"}
	if settled {
		rec.Settled = time.Now()
	}
	cfg := &CodeMode{
		Tools:  reg,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
		Lookup: func(context.Context, string) (directory.Execution, error) { return rec, nil },
		Forward: func(ctx context.Context, _ string, _ *pb.ExecutionResumeForModel) (*pb.ExecutionReply, error) {
			e.mu.Lock()
			e.forwards++
			e.deadline, e.hasExpiry = ctx.Deadline()
			e.mu.Unlock()
			return forward(ctx)
		},
	}
	e.c = newCodeRuntime(cfg, "sess-b", nil, false, nil)
	t.Cleanup(e.c.Shutdown)
	return e
}

func (e *forwardEdge) resume(t *testing.T) codemode.Miss {
	t.Helper()
	res, miss := e.c.Forward(t.Context(), "exec_1", engine.Principal{User: "alice", Org: "acme", Role: "member"},
		engine.Response{Action: engine.Accept})
	if res != nil {
		t.Fatalf("forward: a result %+v, want a miss", res)
	}
	return miss
}

// logged fails unless one mcp_model_resume_forward_error record names the
// execution, the owner and reason.
func (e *forwardEdge) logged(t *testing.T, owner, reason string) {
	t.Helper()
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "msg=mcp_model_resume_forward_error") && strings.Contains(line, "execution=exec_1") &&
			strings.Contains(line, "owner="+owner) && strings.Contains(line, "reason="+reason) {
			return
		}
	}
	t.Errorf("no mcp_model_resume_forward_error with owner=%s reason=%s in the log:\n%s", owner, reason, e.logs.String())
}

// The cross-session resume forward's edges (issue 27; executor's
// agent-session-model-resume.test.ts and forwardModelResumeToOwner): a
// directory entry naming this same session is execution_expired without a
// forward; a wedged owner is execution_expired once the forward timeout
// ends; an owner that answers not_found is execution_expired (it existed:
// the directory named it). Each is logged.
func TestForwardEdgesEndAsExpiredAndAreLogged(t *testing.T) {
	t.Run("the directory names this session", func(t *testing.T) {
		e := newForwardEdge(t, "sess-b", false, func(context.Context) (*pb.ExecutionReply, error) {
			return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, ResultJson: `{"content":[]}`}, nil
		})
		if miss := e.resume(t); miss != codemode.Expired {
			t.Errorf("miss %q, want %q", miss, codemode.Expired)
		}
		if e.forwards != 0 {
			t.Errorf("%d forwards, want none: the entry names this session", e.forwards)
		}
		e.logged(t, "sess-b", "owner_is_this_session")
	})
	t.Run("the forward is bounded by ForwardTimeout", func(t *testing.T) {
		e := newForwardEdge(t, "sess-a", false, func(context.Context) (*pb.ExecutionReply, error) {
			return nil, errors.New("grain request failed")
		})
		before := time.Now()
		miss := e.resume(t)
		after := time.Now()
		if miss != codemode.Expired {
			t.Errorf("miss %q, want %q", miss, codemode.Expired)
		}
		if ForwardTimeout != 10*time.Second {
			t.Errorf("ForwardTimeout %s, want executor's 10 s", ForwardTimeout)
		}
		if !e.hasExpiry || e.deadline.Before(before.Add(ForwardTimeout)) || e.deadline.After(after.Add(ForwardTimeout)) {
			t.Errorf("forward deadline %v (set %v), want %s after the call (%v–%v)", e.deadline, e.hasExpiry, ForwardTimeout, before, after)
		}
		e.logged(t, "sess-a", "error")
	})
	t.Run("a wedged owner", func(t *testing.T) {
		const wedged = 30 * time.Second // an owner that never answers, unless the forward gives up first
		e := newForwardEdge(t, "sess-a", false, func(ctx context.Context) (*pb.ExecutionReply, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wedged):
				return nil, errors.New("the owner was never given up on")
			}
		})
		e.c.fwd = &codeForward{timeout: 50 * time.Millisecond, cont: e.c.fwd.cont}
		began := time.Now()
		if miss := e.resume(t); miss != codemode.Expired {
			t.Errorf("miss %q, want %q", miss, codemode.Expired)
		}
		if took := time.Since(began); took >= wedged {
			t.Errorf("the resume took %s: the forward was not bounded", took)
		}
		e.logged(t, "sess-a", "timeout")
	})
	t.Run("the owner answers not found", func(t *testing.T) {
		e := newForwardEdge(t, "sess-a", false, func(context.Context) (*pb.ExecutionReply, error) {
			return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}, nil
		})
		if miss := e.resume(t); miss != codemode.Expired {
			t.Errorf("miss %q, want %q (executor maps a forwarded not_found to expired)", miss, codemode.Expired)
		}
		e.logged(t, "sess-a", "owner_not_found")
	})
	t.Run("the owner answers not found for a settled execution", func(t *testing.T) {
		e := newForwardEdge(t, "sess-a", true, func(context.Context) (*pb.ExecutionReply, error) {
			return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}, nil
		})
		if miss := e.resume(t); miss != codemode.AlreadySettled {
			t.Errorf("miss %q, want %q", miss, codemode.AlreadySettled)
		}
	})
}
