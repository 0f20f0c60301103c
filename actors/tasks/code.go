package tasks

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Code mode as tasks: execute (and resume) run in the task grain on an
// execution engine of its own, journaled under the task grain. A pause
// for approval is the tool's MRTR input request, so the task shows
// input_required with it; tasks/update with the decision runs the tool's
// next round, which resumes the execution — from the engine, or from its
// journal after the grain's activation (or its node) was lost.

// codeTools are the code pack's tools.
var codeTools = map[string]bool{"execute": true, "resume": true}

// isCodeTool reports whether tools/call params call a code-mode tool.
func isCodeTool(params string) bool { return codeTools[toolOf(params)] }

// codeRunner is a task grain's code runtime and the server it runs on.
type codeRunner struct {
	code   *mcpruntime.CodeRuntime
	runner *runner
}

// newCodeRunner builds the code runner of a task grain activation (which
// owns the grain: the journal is fenced by its epoch).
func newCodeRunner(h *Host, g grain.Context) *codeRunner {
	// Publish: the pause is in the execution directory, so every approval
	// surface lists it, and a decision there reaches the task grain
	// (exchange.OwnerKind) like tasks/update.
	journal := engine.StoreJournal{Store: h.cfg.RunStore, Grain: grain.Key(g.Kind(), g.Identity()), Epoch: g.Epoch(), Publish: true}
	code := mcpruntime.NewCodeRuntime(h.cfg.CodeMode, g.Identity(), nil, journal)
	return &codeRunner{code: code, runner: &runner{newServer: func() (*mcp.Server, func(), error) {
		return h.cfg.NewServer(&mcp.ServerOptions{}, code.Register)
	}}}
}

// close ends the grain's executions (a paused one stays in its journal)
// and stops its server.
func (c *codeRunner) close() {
	c.code.Shutdown()
	c.runner.close()
}

// decisionTexts are the confirmations of a decision (as a session's).
var decisionTexts = map[string]string{"accept": "I've accepted it", "decline": "I've declined it", "cancel": "I've cancelled it"}

// decide takes a decision from an approval surface (browser page, HTTP,
// gRPC, CLI) for the task's paused execution: an approver of the task's
// organization answers its pending approval request, as tasks/update
// would, and the execution resumes.
func (t *taskGrain) decide(ctx context.Context, g grain.Context, m *pb.ExecutionDecide) (*pb.ExecutionReply, error) {
	text, ok := decisionTexts[m.GetAction()]
	if !ok {
		return nil, grain.Reject("tasks: action must be accept, decline or cancel")
	}
	if t.task != nil && !isCodeTool(t.task.Params) && t.h.cfg.Calls != nil && t.h.cfg.Now().Before(t.task.Expires) {
		return t.decideAsk(ctx, g, m, text) // an SDK handler's Ask (calls.go)
	}
	// Only a code-mode task's pause (or an Ask's) is an execution (in the
	// directory); the input requests of other tools are the client's to
	// answer.
	if t.task == nil || t.task.Org != m.GetPrincipal().GetOrg() || !isCodeTool(t.task.Params) || !t.h.cfg.Now().Before(t.task.Expires) {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}, nil
	}
	if !t.h.cfg.MayDecide(m.GetPrincipal().GetRole()) {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_FORBIDDEN}, nil
	}
	var pending map[string]json.RawMessage
	_ = json.Unmarshal([]byte(t.task.InputRequests), &pending)
	content := json.RawMessage(m.GetContentJson())
	if len(content) == 0 {
		content = json.RawMessage(`{}`)
	}
	answer, err := json.Marshal(map[string]any{"action": m.GetAction(), "content": content})
	if err != nil {
		return nil, grain.Reject("tasks: decision content: %v", err)
	}
	given := map[string]json.RawMessage{}
	for k := range pending {
		given[k] = answer
	}
	// The round that carries the decision runs with the decider's role:
	// its authority, checked here (an admin's decision on a viewer's task
	// is the admin's, not the viewer's).
	answered, err := t.respond(ctx, g, given, m.GetPrincipal().GetRole())
	if err != nil {
		return nil, err
	}
	if !answered {
		return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_ALREADY_DECIDED}, nil
	}
	return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, Text: text}, nil
}

// settleExecution cancels the paused execution of a cancelled code-mode
// task, so it ends and leaves the approval surfaces (its journal settles
// its directory row). Cancelling a task is its owner's right whatever the
// owner's role, and not a decision about the paused call: the grain
// cancels the execution itself (engine.System), restoring it from its
// journal if this activation does not hold it, instead of running a round
// as the owner, whose role may not decide.
func (t *taskGrain) settleExecution(g grain.Context) {
	if t.code == nil {
		t.code = newCodeRunner(t.h, g)
	}
	e, id := t.code.code.Engine(), t.task.RequestState
	cancel := engine.Response{Action: engine.Cancel, Reason: "task_cancelled"}
	go func() {
		ctx := context.Background()
		if _, found := e.Resume(ctx, id, engine.System, cancel); !found && e.RestorePaused(ctx, id, engine.System) {
			e.Resume(ctx, id, engine.System, cancel)
		}
	}()
}
