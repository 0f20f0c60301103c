package approvals

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// HTTPOptions configure the HTTP routes and the approval page.
type HTTPOptions struct {
	// Auth authenticates callers (required).
	Auth *auth.Authenticator
	// Limiter rate-limits callers per principal (nil: unlimited).
	Limiter *auth.Limiter
	// PageKey signs the approval page's form tokens; every node behind one
	// address must share it (the cluster's state key). At least 32 bytes.
	PageKey []byte
	// Logger logs failures. Default slog.Default().
	Logger *slog.Logger
	// InboxInterval is how often a live inbox looks at the directory
	// (zero: [DefaultWatchInterval]).
	InboxInterval time.Duration
	// InboxStreamAge ends a live inbox stream (its browser reconnects and
	// is authenticated again). Default 5 min.
	InboxStreamAge time.Duration
	// InboxStreamsPerPrincipal bounds one principal's concurrent live
	// inbox streams on this node (default 4); InboxStreams bounds all of
	// them (default 512). More are refused with 429.
	InboxStreamsPerPrincipal, InboxStreams int
	// Stopping reports that the node is stopping: live inbox streams end
	// (their browsers reconnect) rather than hold up its shutdown. Nil:
	// never.
	Stopping func() bool
}

// maxDecisionBody bounds a decision request body.
const maxDecisionBody = MaxContentBytes + 4<<10

// Register adds the approval routes to mux:
//
//	GET  /api/executions                                   the caller org's paused executions
//	GET  /api/executions/{eid}                             one of them
//	POST /api/executions/{eid}/resume                      decide it: {"action": "accept"|"decline"|"cancel", "content": {...}}
//	GET  /api/mcp-sessions/{sid}/executions/{eid}          as above, checked against the owner session
//	POST /api/mcp-sessions/{sid}/executions/{eid}/resume
//	GET  /approve/{eid}                                    the browser page
//	POST /approve/{eid}                                    its Approve/Decline form
//	POST /approve/{eid}/login                              its token form
//	GET  /approvals                                        the inbox: the caller org's waiting executions and recent decisions
//	POST /approvals/{eid}                                  an inbox entry's Approve/Decline form
//	POST /approvals/login                                  the inbox's token form
//	GET  /approvals/events                                 the inbox's live updates (server-sent events)
//	GET  /approvals/inbox.js                               the inbox's script (live updates; optional)
//
// API errors are JSON {"error": code, "message": text}: 400
// invalid_request, 401 (bearer challenge), 403 insufficient_role (a
// decision by a role that may not decide), 404 execution_not_found, 409
// execution_already_decided, 413 body too large, 415 not JSON, 429
// rate_limited, 503 unavailable.
func Register(mux *http.ServeMux, svc *Service, o HTTPOptions) error {
	if o.Auth == nil || svc == nil {
		return errors.New("approvals: Service and HTTPOptions.Auth are required")
	}
	if len(o.PageKey) < 32 {
		return errors.New("approvals: HTTPOptions.PageKey must be at least 32 bytes")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.InboxInterval <= 0 {
		o.InboxInterval = DefaultWatchInterval
	}
	if o.InboxStreamAge <= 0 {
		o.InboxStreamAge = defaultStreamAge
	}
	a := &api{svc: svc, o: o}
	mux.HandleFunc("GET /api/executions", a.list)
	mux.HandleFunc("GET /api/executions/{eid}", a.get)
	mux.HandleFunc("POST /api/executions/{eid}/resume", a.decide)
	mux.HandleFunc("GET /api/mcp-sessions/{sid}/executions/{eid}", a.get)
	mux.HandleFunc("POST /api/mcp-sessions/{sid}/executions/{eid}/resume", a.decide)
	p := &page{svc: svc, o: o, streams: newStreamLimits(o.InboxStreamsPerPrincipal, o.InboxStreams), feeds: newFeeds(svc, o.InboxInterval, o.Logger)}
	mux.HandleFunc("GET /approve/{eid}", p.show)
	mux.HandleFunc("POST /approve/{eid}", p.decide)
	mux.HandleFunc("POST /approve/{eid}/login", p.login)
	mux.HandleFunc("GET /approvals", p.inbox)
	mux.HandleFunc("POST /approvals/login", p.inboxLogin)
	mux.HandleFunc("POST /approvals/{eid}", p.inboxDecide)
	mux.HandleFunc("GET /approvals/events", p.events)
	mux.HandleFunc("GET /approvals/inbox.js", p.script)
	return nil
}

type api struct {
	svc *Service
	o   HTTPOptions
}

// ExecutionJSON is a paused execution as the HTTP API returns it.
type ExecutionJSON struct {
	ExecutionID  string          `json:"executionId"`
	SessionID    string          `json:"sessionId"`
	Tool         string          `json:"tool"`
	Arguments    json.RawMessage `json:"arguments"`
	Message      string          `json:"message,omitempty"`
	ApprovalText string          `json:"approvalText,omitempty"`
	Deadline     time.Time       `json:"deadline"`
	ExpiresAt    int64           `json:"expiresAt"`
	Owner        OwnerJSON       `json:"owner"`
}

// OwnerJSON names an execution's owner.
type OwnerJSON struct {
	User string `json:"user"`
	Org  string `json:"org"`
}

// ToJSON converts a paused execution for the HTTP API.
func ToJSON(p *pb.PausedExecution) ExecutionJSON {
	args := json.RawMessage(p.GetArgumentsJson())
	if !json.Valid(args) {
		args = json.RawMessage("null")
	}
	return ExecutionJSON{
		ExecutionID: p.GetExecutionId(), SessionID: p.GetSessionId(), Tool: p.GetAddress(), Arguments: args,
		Message: p.GetMessage(), ApprovalText: p.GetApprovalText(),
		Deadline: time.UnixMilli(p.GetDeadlineMs()).UTC(), ExpiresAt: p.GetDeadlineMs(),
		Owner: OwnerJSON{User: p.GetPrincipal().GetUser(), Org: p.GetPrincipal().GetOrg()},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": code, "message": msg})
}

// principal authenticates and rate-limits r, answering the failure itself.
func (a *api) principal(w http.ResponseWriter, r *http.Request) (*pb.Principal, bool) {
	p, err := a.o.Auth.Authenticate(r)
	if err != nil {
		var ae *auth.Error
		if errors.As(err, &ae) {
			if ae.WWWAuthenticate != "" {
				w.Header().Set("WWW-Authenticate", ae.WWWAuthenticate)
			}
			if ae.RetryAfter > 0 {
				w.Header().Set("Retry-After", auth.RetryAfterSeconds(ae.RetryAfter))
			}
			code := ae.Code
			if code == "" {
				code = "unauthorized"
			}
			writeError(w, ae.Status, code, ae.Message)
			return nil, false
		}
		writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
		return nil, false
	}
	if a.o.Limiter != nil {
		if ok, retry := a.o.Limiter.Allow(p); !ok {
			w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
			writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests; retry later")
			return nil, false
		}
	}
	return p, true
}

// fail answers a Service error.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, ErrNotFound.Error(), "no execution with this id is waiting for approval (already decided, timed out, or not in your organization)")
	case errors.Is(err, ErrAlreadyDecided):
		writeError(w, http.StatusConflict, ErrAlreadyDecided.Error(), "this execution was already decided (or timed out)")
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, ErrInvalid.Error(), err.Error())
	case errors.Is(err, ErrInsufficientRole):
		msg := strings.TrimPrefix(err.Error(), ErrInsufficientRole.Error()+": ")
		if c := a.o.Auth.InsufficientRole(a.svc.DecidingRole(), msg); c != "" {
			w.Header().Set("WWW-Authenticate", c) // an OAuth client may ask for the scope
		}
		writeError(w, http.StatusForbidden, ErrInsufficientRole.Error(), msg)
	default:
		a.o.Logger.Warn("approvals: request failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, ErrUnavailable.Error(), "the execution's session could not be reached; retry (a decision may have been recorded: look again first)")
	}
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	who, ok := a.principal(w, r)
	if !ok {
		return
	}
	list, err := a.svc.List(r.Context(), who)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]ExecutionJSON, 0, len(list))
	for _, p := range list {
		out = append(out, ToJSON(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"executions": out})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	who, ok := a.principal(w, r)
	if !ok {
		return
	}
	p, err := a.svc.Get(r.Context(), who, r.PathValue("sid"), r.PathValue("eid"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"execution": ToJSON(p)})
}

// decisionBody is the body of a resume route.
type decisionBody struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

func (a *api) decide(w http.ResponseWriter, r *http.Request) {
	who, ok := a.principal(w, r)
	if !ok {
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, ErrInvalid.Error(), "the body must be application/json")
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDecisionBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, ErrInvalid.Error(), "the body is too large")
			return
		}
		writeError(w, http.StatusBadRequest, ErrInvalid.Error(), "could not read the body")
		return
	}
	var body decisionBody
	if err := json.Unmarshal(data, &body); err != nil {
		writeError(w, http.StatusBadRequest, ErrInvalid.Error(), "the body must be a JSON object {\"action\": \"accept\"|\"decline\"|\"cancel\", \"content\": {...}}")
		return
	}
	d, err := a.svc.Decide(r.Context(), who, r.PathValue("sid"), r.PathValue("eid"), body.Action, body.Content)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
