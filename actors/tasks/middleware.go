package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// createResult is a CreateTaskResult as go-sdk sends it: the task grain's
// JSON, as is.
type createResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

// MarshalJSON implements json.Marshaler.
func (r *createResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// Middleware is the go-sdk receiving middleware of the servers that answer
// 2026-07-28 requests (continuation grains): it advertises the extension
// in server/discover and turns a tools/call of a task-supporting tool into
// a task when the request declares the extension (see [Support]). Install
// it inside any middleware that unwraps requestState, so a task gets the
// tool's own state.
func (h *Host) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "server/discover":
			res, err := next(ctx, method, req)
			if d, ok := res.(*mcp.DiscoverResult); ok && err == nil && d.Capabilities != nil {
				d.Capabilities.AddExtension(Extension, nil)
			}
			return res, err
		case "tools/call":
			if params, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				return h.call(ctx, next, method, req, params)
			}
		}
		return next(ctx, method, req)
	}
}

// call serves a tools/call: in its request, or as a new task.
func (h *Host) call(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request, params *mcp.CallToolParamsRaw) (mcp.Result, error) {
	sup := h.cfg.Support(params.Name)
	if sup.Mode == None {
		return next(ctx, method, req)
	}
	if !declared(params.Meta) {
		if sup.Mode == Required {
			e := missingCapability("tool " + params.Name)
			return nil, &jsonrpc.Error{Code: int64(e.Code), Message: e.Message, Data: e.Data}
		}
		return next(ctx, method, req)
	}
	if sup.AfterInput && len(params.InputResponses) == 0 {
		return next(ctx, method, req) // an input-gathering round: answered in its request
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("tasks: encode the call: %w", err)
	}
	var p *pb.Principal
	var hdr http.Header
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		p, hdr = exchange.PrincipalOf(ex.Header), ex.Header
	}
	reply, err := h.cfg.Cluster.Request(ctx, KindName, newID(), &pb.TaskStart{Principal: p, Params: raw, TraceContext: startContext(ctx, hdr)},
		grain.Idempotent())
	if err != nil {
		return nil, &jsonrpc.Error{Code: exchange.CodeServerError, Message: "tasks: the task could not be created; retry: " + err.Error()}
	}
	started, ok := reply.(*pb.TaskStarted)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("tasks: unexpected reply %T", reply)}
	}
	return &createResult{raw: started.GetResult()}, nil
}

// newID is a new task id: 128 random bits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return exchange.TaskIDPrefix + hex.EncodeToString(b[:])
}
