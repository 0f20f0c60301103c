package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Role is the role inspection needs.
const Role = auth.RoleAdmin

// requestTimeout bounds one inspection.
const requestTimeout = 10 * time.Second

// HTTPOptions configure the inspection routes.
type HTTPOptions struct {
	// Auth authenticates callers (required).
	Auth *auth.Authenticator
	// Limiter rate-limits callers per principal (nil: unlimited).
	Limiter *auth.Limiter
	// Logger logs failures. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock tasks' expiry is judged by. Default time.Now.
	Now func() time.Time
}

// Register adds the inspection routes to mux:
//
//	GET /api/inspect/sessions/{id}     a session (Session)
//	GET /api/inspect/tasks/{id}        a task (Task)
//	GET /api/inspect/executions/{id}   a paused execution with its session (Execution)
//	GET /api/inspect/handles/{user}    the live handles of a user of the caller's organization (Handles)
//
// Only an admin of the organization that owns the session, task or
// execution may inspect it: 401 without credentials; every other caller
// (another role, another organization) gets the answer an unknown id gets,
// 404 {"error": "not_found"}, so an answer reveals nothing. An admin
// lists the handles of its own organization's users only (a user of
// another organization is one of its own that holds none); anyone else
// gets 404 as well. 503 when the store or the owner node does not answer.
func Register(mux *http.ServeMux, in Inspector, o HTTPOptions) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	route := func(get func(ctx context.Context, id string) (any, string, error)) http.Handler {
		return gateway.Authenticated(o.Auth, o.Limiter, func(w http.ResponseWriter, r *http.Request, p *pb.Principal) {
			serve(w, r, p, o.Logger, get)
		})
	}
	mux.Handle("GET /api/inspect/sessions/{id}", route(func(ctx context.Context, id string) (any, string, error) {
		s, err := in.Session(ctx, id)
		return s, s.Org, err
	}))
	mux.Handle("GET /api/inspect/tasks/{id}", route(func(ctx context.Context, id string) (any, string, error) {
		t, err := in.Task(ctx, id, o.Now())
		return t, t.Org, err
	}))
	mux.Handle("GET /api/inspect/executions/{id}", route(func(ctx context.Context, id string) (any, string, error) {
		e, err := in.Execution(ctx, id)
		return e, e.Org, err
	}))
	mux.Handle("GET /api/inspect/handles/{id}", gateway.Authenticated(o.Auth, o.Limiter, func(w http.ResponseWriter, r *http.Request, p *pb.Principal) {
		serve(w, r, p, o.Logger, func(ctx context.Context, user string) (any, string, error) {
			h, err := in.Handles(ctx, p.GetOrg(), user) // the caller's organization only
			return h, p.GetOrg(), err
		})
	}))
}

// serve answers one inspection for principal p.
func serve(w http.ResponseWriter, r *http.Request, p *pb.Principal, log *slog.Logger, get func(ctx context.Context, id string) (any, string, error)) {
	if !Allowed(p, "") {
		notFound(w) // before any lookup: a non-admin learns nothing, not even timing
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	v, org, err := get(ctx, r.PathValue("id"))
	switch {
	case errors.Is(err, ErrNotFound):
		notFound(w)
	case err != nil:
		log.Warn("inspect", "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "message": "the store or the owner node did not answer; retry"})
	case p.GetOrg() != org:
		notFound(w)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// Allowed reports whether p may inspect what belongs to organization org
// (org "": whether p may inspect anything): an admin of that organization.
func Allowed(p *pb.Principal, org string) bool {
	return p.GetRole() == Role && (org == "" || p.GetOrg() == org)
}

// notFound is the one answer for an unknown id and for a caller who may
// not inspect it.
func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "nothing to inspect by that id for you"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
