package systemtest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdkapp "github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The decision-surface table: every way a paused write can be decided ×
// every role × both --approvers settings. A role that may decide gets the
// write run exactly once and its outcome reported; a role that may not is
// refused with a clear insufficient-role answer, nothing runs, and the
// pause is still there — an admin then decides it, which proves it was not
// lost. A new surface is one row of dsSurfaces.

// dsUser is one principal of the table's organization (acme).
type dsUser struct {
	name, role, token string
}

var dsUsers = []dsUser{
	{"ada", "admin", "mcpg_ds_ada_admin_0123456789"},
	{"max", "member", "mcpg_ds_max_member_012345678"},
	{"vic", "viewer", "mcpg_ds_vic_viewer_012345678"},
}

// dsAdmin decides what a refused role left waiting.
var dsAdmin = dsUsers[0]

// dsMayDecide is who may decide under each --approvers setting, as
// docs/approvals.md states it.
var dsMayDecide = map[policy.Approvers]map[string]bool{
	policy.ApproversMember: {"admin": true, "member": true, "viewer": false},
	policy.ApproversAdmin:  {"admin": true, "member": false, "viewer": false},
}

// The ways a paused write comes about.
const (
	dsSession     = "session"     // a stateful session in model mode: execute answers waiting_for_interaction
	dsNative      = "native"      // a stateful session in native mode: execute elicits the decision in-band
	dsSessionless = "sessionless" // a 2026-07-28 client: execute answers an input request with a requestState
	dsTask        = "task"        // a 2026-07-28 client with the tasks extension: the task waits in input_required
	dsSDKTask     = "sdk task"    // an SDK tool run as a task whose handler asks (Ask): the task waits in input_required
	dsSDKLater    = "sdk later"   // an SDK tool of a stateful session that asks without waiting (AskLater); a later call reads it
	// dsSDKLaterModern: AskLater in a 2026-07-28 call (owned by its
	// continuation grain); a later 2026-07-28 call reads it.
	dsSDKLaterModern = "sdk later 2026"
	// dsSDKLaterTask: AskLater in an SDK tool run as a task (owned by the
	// task grain; the task completes with the id); a 2026-07-28 call reads it.
	dsSDKLaterTask = "sdk later task"
	// dsSDKLaterInBand: AskLater in a stateful session, asked with
	// ClientMayDecide: a later call of the asking user may decide it in
	// band (DecideAsk).
	dsSDKLaterInBand = "sdk later in band"
)

// dsSDKWrites counts the writes of the SDK tool (sdk_todo) by title.
var dsSDKWrites sync.Map // title -> *atomic.Int32

// dsSDKPack is an SDK server's pack whose tool sdk_todo, run as a task,
// asks before it "writes" title (a Step counting in dsSDKWrites).
func dsSDKPack() toolpacks.Pack {
	p := toolpacks.NewPack("sdkask", func(s *mcp.Server) {
		dsSDKLaterTools(s)
		mcp.AddTool(s, &mcp.Tool{Name: "sdk_todo"}, func(ctx context.Context, _ *mcp.CallToolRequest, args struct {
			Title string `json:"title"`
		}) (*mcp.CallToolResult, any, error) {
			c, err := sdkapp.CallOf(ctx)
			if err != nil {
				return nil, nil, err
			}
			d, err := c.Ask(ctx, sdkapp.Question{Summary: "Create " + args.Title + "?", Details: map[string]any{"title": args.Title}})
			if err != nil {
				return nil, nil, err
			}
			if !d.Accepted {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "declined"}}}, nil, nil
			}
			if _, err := c.Step(ctx, "write", func(context.Context) (json.RawMessage, error) {
				n, _ := dsSDKWrites.LoadOrStore(args.Title, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				return json.RawMessage(`true`), nil
			}); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created by " + d.By}}}, nil, nil
		})
	})
	p.Tasks = map[string]sdkapp.TaskMode{"sdk_todo": sdkapp.TaskOptional, "sdk_request": sdkapp.TaskOptional}
	return p
}

// dsSDKLaterTools are the pack's tools over AskLater: sdk_request asks
// without waiting to "write" title and answers the question's id;
// sdk_status reads it and, once accepted, writes (once per question).
func dsSDKLaterTools(s *mcp.Server) {
	type request struct {
		ID string `json:"id"`
	}
	var written sync.Map // question id -> struct{}
	mcp.AddTool(s, &mcp.Tool{Name: "sdk_request"}, func(ctx context.Context, _ *mcp.CallToolRequest, args struct {
		Title  string `json:"title"`
		InBand bool   `json:"inBand,omitempty"`
	}) (*mcp.CallToolResult, request, error) {
		l, err := sdkapp.LaterOf(ctx)
		if err != nil {
			return nil, request{}, err
		}
		p, err := l.AskLater(ctx, sdkapp.Question{Summary: "Create " + args.Title + "?", Details: map[string]any{"title": args.Title}, ClientMayDecide: args.InBand})
		return nil, request{ID: p.ID}, err
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sdk_decide"}, func(ctx context.Context, _ *mcp.CallToolRequest, args request) (*mcp.CallToolResult, any, error) {
		d, err := sdkapp.DeciderOf(ctx)
		if err != nil {
			return nil, nil, err
		}
		st, err := d.DecideAsk(ctx, args.ID, sdkapp.Answer{Accept: true})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(st.State) + " by " + st.Decision.By}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sdk_status"}, func(ctx context.Context, _ *mcp.CallToolRequest, args request) (*mcp.CallToolResult, any, error) {
		l, err := sdkapp.LaterOf(ctx)
		if err != nil {
			return nil, nil, err
		}
		st, err := l.AskStatus(ctx, args.ID)
		if err != nil {
			return nil, nil, err
		}
		if st.State != sdkapp.AskDecided || !st.Decision.Accepted {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(st.State)}}}, nil, nil
		}
		if _, done := written.LoadOrStore(args.ID, struct{}{}); !done {
			n, _ := dsSDKWrites.LoadOrStore(fmt.Sprint(st.Details["title"]), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created by " + st.Decision.By}}}, nil, nil
	})
}

// dsPause is one paused write (one case's).
type dsPause struct {
	kind   string
	owner  dsUser
	title  string // the to-do the write creates: one per case
	code   string // the execution's code
	execID string
	cs     *mcp.ClientSession // session, native, sessionless: the owner's client
	taskID string
	state  string // sessionless: the requestState of the pause
	// asked and first are a native pause's: whether the client was asked
	// to decide, and what execute answered.
	asked bool
	first *mcp.CallToolResult
	// outcome is the execution's status as the surface that decided it
	// reported it ("" if the surface does not report it: the owner's side
	// is asked).
	outcome string
}

// dsVerdict is what a surface answered a decision.
type dsVerdict struct {
	decided bool   // the surface said the write was approved
	refused bool   // the surface said the caller's role may not decide
	answer  string // what it said, for failure messages
}

// dsSurface is one decision surface: the pauses it decides and how a
// decider accepts one there.
type dsSurface struct {
	name string
	// pauses are the kinds of pause the surface decides. An in-band
	// surface decides its own kind, as the pause's owner (the agent of the
	// user deciding); an approval surface decides any listed pause of the
	// organization — here a viewer's, so that an allowed decision also
	// proves the decider's authority carries the write, not the owner's.
	pauses []string
	inBand bool
	decide func(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict
}

var dsSurfaces = []dsSurface{
	{"stateful resume", []string{dsSession}, true, dsResume},
	{"native elicitation", []string{dsNative}, true, dsElicitation},
	{"sessionless retry", []string{dsSessionless}, true, dsRetry},
	{"tasks/update", []string{dsTask, dsSDKTask}, true, dsTasksUpdate},
	{"sdk DecideAsk", []string{dsSDKLaterInBand, dsSession}, true, dsDecideAsk},
	{"approval page", []string{dsSession, dsTask, dsSessionless, dsSDKTask, dsSDKLater, dsSDKLaterModern, dsSDKLaterTask}, false, dsPage},
	{"inbox", []string{dsSession, dsTask, dsSessionless, dsSDKTask, dsSDKLater, dsSDKLaterModern, dsSDKLaterTask}, false, dsInbox},
	{"HTTP API", []string{dsSession, dsTask, dsSessionless, dsSDKTask, dsSDKLater, dsSDKLaterModern, dsSDKLaterTask, dsSDKLaterInBand}, false, dsHTTP},
	{"gRPC", []string{dsSession, dsTask, dsSessionless, dsSDKTask, dsSDKLater, dsSDKLaterModern, dsSDKLaterTask}, false, dsGRPC},
	{"CLI", []string{dsSession, dsTask, dsSessionless, dsSDKTask, dsSDKLater, dsSDKLaterModern, dsSDKLaterTask}, false, dsCLI},
}

// For each --approvers setting, every decision surface (in-band resume,
// elicitation, retry, tasks, page, inbox, HTTP API, gRPC, CLI) is tried on
// every kind of pause by every role: only approvers decide, and a refused
// decision leaves the pause for an approver.
func TestEverySurfaceLetsOnlyApproversDecide(t *testing.T) {
	bin := testcluster.Binary(t)
	for _, approvers := range []policy.Approvers{policy.ApproversMember, policy.ApproversAdmin} {
		t.Run("approvers="+string(approvers), func(t *testing.T) {
			n := startDecideNode(t, approvers, bin)
			for _, s := range dsSurfaces {
				for _, kind := range s.pauses {
					for _, decider := range dsUsers {
						name := fmt.Sprintf("%s/%s pause/%s", s.name, kind, decider.role)
						t.Run(name, func(t *testing.T) {
							owner := dsUsers[2] // a viewer's pause: any approver of the organization decides it
							if s.inBand {
								owner = decider
							}
							n.cases++
							title := fmt.Sprintf("ds %s %d", approvers, n.cases)
							p := n.pause(t, kind, owner, title)
							v := s.decide(t, n, p, decider)
							n.check(t, p, v, dsMayDecide[approvers][decider.role])
						})
					}
				}
			}
		})
	}
}

// dsNode is a node of the table, with one --approvers setting.
type dsNode struct {
	info      app.Info
	approvers policy.Approvers
	grpc      pb.ApprovalServiceClient
	bin       string
	cases     int
}

func startDecideNode(t *testing.T, approvers policy.Approvers, bin string) *dsNode {
	t.Helper()
	var entries []auth.Entry
	for _, u := range dsUsers {
		entries = append(entries, auth.Entry{Token: u.token, User: u.name, Org: "acme", Role: u.role})
	}
	keys, err := auth.NewKeys(entries...)
	if err != nil {
		t.Fatal(err)
	}
	info := startCodeNode(t, func(c *app.Config) {
		c.MCP.Keys = keys
		c.MCP.Approvers = approvers
		c.MCP.ExtraPacks = append(c.MCP.ExtraPacks, dsSDKPack())
		c.MCP.Packs = append(c.MCP.Packs, "sdkask")
	})
	return &dsNode{info: info, approvers: approvers, grpc: approvalClient(t, info.GRPCAddr), bin: bin}
}

func (n *dsNode) base() string { return "http://" + n.info.HTTPAddr }

// check asserts a case's verdict and what became of its pause.
func (n *dsNode) check(t *testing.T, p *dsPause, v dsVerdict, allowed bool) {
	t.Helper()
	if allowed {
		if !v.decided || v.refused {
			t.Fatalf("%s (%s) may decide, but the surface answered: %s", p.owner.name, p.owner.role, v.answer)
		}
		if got := n.outcome(t, p); got != "completed" {
			t.Fatalf("after the approval the execution is %q, want completed (surface: %s)", got, v.answer)
		}
		if w := n.writes(t, p.title); w != 1 {
			t.Fatalf("the approved write ran %d times, want once", w)
		}
		return
	}
	if v.decided || !v.refused {
		t.Fatalf("a role that may not decide was not refused: %s", v.answer)
	}
	if w := n.writes(t, p.title); w != 0 {
		t.Fatalf("a refused decision ran the write %d times", w)
	}
	n.stillPaused(t, p)
	n.adminDecides(t, p)
	if got := n.outcome(t, p); got != "completed" {
		t.Fatalf("the admin's approval after the refusal left the execution %q, want completed", got)
	}
	if w := n.writes(t, p.title); w != 1 {
		t.Fatalf("the write ran %d times after the admin's approval, want once", w)
	}
}

// pause makes owner's paused write of kind: code that creates the to-do
// title, paused before the write.
func (n *dsNode) pause(t *testing.T, kind string, owner dsUser, title string) *dsPause {
	t.Helper()
	code := fmt.Sprintf(`const t = await tools.demo.createTodo({title: %q}); return t;`, title)
	p := &dsPause{kind: kind, owner: owner, title: title, code: code}
	switch kind {
	case dsSession:
		p.cs = connectMode(t, n.info.HTTPAddr, owner.token, "")
		res, sc := callTool(t, p.cs, "execute", map[string]any{"code": code})
		if sc["status"] != "waiting_for_interaction" {
			t.Fatalf("execute: %s, want waiting_for_interaction", mcpclient.Text(res))
		}
		p.execID, _ = sc["executionId"].(string)
	case dsNative:
		// The decision is the answer to execute's elicitation, which the
		// client accepts: only a principal that may decide is asked.
		c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				p.asked = true
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
			},
		})
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
			Endpoint:   n.base() + "/mcp?elicitation_mode=native",
			HTTPClient: &http.Client{Transport: mcpclient.Bearer(owner.token, http.DefaultTransport)},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		p.cs = cs
		res, sc := callTool(t, cs, "execute", map[string]any{"code": code})
		p.first = res
		p.execID, _ = sc["executionId"].(string)
	case dsSessionless:
		p.cs = mrtrClient(t, n.info.HTTPAddr, owner.token)
		first, err := p.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": code}})
		if err != nil || !first.NeedsInput() || first.RequestState == "" {
			t.Fatalf("execute: %+v %v, want an input request", first, err)
		}
		p.state = first.RequestState
		p.execID = n.listedExecution(t, "the sessionless pause of "+title, func(e map[string]any) bool {
			args, _ := e["arguments"].(map[string]any)
			return args["title"] == title
		})
	case dsTask:
		a := modernCall(t, n.info.HTTPAddr, owner.token, "tools/call", "execute",
			map[string]any{"name": "execute", "arguments": map[string]any{"code": code}}, true)
		p.taskID, _ = a.Result["taskId"].(string)
		if a.Error != nil || p.taskID == "" {
			t.Fatalf("execute as a task: %+v", a)
		}
		if st := n.waitTask(t, p).Result["status"]; st != "input_required" {
			t.Fatalf("execute task: %v, want input_required", st)
		}
		p.execID = n.taskExecution(t, p.taskID)
	case dsSDKTask:
		a := modernCall(t, n.info.HTTPAddr, owner.token, "tools/call", "sdk_todo",
			map[string]any{"name": "sdk_todo", "arguments": map[string]any{"title": title}}, true)
		p.taskID, _ = a.Result["taskId"].(string)
		if a.Error != nil || p.taskID == "" {
			t.Fatalf("sdk_todo as a task: %+v", a)
		}
		if st := n.waitTask(t, p).Result["status"]; st != "input_required" {
			t.Fatalf("sdk_todo task: %v, want input_required", st)
		}
		p.execID = n.taskExecution(t, p.taskID)
	case dsSDKLater, dsSDKLaterInBand:
		p.cs = connectMode(t, n.info.HTTPAddr, owner.token, "")
		res, sc := callTool(t, p.cs, "sdk_request", map[string]any{"title": title, "inBand": kind == dsSDKLaterInBand})
		if p.execID, _ = sc["id"].(string); p.execID == "" {
			t.Fatalf("sdk_request: %s, want the question's id", mcpclient.Text(res))
		}
	case dsSDKLaterModern:
		p.cs = mrtrClient(t, n.info.HTTPAddr, owner.token)
		res, sc := callTool(t, p.cs, "sdk_request", map[string]any{"title": title})
		if p.execID, _ = sc["id"].(string); p.execID == "" {
			t.Fatalf("sdk_request in the 2026-07-28 era: %s, want the question's id", mcpclient.Text(res))
		}
	case dsSDKLaterTask:
		a := modernCall(t, n.info.HTTPAddr, owner.token, "tools/call", "sdk_request",
			map[string]any{"name": "sdk_request", "arguments": map[string]any{"title": title}}, true)
		p.taskID, _ = a.Result["taskId"].(string)
		if a.Error != nil || p.taskID == "" {
			t.Fatalf("sdk_request as a task: %+v", a)
		}
		done := n.waitTask(t, p)
		res, _ := done.Result["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if p.execID, _ = sc["id"].(string); done.Result["status"] != "completed" || p.execID == "" {
			t.Fatalf("sdk_request task: %v, want completed with the question's id", done.Result)
		}
		p.cs = mrtrClient(t, n.info.HTTPAddr, owner.token)
	default:
		t.Fatalf("unknown pause kind %q", kind)
	}
	return p
}

// taskExecution is the id of task taskID's paused execution, as the
// approval surfaces list it.
func (n *dsNode) taskExecution(t *testing.T, taskID string) string {
	t.Helper()
	return n.listedExecution(t, "task "+taskID+"'s pause", func(e map[string]any) bool { return e["sessionId"] == taskID })
}

// listedExecution is the id of the execution the approval API lists that
// is (what names it) the one match picks.
func (n *dsNode) listedExecution(t *testing.T, what string, match func(map[string]any) bool) string {
	t.Helper()
	r := api(t, "GET", n.base()+"/api/executions", dsAdmin.token, "")
	list, _ := r.body["executions"].([]any)
	for _, e := range list {
		if m, _ := e.(map[string]any); match(m) {
			id, _ := m["executionId"].(string)
			return id
		}
	}
	t.Fatalf("%s is not listed: %d %v", what, r.status, r.body)
	return ""
}

// waitTask polls task p as its owner until it leaves working.
func (n *dsNode) waitTask(t *testing.T, p *dsPause) rpcAnswer {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := taskCall(t, n.info.HTTPAddr, p.owner.token, "tasks/get", p.taskID)
		if st, _ := a.Result["status"].(string); st != "working" || time.Now().After(deadline) {
			return a
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outcome is the execution's status once decided: as the surface reported
// it, or as its owner learns it (the session's resume, the task's result).
func (n *dsNode) outcome(t *testing.T, p *dsPause) string {
	t.Helper()
	if p.outcome != "" {
		return p.outcome
	}
	switch p.kind {
	case dsSession, dsNative:
		res, sc := callTool(t, p.cs, "resume", map[string]any{"executionId": p.execID})
		if st, _ := sc["status"].(string); st != "completed" {
			return st + ": " + mcpclient.Text(res)
		}
		return "completed"
	case dsSessionless:
		// The owner's retry gets what the decision made of the execution,
		// whatever it answers (here a viewer's accept, refused on its own).
		res, err := p.cs.CallTool(t.Context(), dsApproval(p))
		if err != nil {
			return err.Error()
		}
		if st, _ := structured(t, res)["status"].(string); st != "completed" {
			return st + ": " + mcpclient.Text(res)
		}
		return "completed"
	case dsTask:
		a := n.waitTask(t, p)
		res, _ := a.Result["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if a.Result["status"] != "completed" || sc["status"] != "completed" {
			return fmt.Sprintf("task %v, execution %v (%v)", a.Result["status"], sc["status"], a.Result["statusMessage"])
		}
		return "completed"
	case dsSDKTask:
		a := n.waitTask(t, p)
		res, _ := a.Result["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if a.Result["status"] != "completed" || len(content) != 1 || !strings.HasPrefix(fmt.Sprint(content[0].(map[string]any)["text"]), "created by ") {
			return fmt.Sprintf("task %v: %v (%v)", a.Result["status"], res, a.Result["statusMessage"])
		}
		return "completed"
	case dsSDKLater, dsSDKLaterModern, dsSDKLaterTask, dsSDKLaterInBand:
		// The owner's later call reads the decision, journaled by the
		// session a moment after the surface answered (by a grain, before).
		var text string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			res, _ := callTool(t, p.cs, "sdk_status", map[string]any{"id": p.execID})
			if text = mcpclient.Text(res); strings.HasPrefix(text, "created by ") {
				return "completed"
			}
		}
		return "sdk_status: " + text
	}
	return "unreported"
}

// stillPaused asserts that a refused decision left p waiting.
func (n *dsNode) stillPaused(t *testing.T, p *dsPause) {
	t.Helper()
	if p.kind == dsTask || p.kind == dsSDKTask {
		a := taskCall(t, n.info.HTTPAddr, p.owner.token, "tasks/get", p.taskID)
		if requests, _ := a.Result["inputRequests"].(map[string]any); a.Result["status"] != "input_required" || len(requests) != 1 {
			t.Fatalf("after the refusal the task is %v (%v), want input_required with its approval request", a.Result["status"], a.Result["statusMessage"])
		}
	}
	if r := api(t, "GET", n.base()+"/api/executions/"+p.execID, dsAdmin.token, ""); r.status != 200 {
		t.Fatalf("after the refusal the pause is gone: %d %v", r.status, r.body)
	}
}

// adminDecides approves p as an admin over the HTTP API (a sessionless
// pause is listed like the others: its continuation grain publishes it).
func (n *dsNode) adminDecides(t *testing.T, p *dsPause) {
	t.Helper()
	r := api(t, "POST", n.base()+"/api/executions/"+p.execID+"/resume", dsAdmin.token, `{"action":"accept"}`)
	if r.status != 200 || r.body["status"] != "accepted" {
		t.Fatalf("the admin's approval after the refusal: %d %v", r.status, r.body)
	}
}

// writes counts the to-dos titled title (the SDK tool's writes too).
func (n *dsNode) writes(t *testing.T, title string) int {
	t.Helper()
	if c, ok := dsSDKWrites.Load(title); ok {
		return int(c.(*atomic.Int32).Load())
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.base()+"/demo/todos", nil)
	req.Header.Set("Authorization", "Bearer "+dsAdmin.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var items []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&items); err != nil {
		t.Fatalf("todos: %v", err)
	}
	count := 0
	for _, it := range items {
		if it["title"] == title {
			count++
		}
	}
	return count
}

// dsApproval is the sessionless retry that accepts p.
func dsApproval(p *dsPause) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": p.code},
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}}, RequestState: p.state}
}

// toolVerdict reads an in-band tool answer: the completed execution, or
// the insufficient_role refusal.
func toolVerdict(t *testing.T, p *dsPause, res *mcp.CallToolResult) dsVerdict {
	t.Helper()
	st, _ := structured(t, res)["status"].(string)
	v := dsVerdict{decided: st == "completed", refused: res.IsError && st == "insufficient_role", answer: st + ": " + mcpclient.Text(res)}
	if v.decided {
		p.outcome = st
	}
	return v
}

// dsDecideAsk: the owner decides its pending question — or its code-mode
// pause, by its execution id — in band from a later call of another of
// its sessions (DecideAsk, routed to the owning session); a role that may
// not decide is told ErrMayNotDecide.
func dsDecideAsk(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	cs := connectMode(t, n.info.HTTPAddr, decider.token, "")
	res, _ := callTool(t, cs, "sdk_decide", map[string]any{"id": p.execID})
	text := mcpclient.Text(res)
	return dsVerdict{
		decided: !res.IsError && text == "decided by "+decider.name,
		refused: res.IsError && strings.Contains(text, sdkapp.ErrMayNotDecide.Error()),
		answer:  text,
	}
}

func dsResume(t *testing.T, _ *dsNode, p *dsPause, _ dsUser) dsVerdict {
	res, _ := callTool(t, p.cs, "resume", map[string]any{"executionId": p.execID, "action": "accept"})
	return toolVerdict(t, p, res)
}

// dsElicitation: a principal that may decide is asked and its answer
// runs the write; one that may not is never asked — execute answers with
// the approval page for an approver (user_approval_required).
func dsElicitation(t *testing.T, _ *dsNode, p *dsPause, _ dsUser) dsVerdict {
	sc := structured(t, p.first)
	st, _ := sc["status"].(string)
	v := dsVerdict{answer: fmt.Sprintf("asked %v, %s: %s", p.asked, st, mcpclient.Text(p.first))}
	switch {
	case p.asked && st == "completed":
		v.decided, p.outcome = true, st
	case !p.asked && st == "user_approval_required" && strings.HasSuffix(fmt.Sprint(sc["approvalUrl"]), "/approve/"+p.execID):
		v.refused = true
	}
	return v
}

func dsRetry(t *testing.T, _ *dsNode, p *dsPause, _ dsUser) dsVerdict {
	res, err := p.cs.CallTool(t.Context(), dsApproval(p))
	if err != nil {
		return dsVerdict{answer: err.Error()}
	}
	return toolVerdict(t, p, res)
}

func dsTasksUpdate(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	a := modernCall(t, n.info.HTTPAddr, decider.token, "tasks/update", p.taskID, map[string]any{"taskId": p.taskID,
		"inputResponses": map[string]any{"approval": map[string]any{"action": "accept", "content": map[string]any{}}}}, true)
	b, _ := json.Marshal(a)
	v := dsVerdict{answer: string(b)}
	if a.Error != nil {
		var data struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(a.Error.Data, &data)
		v.answer = a.Error.Message
		v.refused = a.Error.Code == -32003 && data.Reason == "insufficient_role" && strings.Contains(a.Error.Message, "still waits")
		return v
	}
	v.decided = a.Result["resultType"] == "complete"
	return v
}

// csrfPattern finds a decision form's token.
var csrfPattern = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// dsForm reads the page at path as decider and returns the token of its
// decision form for p. A role that may not decide is shown no form; the
// test then signs the token as the node does (its state key is the
// page key), so the post reaches the role check behind the form check — as
// a form shown before the principal's role was lowered would.
func dsForm(t *testing.T, n *dsNode, path string, p *dsPause, decider dsUser, allowed bool) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.base()+path, nil)
	req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: decider.token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), p.execID) {
		t.Fatalf("GET %s as %s (%s): %d, the pause is not shown:\n%s", path, decider.name, decider.role, resp.StatusCode, page)
	}
	if allowed {
		m := csrfPattern.FindSubmatch(page)
		if m == nil {
			t.Fatalf("GET %s: no decision form for %s (%s):\n%s", path, decider.name, decider.role, page)
		}
		return string(m[1])
	}
	if csrfPattern.Match(page) || !strings.Contains(string(page), `id="view-only"`) {
		t.Fatalf("GET %s: a role that may not decide is offered a decision form:\n%s", path, page)
	}
	mac := hmac.New(sha256.New, testStateKey)
	mac.Write([]byte("mcpgrain approve form\x00acme\x00" + decider.name + "\x00" + p.execID))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// dsPost posts a decision form as decider; redirects are not followed.
func dsPost(t *testing.T, n *dsNode, path, csrf string, decider dsUser) (int, string) {
	t.Helper()
	form := url.Values{"action": {"accept"}, "csrf": {csrf}}.Encode()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", n.base()+path, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: decider.token})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// pageRefusal reports whether a page's answer is the role refusal.
func pageRefusal(code int, body string) bool {
	return code == http.StatusForbidden && strings.Contains(body, "Not allowed") &&
		(strings.Contains(body, "may see paused executions but not decide them") || strings.Contains(body, "only admins decide"))
}

func dsPage(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	allowed := dsMayDecide[n.approvers][decider.role]
	csrf := dsForm(t, n, "/approve/"+p.execID, p, decider, allowed)
	code, body := dsPost(t, n, "/approve/"+p.execID, csrf, decider)
	return dsVerdict{decided: code == http.StatusOK && strings.Contains(body, "Accepted"), refused: pageRefusal(code, body),
		answer: fmt.Sprintf("%d %s", code, body)}
}

func dsInbox(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	allowed := dsMayDecide[n.approvers][decider.role]
	csrf := dsForm(t, n, "/approvals", p, decider, allowed)
	code, body := dsPost(t, n, "/approvals/"+p.execID, csrf, decider)
	return dsVerdict{decided: code == http.StatusSeeOther, refused: pageRefusal(code, body), answer: fmt.Sprintf("%d %s", code, body)}
}

func dsHTTP(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	r := api(t, "POST", n.base()+"/api/executions/"+p.execID+"/resume", decider.token, `{"action":"accept"}`)
	return dsVerdict{decided: r.status == 200 && r.body["status"] == "accepted",
		refused: r.status == http.StatusForbidden && r.body["error"] == "insufficient_role", answer: fmt.Sprintf("%d %v", r.status, r.body)}
}

func dsGRPC(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	d, err := n.grpc.DecideExecution(withToken(t, decider.token), &pb.DecideExecutionRequest{ExecutionId: p.execID, Action: "accept"})
	if err != nil {
		return dsVerdict{refused: status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "insufficient_role"), answer: err.Error()}
	}
	return dsVerdict{decided: d.GetStatus() == "accepted", answer: d.String()}
}

func dsCLI(t *testing.T, n *dsNode, p *dsPause, decider dsUser) dsVerdict {
	out, err := mcpgrainCLI(t, n.bin, "approve", "accept", p.execID, "--grpc", n.info.GRPCAddr, "--token-file", tokenFile(t, decider.token))
	return dsVerdict{decided: err == nil && strings.TrimSpace(out) == p.execID+": accepted",
		refused: err != nil && strings.Contains(out, "insufficient_role"), answer: fmt.Sprintf("%v: %s", err, out)}
}

// Cancelling a task is its owner's right whatever the role, and not a
// decision: a viewer's (and, with --approvers admin, a member's) cancelled
// execute task leaves the approval surfaces, and the write never runs.
// Before, the cancel was a round answering "cancel" in the owner's role,
// which the execute tool refused for a role that may not decide: the
// cancelled task's pause stayed listed, undecidable, until its deadline.
func TestCancellingATaskEndsItsPauseWhateverTheOwnersRole(t *testing.T) {
	n := startDecideNode(t, policy.ApproversAdmin, "")
	for _, owner := range dsUsers {
		p := n.pause(t, dsTask, owner, "cancelled by "+owner.name)
		if c := taskCall(t, n.info.HTTPAddr, owner.token, "tasks/cancel", p.taskID); c.Error != nil || c.Result["resultType"] != "complete" {
			t.Fatalf("%s's cancel: %+v", owner.role, c)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := api(t, "GET", n.base()+"/api/executions/"+p.execID, dsAdmin.token, "")
			if r.status == http.StatusConflict {
				break // settled
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's cancelled task: its pause still answers %d %v", owner.role, r.status, r.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if a := taskCall(t, n.info.HTTPAddr, owner.token, "tasks/get", p.taskID); a.Result["status"] != "cancelled" {
			t.Fatalf("%s's task after the cancel: %+v", owner.role, a)
		}
		if w := n.writes(t, p.title); w != 0 {
			t.Fatalf("%s's cancelled task wrote %d times", owner.role, w)
		}
	}
}
