package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// request is a tasks/* JSON-RPC request.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta           map[string]any             `json:"_meta"`
		TaskID         json.RawMessage            `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	} `json:"params"`
}

// reply is the HTTP answer to a tasks/* request.
type reply struct {
	status int
	body   []byte
}

func errorReply(status int, id json.RawMessage, e *rpcError) reply {
	var data any
	if len(e.Data) > 0 {
		data = e.Data
	}
	return reply{status: status, body: exchange.ErrorBodyData(id, e.Code, e.Message, data)}
}

func resultReply(id json.RawMessage, result any) reply {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		return errorReply(http.StatusOK, id, &rpcError{Code: jsonrpc.CodeInternalError, Message: "tasks: encode the result: " + err.Error()})
	}
	return reply{status: http.StatusOK, body: b}
}

// ack is the answer to tasks/update and tasks/cancel: no task fields
// (the task's state is read with tasks/get).
var ack = map[string]any{"resultType": "complete"}

// notFound answers an unknown task id — and a task of another principal,
// alike, so nothing about other principals' tasks leaks.
func notFound(id json.RawMessage) reply {
	return errorReply(http.StatusOK, id, &rpcError{Code: jsonrpc.CodeInvalidParams, Message: "task not found"})
}

// serve answers a tasks/* request in the grain's turn and sends the
// answer through the exchange.
func (t *taskGrain) serve(ctx context.Context, g grain.Context, m *pb.HttpExchange) (proto.Message, error) {
	r, err := exchange.Request(m)
	if err != nil {
		return nil, grain.Reject("tasks: %v", err)
	}
	rep := t.answer(ctx, g, r, m.GetPrincipal())
	answer := g.Defer()
	started := &pb.ExchangeStarted{Status: pb.SessionReply_STATUS_OK, Node: g.Node(), GrainAddress: g.Self().GetAddress(), GrainId: g.Self().GetId()}
	_, err = exchange.Start(ctx, g.ActorSystem(), g.Self(), m, "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		_, _ = w.Write(append(rep.body, '\n'))
	}, exchange.AckWith(answer, started))
	if err != nil {
		answer(nil, grain.Reject("tasks: %v", err))
	}
	return nil, nil
}

// answer is the extension's JSON-RPC handling: the checks every tasks/*
// request passes (method, Mcp-Name header, declared extension, a task of
// the caller's), then tasks/get, tasks/update or tasks/cancel.
func (t *taskGrain) answer(ctx context.Context, g grain.Context, r *http.Request, p *pb.Principal) reply {
	body, err := io.ReadAll(r.Body)
	var req request
	if err != nil || json.Unmarshal(body, &req) != nil {
		return errorReply(http.StatusBadRequest, nil, &rpcError{Code: exchange.CodeParseError, Message: "tasks: the body is not a JSON-RPC request"})
	}
	if !IsMethod(req.Method) {
		return errorReply(http.StatusOK, req.ID, &rpcError{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + req.Method})
	}
	var taskID string
	if json.Unmarshal(req.Params.TaskID, &taskID) != nil || taskID == "" {
		return errorReply(http.StatusOK, req.ID, &rpcError{Code: jsonrpc.CodeInvalidParams, Message: req.Method + ": params.taskId must be a non-empty string"})
	}
	if name := strings.TrimSpace(r.Header.Get("Mcp-Name")); name != taskID {
		return errorReply(http.StatusBadRequest, req.ID, &rpcError{Code: mcp.CodeHeaderMismatch, Message: "the Mcp-Name header must name params.taskId"})
	}
	if !declared(req.Params.Meta) {
		return errorReply(http.StatusOK, req.ID, missingCapability(req.Method))
	}
	if t.task == nil || taskID != t.id || t.task.User != p.GetUser() || t.task.Org != p.GetOrg() || !t.h.cfg.Now().Before(t.task.Expires) {
		return notFound(req.ID)
	}
	switch req.Method {
	case MethodGet:
		return resultReply(req.ID, detailed(*t.task))
	case MethodCancel:
		return t.cancelTask(ctx, g, req.ID)
	default:
		return t.update(ctx, g, req.ID, req.Params.InputResponses, p)
	}
}

// cancelTask cancels the task and stops its work; a terminal task is
// left as it is (the same ack).
func (t *taskGrain) cancelTask(ctx context.Context, g grain.Context, id json.RawMessage) reply {
	if Status(t.task.Status).Terminal() {
		return resultReply(id, ack)
	}
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
		t.round++ // the cut run's outcome is dropped
	}
	waiting, asked := Status(t.task.Status) == InputRequired, t.question()
	next := *t.task
	next.StatusMessage = "cancelled by the client"
	if err := t.transition(ctx, g, next, Cancel, 0); err != nil {
		return t.storeError(id, err)
	}
	if waiting && t.h.cfg.CodeMode != nil && isCodeTool(t.task.Params) {
		t.settleExecution(g)
	}
	if asked != "" {
		t.withdrawAsk(ctx, g, asked)
	}
	return resultReply(id, ack)
}

// update records the input responses of p that answer pending input
// requests (others are ignored); once none is pending, the tool runs its
// next round, with p's role as its authority (see roundPrincipal). The
// pending requests of a code-mode task are a paused execution's approval:
// answering them is a decision, which takes a role that may decide
// (Config.MayDecide, the node's --approvers) as on every other surface.
// A caller who may not is refused and nothing changes: the task still
// waits for input, and an approver can decide it.
func (t *taskGrain) update(ctx context.Context, g grain.Context, id json.RawMessage, given map[string]json.RawMessage, p *pb.Principal) reply {
	if t.decides(given) && !t.h.cfg.MayDecide(p.GetRole()) {
		return errorReply(http.StatusOK, id, insufficientRole(p.GetRole(), t.pausedExecution()))
	}
	if _, err := t.respond(ctx, g, given, p.GetRole()); err != nil {
		return t.storeError(id, err)
	}
	return resultReply(id, ack)
}

// decides reports whether given would decide the task's paused execution:
// the task is code mode's or waits for an SDK handler's Ask, waits for
// input, and given answers a pending request.
func (t *taskGrain) decides(given map[string]json.RawMessage) bool {
	if !(isCodeTool(t.task.Params) || t.question() != "") || Status(t.task.Status) != InputRequired {
		return false
	}
	var pending map[string]json.RawMessage
	_ = json.Unmarshal([]byte(t.task.InputRequests), &pending)
	for k := range given {
		if _, ok := pending[k]; ok {
			return true
		}
	}
	return false
}

// insufficientRole is the error of a tasks/update whose caller's role may
// not decide the task's paused execution execID: -32003 with data
// {reason: "insufficient_role", role, executionId}.
func insufficientRole(role, execID string) *rpcError {
	shown := role
	if shown == "" {
		shown = "none"
	}
	data, _ := json.Marshal(map[string]string{"reason": "insufficient_role", "role": role, "executionId": execID})
	return &rpcError{
		Code: exchange.CodeForbidden,
		Message: fmt.Sprintf("tasks/update: your role (%s) may not decide paused executions; nothing was decided and the task "+
			"still waits for input. Ask an approver of your organization to decide execution %s (on /approve/%s, the inbox, "+
			"the HTTP API, gRPC or the CLI); tasks/get then shows the outcome.", shown, execID, execID),
		Data: data,
	}
}

// respond applies input responses given by a principal with role to a
// task waiting for input and reports whether any answered a pending
// request. The role is recorded with the responses: it is the authority
// of the round that carries them (see roundPrincipal).
func (t *taskGrain) respond(ctx context.Context, g grain.Context, given map[string]json.RawMessage, role string) (bool, error) {
	if Status(t.task.Status) != InputRequired {
		return false, nil
	}
	var pending, responses map[string]json.RawMessage
	_ = json.Unmarshal([]byte(t.task.InputRequests), &pending)
	_ = json.Unmarshal([]byte(t.task.InputResponses), &responses)
	if responses == nil {
		responses = map[string]json.RawMessage{}
	}
	answered := false
	for k, v := range given {
		if _, ok := pending[k]; ok {
			responses[k] = v
			delete(pending, k)
			answered = true
		}
	}
	if !answered {
		return false, nil
	}
	next := *t.task
	pj, _ := json.Marshal(pending)
	rb, _ := json.Marshal(responses)
	next.InputRequests, next.InputResponses, next.ResponderRole = string(pj), string(rb), role
	if len(pending) > 0 {
		return true, t.save(ctx, g, next)
	}
	next.InputRequests = ""
	if err := t.transition(ctx, g, next, InputComplete, 0); err != nil {
		return true, err
	}
	t.launch(ctx, g, json.RawMessage(rb))
	return true, nil
}

// save records the task without a status change.
func (t *taskGrain) save(ctx context.Context, g grain.Context, next taskstore.Task) error {
	return t.write(ctx, g, next, 0)
}

// storeError answers a request whose write failed.
func (t *taskGrain) storeError(id json.RawMessage, err error) reply {
	msg := "tasks: the task could not be recorded; retry"
	if errors.Is(err, store.ErrFenced) || errors.Is(err, taskstore.ErrTaskChanged) {
		msg = "tasks: the task moved to another node; retry"
	}
	return errorReply(http.StatusServiceUnavailable, id, &rpcError{Code: exchange.CodeServerError, Message: msg})
}
