// Package codemode is the MCP face of the execution engine: the `execute`
// and `resume` tools, with executor's three elicitation modes and the
// sessionless (2026-07-28) multi-round-trip form.
//
//   - model (default): a pause returns waiting_for_interaction; the model asks
//     the user and calls resume{executionId, action, content}.
//   - browser (?elicitation_mode=browser): a pause returns
//     user_approval_required with an approval URL; the model calls
//     resume{executionId}, which waits for the human's decision on the page
//     (or any approval surface).
//   - native (?elicitation_mode=native): the server asks the client directly
//     with an elicitation and continues.
//   - 2026-07-28 clients: a pause is an input_required result with an
//     "approval" elicitation input request; the client's retry (with the
//     sealed requestState) resumes it.
package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
)

// Runtime is what the tools need from the session runtime.
type Runtime interface {
	// Engine runs the session's executions.
	Engine() *engine.Engine
	// WaitDecision waits (bounded by ctx) for a human decision recorded
	// for execID by an approval surface, and consumes it; only for a
	// caller with access a to the pause (no wait otherwise).
	WaitDecision(ctx context.Context, execID string, a engine.Access) (engine.Response, bool)
	// DecidedOutcome is what execID came to for a caller with access a
	// (engine.Engine.Outcome), after waiting (bounded by ctx) for a
	// decision an approval surface took that is still being applied;
	// found is false when it has no outcome.
	DecidedOutcome(ctx context.Context, execID string, a engine.Access) (engine.Outcome, bool)
	// Forward resumes execID in the session that owns it, for caller who
	// (cross-session resume). A nil result comes with the miss to report.
	Forward(ctx context.Context, execID string, who engine.Principal, resp engine.Response) (*mcp.CallToolResult, Miss)
}

// Options configure the tools.
type Options struct {
	// Runtime is the runtime of a server that serves one grain's requests.
	Runtime Runtime
	// RuntimeOf finds the runtime of a request on a server that serves
	// many grains (a node's shared session server): ok is false if it has
	// none. One of Runtime and RuntimeOf is required.
	RuntimeOf func(req *mcp.CallToolRequest) (rt Runtime, ok bool)
	// Window is the approval window (for texts; zero:
	// engine.DefaultApprovalWindow).
	Window time.Duration
	// Sources lists the tool sources for the execute description.
	Sources []string
	// API, if set, is the TypeScript declarations of the sources'
	// operations (tools.Declarations) that the execute description
	// carries.
	API string
	// PublicURL overrides the origin of approval URLs (default: the
	// request's host).
	PublicURL string
	// Logger logs internal failures under their correlation id.
	Logger *slog.Logger
	// Approvers is who may decide a pause in the MCP session itself (the
	// model's resume with an action, a native elicitation's answer, a
	// 2026-07-28 retry), as on the approval surfaces. Default
	// policy.ApproversMember (viewers never decide).
	Approvers policy.Approvers
}

type executeInput struct {
	Code string `json:"code" jsonschema:"TypeScript to run; it may await tools.* calls and return a value"`
}

type resumeInput struct {
	ExecutionID string `json:"executionId" jsonschema:"the executionId of the paused execution"`
	Action      string `json:"action,omitempty" jsonschema:"accept, decline or cancel (model mode); omit in browser mode to wait for the user's decision"`
	Content     string `json:"content,omitempty" jsonschema:"form content as a JSON object string (default {})"`
}

// Register adds execute and resume to server.
func Register(server *mcp.Server, o Options) {
	if o.Window <= 0 {
		o.Window = engine.DefaultApprovalWindow
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t := &tools{o: o}
	mcp.AddTool(server, &mcp.Tool{Name: "execute", Description: ExecuteDescription(o.Sources, o.API)}, t.execute)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "resume",
		Description: "Resume a paused execution: with action accept/decline/cancel after asking the user (model mode), or without action to wait for the user's decision in the browser (browser mode).",
	}, t.resume)
}

// ExecuteDescription is the execute tool's description: how to call the
// sources, their names, and api (TypeScript declarations of their
// operations; may be empty) in a ts code block.
func ExecuteDescription(sources []string, api string) string {
	desc := "Execute TypeScript in a sandboxed runtime. Call APIs as `await tools.<source>.<operation>(args)`; " +
		"find them with `await tools.search({query})` and `await tools.describe({path})`; `emit(value)` shows output; `return` a value. " +
		"Calls that change things may pause for the user's approval."
	if len(sources) > 0 {
		desc += "\n\n## Available integrations\n- " + strings.Join(sources, "\n- ")
	}
	if api != "" {
		desc += "\n\n## API\n```ts\n" + api + "```"
	}
	return desc
}

type tools struct{ o Options }

// errNoRuntime answers a call whose session runtime is gone (disposed
// while the call arrived): the client retries, and the next runtime
// serves it.
var errNoRuntime = &jsonrpc.Error{Code: exchange.CodeServerError, Message: exchange.MessageRestarting}

// runtime is the runtime serving req.
func (t *tools) runtime(req *mcp.CallToolRequest) (Runtime, error) {
	if t.o.RuntimeOf == nil {
		return t.o.Runtime, nil
	}
	if rt, ok := t.o.RuntimeOf(req); ok {
		return rt, nil
	}
	return nil, errNoRuntime
}

func header(req *mcp.CallToolRequest) http.Header {
	if req.Extra == nil || req.Extra.Header == nil {
		return http.Header{}
	}
	return req.Extra.Header
}

func principal(req *mcp.CallToolRequest) engine.Principal {
	p := exchange.PrincipalOf(header(req))
	return engine.Principal{User: p.GetUser(), Org: p.GetOrg(), Role: p.GetRole()}
}

func (t *tools) execute(ctx context.Context, req *mcp.CallToolRequest, in executeInput) (*mcp.CallToolResult, any, error) {
	rt, err := t.runtime(req)
	if err != nil {
		return nil, nil, err
	}
	e := rt.Engine()
	if exchange.CallerOf(header(req)).Sessionless && req.Params.RequestState != "" {
		// A 2026-07-28 retry: the (verified, unwrapped) state is the
		// execution id; the approval input response is the decision.
		owner := engine.AsOwner(principal(req))
		if out, found := rt.DecidedOutcome(ctx, req.Params.RequestState, owner); found {
			// Decided already — on an approval surface (the pause is in
			// the directory; a decision still on its way to the execution
			// is waited for), or by an earlier retry: what it came to,
			// whatever this retry answers and whoever may decide.
			return t.answer(ctx, req, rt, out, false, sourceExecute)
		}
		resp := responseFromInput(req.Params.InputResponses)
		if who := principal(req); !t.clientMayDecide(who.Role) {
			return InsufficientRole(req.Params.RequestState, who.Role, t.approvalURL(req, req.Params.RequestState)), nil, nil
		}
		out, found := e.Resume(ctx, req.Params.RequestState, owner, resp)
		if !found && e.RestorePaused(ctx, req.Params.RequestState, owner) {
			// A durable pause of this grain that its activation does not
			// hold (passivated, restarted or moved since): replayed now.
			out, found = e.Resume(ctx, req.Params.RequestState, owner, resp)
		}
		if !found {
			return ResumeMiss(t.miss(e, req.Params.RequestState, owner), req.Params.RequestState, t.o.Window), nil, nil
		}
		return t.answer(ctx, req, rt, out, false, sourceExecute)
	}
	code := strings.TrimSpace(in.Code)
	if code == "" {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: code must not be empty"}}}, nil, nil
	}
	return t.answer(ctx, req, rt, e.ExecuteWithPause(ctx, code, principal(req)), true, sourceExecute)
}

func responseFromInput(in mcp.InputResponseMap) engine.Response {
	if r, ok := in["approval"].(*mcp.ElicitResult); ok && r != nil {
		return engine.Response{Action: r.Action, Content: r.Content}
	}
	return engine.Response{Action: engine.Cancel}
}

func (t *tools) miss(e *engine.Engine, id string, a engine.Access) Miss {
	if e.IsSettled(id, a) {
		return AlreadySettled
	}
	return NotFound
}

func (t *tools) resume(ctx context.Context, req *mcp.CallToolRequest, in resumeInput) (*mcp.CallToolResult, any, error) {
	id := strings.TrimSpace(in.ExecutionID)
	if id == "" {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: executionId is required"}}}, nil, nil
	}
	rt, err := t.runtime(req)
	if err != nil {
		return nil, nil, err
	}
	e := rt.Engine()
	who := principal(req)
	owner := engine.AsOwner(who)
	var resp engine.Response
	source := sourceResume
	if in.Action == "" {
		// Browser mode: wait for the user's decision on an approval surface.
		source = sourceBrowserResume
		wctx, cancel := context.WithTimeout(ctx, t.o.Window+time.Second)
		endWait := startBrowserWait(ctx, id)
		r, ok := rt.WaitDecision(wctx, id, owner)
		endWait(ok)
		cancel()
		if !ok {
			// No decision: the outcome of one being applied or settled, the
			// pause still waiting, or the miss. Never decide (a replay
			// bringing a dormant pause back may be about to take a
			// decision) and never forward: there is no decision to send.
			if out, found := e.Outcome(ctx, id, owner); found {
				return t.answer(ctx, req, rt, out, false, source)
			}
			if _, live := e.Paused(id, owner); live {
				traceUserApprovalRequired(ctx, id)
				return UserApprovalRequired(id, t.approvalURL(req, id)), nil, nil
			}
			return ResumeMiss(t.miss(e, id, owner), id, t.o.Window), nil, nil
		}
		resp = r
	} else {
		switch in.Action {
		case engine.Accept, engine.Decline, engine.Cancel:
		default:
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: action must be accept, decline or cancel"}}}, nil, nil
		}
		if !t.clientMayDecide(who.Role) {
			return InsufficientRole(id, who.Role, t.approvalURL(req, id)), nil, nil
		}
		resp = engine.Response{Action: in.Action, Content: parseContent(in.Content)}
	}
	out, found := e.Resume(ctx, id, owner, resp)
	if !found {
		// Settled since Resume looked (its run's journal, written by the
		// grain that ran it, can settle between two reads): its outcome.
		out, found = e.Outcome(ctx, id, owner)
	}
	if found {
		return t.answer(ctx, req, rt, out, false, source)
	}
	if e.IsSettled(id, owner) {
		return ResumeMiss(AlreadySettled, id, t.o.Window), nil, nil
	}
	if res, miss := rt.Forward(ctx, id, who, resp); res != nil {
		return res, nil, nil
	} else if miss != "" {
		return ResumeMiss(miss, id, t.o.Window), nil, nil
	}
	return ResumeMiss(NotFound, id, t.o.Window), nil, nil
}

// parseContent is executor's: "{}" or anything but a JSON object → nil.
func parseContent(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || len(m) == 0 {
		return nil
	}
	return m
}

// clientMayDecide is the public in-band rule (app.InBandFor, what a
// user's Question.ClientMayDecide follows) for a caller with role: code
// mode's pauses always let the session's client decide — the model's
// resume with an action, a native elicitation's answer, a 2026-07-28
// retry — if the role may decide under --approvers.
func (t *tools) clientMayDecide(role string) bool {
	return app.InBandFor(true, role, t.o.Approvers) == app.InBandOpen
}

func (t *tools) approvalURL(req *mcp.CallToolRequest, id string) string {
	return exchange.ApprovalURL(t.o.PublicURL, header(req), id)
}

var confirmSchema = &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}

// render turns an engine outcome into the tool result for the request's
// mode.
func (t *tools) render(ctx context.Context, req *mcp.CallToolRequest, rt Runtime, out engine.Outcome) *mcp.CallToolResult {
	for {
		if res, done := Finished(out, t.o.Logger); done {
			return res
		}
		p := out.Pause
		c := exchange.CallerOf(header(req))
		switch {
		case c.Sessionless:
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"approval": &mcp.ElicitParams{Message: p.Message, RequestedSchema: confirmSchema}},
				RequestState:  p.ID,
			}
		case c.Mode == "native" && !t.clientMayDecide(c.Role):
			// The user of this session may not decide: an approver does,
			// on an approval surface.
			return PausedBrowser(p, t.approvalURL(req, p.ID))
		case c.Mode == "native":
			// The public API's Elicit (what a user's tool asks with), in
			// its stateful form: native elicitation on the session.
			res, err := app.Elicit(ctx, req, "approval", p.Message, confirmSchema)
			if err != nil {
				out, _ = rt.Engine().Resume(ctx, p.ID, engine.AsOwner(principal(req)), engine.Response{Action: engine.Cancel, Reason: "elicitation failed"})
				return &mcp.CallToolResult{IsError: true,
					Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Error: Native elicitation transport failed [%s]. Reconnect the MCP client and try again.", p.ID[len(p.ID)-8:])}},
					StructuredContent: map[string]any{"status": "error", "errorCode": "native_elicitation_transport_failed"},
				}
			}
			owner := engine.AsOwner(principal(req))
			next, found := rt.Engine().Resume(ctx, p.ID, owner, engine.Response{Action: res.Action, Content: res.Content})
			if !found {
				// The execution is gone (the engine shut down while the
				// client answered): report the miss.
				return ResumeMiss(t.miss(rt.Engine(), p.ID, owner), p.ID, t.o.Window)
			}
			out = next
			continue
		case c.Mode == "browser":
			return PausedBrowser(p, t.approvalURL(req, p.ID))
		default:
			return PausedModel(p, t.o.Window)
		}
	}
}

// answer is the tool's answer to out: its rendering for the request's
// mode, or the restart envelope's JSON-RPC error for an execution stopped
// because its session moved on (a journal write fenced by a newer
// activation: the journal as the new owner holds it is the truth, and the
// retry reaches that owner) or, on a fresh execute, because its store was
// unreachable (nothing of it is durable; a retry runs it again). The
// client is told to retry, as for any request a move cut short, instead of
// getting an opaque internal error. A resume stopped by an unreachable
// store keeps the internal error: its outcome is what a retry would
// replay here, so a retry could never succeed.
func (t *tools) answer(ctx context.Context, req *mcp.CallToolRequest, rt Runtime, out engine.Outcome, fresh bool, source string) (*mcp.CallToolResult, any, error) {
	tracePause(ctx, out, source)
	if out.Status == engine.StatusInternal && (errors.Is(out.Internal, store.ErrFenced) || fresh && store.Unavailable(out.Internal)) {
		t.o.Logger.Info("execution stopped: its session moved on or its store was unreachable; the client is told to retry", "err", out.Internal)
		return nil, nil, &jsonrpc.Error{Code: exchange.CodeServerError, Message: exchange.MessageRestarting}
	}
	return t.render(ctx, req, rt, out), nil, nil
}

// Finished renders an outcome that is not a pause (done false for a
// pause). An internal failure is logged to log under the correlation id
// the result shows.
func Finished(out engine.Outcome, log *slog.Logger) (res *mcp.CallToolResult, done bool) {
	switch out.Status {
	case engine.StatusCompleted:
		return Completed(out), true
	case engine.StatusError:
		return Failed(out), true
	case engine.StatusPaused:
		return nil, false
	}
	res, id := Internal()
	log.Error("execution failed internally", "correlation", id, "err", out.Internal)
	return res, true
}

// RenderModel renders an outcome as model mode does (for a resume forwarded
// from another session, which has no request of its own).
func RenderModel(out engine.Outcome, window time.Duration, log *slog.Logger) *mcp.CallToolResult {
	if res, done := Finished(out, log); done {
		return res
	}
	return PausedModel(out.Pause, window)
}
