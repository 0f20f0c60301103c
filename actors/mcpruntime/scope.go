package mcpruntime

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/session"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// sessionScope is a session runtime as the SDK's handlers see it (an
// app.Scope): the session a request on the shared server belongs to.
type sessionScope struct {
	r         *Runtime
	principal *pb.Principal
	// save stores a value in the session record (the session's
	// BuildInput.AppStateChanged; nil: nothing can be saved).
	save func(name string, s *pb.AppState) error

	mu    sync.Mutex
	saved map[string]app.Saved // the values as last stored (from the record, then each save); nil until there is one
}

// newSessionScope is r's scope, starting from the values in the session
// record. Its map is made with the first value (most sessions store none:
// an empty map was 48 B a resident session).
func newSessionScope(r *Runtime, in session.BuildInput) *sessionScope {
	s := &sessionScope{r: r, principal: in.Principal, save: in.AppStateChanged}
	if len(in.AppState) > 0 {
		s.saved = make(map[string]app.Saved, len(in.AppState))
	}
	for name, v := range in.AppState {
		s.saved[name] = app.Saved{Version: int(v.GetVersion()), Value: v.GetValue()}
	}
	return s
}

var _ app.Scope = (*sessionScope)(nil)

// Kind implements app.Scope.
func (s *sessionScope) Kind() string { return app.KindSession }

// ID implements app.Scope: the session id the client knows.
func (s *sessionScope) ID() string { return s.r.id }

// Principal implements app.Scope.
func (s *sessionScope) Principal() *pb.Principal { return s.principal }

// State implements app.Scope: the value as last stored, from memory.
func (s *sessionScope) State(name string) (app.Saved, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.saved[name]
	return v, ok
}

// SaveState implements app.Scope: the session grain writes the value into
// its record with its fenced commit; once stored, it is the value State
// returns. It writes whatever it is given (the SDK skips unchanged
// encodings). ctx is not consulted: a save handed to the grain completes
// or fails there, bounded by the grain's own timeout.
func (s *sessionScope) SaveState(_ context.Context, name string, v app.Saved) error {
	if s.save == nil {
		return fmt.Errorf("mcpgrain: session %s cannot save state here: %w", s.r.id, app.ErrRetry)
	}
	if v.Version < math.MinInt32 || v.Version > math.MaxInt32 {
		return fmt.Errorf("mcpgrain: state %q: version %d out of range", name, v.Version)
	}
	value := append([]byte(nil), v.Value...)
	if err := s.save(name, &pb.AppState{Version: int32(v.Version), Value: value}); err != nil {
		return fmt.Errorf("mcpgrain: session %s: save state %q: %w (%w)", s.r.id, name, app.ErrRetry, err)
	}
	s.mu.Lock()
	if s.saved == nil {
		s.saved = make(map[string]app.Saved)
	}
	s.saved[name] = app.Saved{Version: v.Version, Value: value}
	s.mu.Unlock()
	return nil
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
