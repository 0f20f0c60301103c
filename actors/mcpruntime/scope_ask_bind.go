package mcpruntime

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// BindGrainCalls returns the receiving middleware of a server that grains
// keeping durable tool calls share (continuations, tasks): it binds each
// tools/call to its grain's calls ([GrainCalls.Bind]), so that Step and
// Ask work in the handler. lookup finds the calls of the grain the request
// belongs to (by its exchange.SessionOf: the grain's id); a request
// with none (another method, no header, a grain without durable calls on
// this node) is served as it is. A failed Bind answers the error mapErr
// makes of it, and the handler does not run.
func BindGrainCalls(lookup func(grain string) (*GrainCalls, bool), mapErr func(error) error) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctr, ok := req.(*mcp.CallToolRequest)
			if !ok || ctr.Extra == nil || ctr.Extra.Header == nil {
				return next(ctx, method, req)
			}
			gc, ok := lookup(exchange.SessionOf(ctr.Extra.Header))
			if !ok {
				return next(ctx, method, req)
			}
			bound, finish, err := gc.Bind(ctx, ctr)
			if err != nil {
				return nil, mapErr(err)
			}
			res, err := next(bound, method, req)
			finish(ctx.Err() != nil)
			return res, err
		}
	}
}

// GrainCallsIn is a lookup for [BindGrainCalls] over a map of grain ids to
// their *GrainCalls (a sync.Map's Load).
func GrainCallsIn(load func(key any) (any, bool)) func(grain string) (*GrainCalls, bool) {
	return func(grain string) (*GrainCalls, bool) {
		v, ok := load(grain)
		if !ok {
			return nil, false
		}
		gc, ok := v.(*GrainCalls)
		return gc, ok
	}
}
