package mcpruntime

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// sessionScope is a session runtime as the SDK's handlers see it (an
// app.Scope): the session a request on the shared server belongs to.
type sessionScope struct {
	r         *Runtime
	principal *pb.Principal
}

var _ app.Scope = (*sessionScope)(nil)

// Kind implements app.Scope.
func (s *sessionScope) Kind() string { return app.KindSession }

// ID implements app.Scope: the session id the client knows.
func (s *sessionScope) ID() string { return s.r.id }

// Principal implements app.Scope.
func (s *sessionScope) Principal() *pb.Principal { return s.principal }

// State implements app.Scope. (Durable state is not built yet: docs/sdk.md.)
func (s *sessionScope) State(string) (app.Saved, bool) { return app.Saved{}, false }

// SaveState implements app.Scope. (Durable state is not built yet: docs/sdk.md.)
func (s *sessionScope) SaveState(context.Context, string, app.Saved) error {
	return errors.New("mcpgrain: durable session state is not built yet")
}

// bindScope is the shared server's receiving middleware that binds every
// request of a session to its runtime's scope (app.WithScope), for the
// SDK's calls in the handlers.
func (b *Builder) bindScope(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var h http.Header
		if ex := req.GetExtra(); ex != nil {
			h = ex.Header
		}
		if r, ok := b.runtimeOf(h); ok {
			ctx = app.WithScope(ctx, r.scope)
		}
		return next(ctx, method, req)
	}
}
