package tasks

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The SDK's durable tool calls in a task's run (docs/sdk.md §4): with
// Config.Calls, the tool a task grain runs is one durable call of the
// grain (mcpruntime.GrainCalls with GrainCallsConfig.Call), fenced by its
// epoch. Step journals there; Ask publishes its question in the execution
// directory (owned by the task id, so every approval surface lists it and
// exchange.OwnerKind routes its decisions here) and ends the round with
// input_required: the task waits for input, running nothing. A decision
// on an approval surface (decideAsk), an approver's tasks/update, or the
// approval window's decline (the approval reminder) runs the next round,
// which re-runs the handler against the journal: its steps return their
// results, its Ask the decision. The journal makes a re-run after a node
// loss safe, so a task whose call journaled something runs again then
// (recover), whatever its tool's annotations.

// reminderApproval is the reminder of a task that waits for an Ask's
// question: due when its approval window lapses.
const reminderApproval = "approval"

// callID is the id of the durable call of task taskID.
func callID(taskID string) string { return "call_" + taskID }

// callsOf returns the durable calls of the grain's activation (nil
// without Config.Calls), made at first use and reachable by the runner's
// server (bindCall) while the activation lives.
func (t *taskGrain) callsOf(g grain.Context) (*mcpruntime.GrainCalls, error) {
	if t.h.cfg.Calls == nil || t.calls != nil {
		return t.calls, nil
	}
	gc, err := mcpruntime.NewGrainCalls(mcpruntime.GrainCallsConfig{
		Store: t.h.cfg.Calls, Grain: grain.Key(g.Kind(), g.Identity()), Owner: t.id, Epoch: g.Epoch(), Call: callID(t.id),
		Window: t.h.cfg.AskWindow, MayDecide: t.h.cfg.MayDecide, Now: t.h.cfg.Now, Logger: t.h.cfg.Logger, Later: t.h.cfg.Later,
		Alarms: mcpruntime.GrainAlarms(g),
	})
	if err != nil {
		return nil, fmt.Errorf("tasks: the task's durable call: %w", err)
	}
	t.calls = gc
	t.h.calls.Store(t.id, gc)
	return gc, nil
}

// dropCalls makes the activation's durable calls unreachable (it stops).
func (t *taskGrain) dropCalls() {
	if t.calls != nil {
		t.h.calls.CompareAndDelete(t.id, t.calls)
	}
}

// bindCall is the runner's receiving middleware that binds a task's
// tools/call to the task grain's durable call (mcpruntime.BindGrainCalls),
// so that Step and Ask work in the handler.
func (h *Host) bindCall(next mcp.MethodHandler) mcp.MethodHandler {
	return mcpruntime.BindGrainCalls(mcpruntime.GrainCallsIn(h.calls.Load), func(err error) error {
		return &jsonrpc.Error{Code: exchange.CodeServerError, Message: "tasks: the task's durable call: " + err.Error()}
	})(next)
}

// question is the execution id of the Ask the task waits for ("": it
// waits for none: working, settled, or another tool's input).
func (t *taskGrain) question() string {
	if t.task == nil || Status(t.task.Status) != InputRequired || t.h.cfg.Calls == nil {
		return ""
	}
	c, exec, ok := mcpruntime.CallState(t.task.RequestState)
	if !ok || c != callID(t.id) {
		return ""
	}
	return exec
}

// pausedExecution is the execution the task's input requests decide: a
// code-mode execution's or an Ask's.
func (t *taskGrain) pausedExecution() string {
	if exec := t.question(); exec != "" {
		return exec
	}
	return t.task.RequestState
}

// decideAsk takes an approval surface's decision for the task's Ask
// (GrainCalls.Decide: the organization and the role are checked there,
// the first decision stands) and resumes the task if it waits for it.
func (t *taskGrain) decideAsk(ctx context.Context, g grain.Context, m *pb.ExecutionDecide, text string) (*pb.ExecutionReply, error) {
	gc, err := t.callsOf(g)
	if err != nil {
		return nil, err
	}
	st, found, err := gc.Decide(ctx, m)
	if err != nil {
		return nil, err
	}
	if !found {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}, nil
	}
	if st == pb.ExecutionReply_STATUS_OK || st == pb.ExecutionReply_STATUS_ALREADY_DECIDED {
		if err := t.resumeAsk(ctx, g, m.GetExecutionId()); err != nil {
			g.Logger().Warn("tasks: resume a task after its question was decided", "task", t.id, "err", err)
		}
	}
	reply := &pb.ExecutionReply{Status: st}
	if st == pb.ExecutionReply_STATUS_OK {
		reply.Text = text
	}
	return reply, nil
}

// resumeAsk runs the next round of a task that waits for question
// execID, which has its decision: the handler runs again and its Ask
// returns it.
func (t *taskGrain) resumeAsk(ctx context.Context, g grain.Context, execID string) error {
	if t.question() != execID {
		return nil
	}
	next := *t.task
	next.InputRequests, next.InputResponses, next.ResponderRole = "", "", ""
	if err := t.transition(ctx, g, next, InputComplete, 0); err != nil {
		return err
	}
	if err := g.CancelReminders(ctx, reminderApproval); err != nil {
		g.Logger().Debug("tasks: drop the approval reminder", "task", t.id, "err", err)
	}
	t.launch(ctx, g, nil)
	return nil
}

// awaitDecision arms the approval reminder of a task that now waits for
// an Ask's question, or resumes it if the question was decided (or
// lapsed) meanwhile.
func (t *taskGrain) awaitDecision(ctx context.Context, g grain.Context) error {
	exec := t.question()
	if exec == "" {
		return nil
	}
	gc, err := t.callsOf(g)
	if err != nil {
		return err
	}
	decided, deadline, found, err := gc.Lapse(ctx, exec)
	switch {
	case err != nil:
		return err
	case decided || !found:
		return t.resumeAsk(ctx, g, exec)
	}
	return g.SetReminder(ctx, reminderApproval, deadline, 0)
}

// onLaterReminder declines a pending question of the task's run (the
// SDK's AskLater) whose approval window lapsed
// (mcpruntime.LaterReminderFired).
func (t *taskGrain) onLaterReminder(ctx context.Context, g grain.Context, fired *pb.ReminderFired) error {
	gc, err := t.callsOf(g)
	if err != nil {
		return err
	}
	_, err = mcpruntime.LaterReminderFired(ctx, g, gc, fired)
	return err
}

// withdrawAsk takes the question of a cancelled task off the approval
// surfaces (a decline by the grain, not a decision).
func (t *taskGrain) withdrawAsk(ctx context.Context, g grain.Context, execID string) {
	gc, err := t.callsOf(g)
	if err == nil {
		err = gc.Withdraw(ctx, execID, "task_cancelled")
	}
	if err != nil {
		g.Logger().Warn("tasks: withdraw the question of a cancelled task", "task", t.id, "execution", execID, "err", err)
	}
	if err := g.CancelReminders(ctx, reminderApproval); err != nil {
		g.Logger().Debug("tasks: drop the approval reminder", "task", t.id, "err", err)
	}
}

// withdrawAll takes the undecided questions of an expiring task off the
// approval surfaces — the pending questions its runs asked (AskLater),
// which outlive the run but not the grain, and the Ask it waits for: once
// its grain is deleted nothing decides them, nor declines them at their
// deadline (the reminders go with the grain).
func (t *taskGrain) withdrawAll(ctx context.Context, g grain.Context) error {
	gc, err := t.callsOf(g)
	if err != nil || gc == nil {
		return err
	}
	if err := gc.WithdrawAll(ctx, "task_expired"); err != nil {
		return fmt.Errorf("tasks: withdraw the questions of an expiring task: %w", err)
	}
	return nil
}

// journaled reports whether the task's tool journaled a durable call: a
// re-run replays it, so it is safe after a node loss.
func (t *taskGrain) journaled(ctx context.Context, g grain.Context) bool {
	gc, err := t.callsOf(g)
	if err != nil || gc == nil {
		return false
	}
	ok, err := gc.Journaled(ctx)
	if err != nil {
		g.Logger().Warn("tasks: read the task's durable call", "task", t.id, "err", err)
	}
	return ok
}
