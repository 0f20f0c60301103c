package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// The protocol eras: go-sdk's default (2026-07-28, sessionless, answers by
// input_required rounds) and the last one with stateful sessions (native
// elicitation/create).
var eras = []struct{ name, version string }{
	{"2026-07-28", ""},
	{"2025-11-25", "2025-11-25"},
}

func confirmForm() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"confirm": {Type: "boolean"}},
		Required:   []string{"confirm"},
	}
}

func nameForm() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}},
		Required:   []string{"name"},
	}
}

// describe renders an answer as the test tools report it.
func describe(r *mcp.ElicitResult) string {
	if r.Action != "accept" {
		return r.Action
	}
	return fmt.Sprintf("accept %v", r.Content)
}

// testServer is a server with the middleware a node's servers have and
// two tools: "ask" elicits once (key "q"), "plan" twice ("name", then
// "confirm"). runs counts the handlers' runs; errs gets their Elicit
// errors.
type testServer struct {
	*mcp.Server
	runs atomic.Int32
	errs chan error
}

func newTestServer(t *testing.T, mws ...mcp.Middleware) *testServer {
	t.Helper()
	s := &testServer{Server: mcp.NewServer(&mcp.Implementation{Name: "elicit-test", Version: "v0"}, nil), errs: make(chan error, 16)}
	s.AddReceivingMiddleware(app.InputRequiredMiddleware)
	s.AddReceivingMiddleware(mws...)
	mcp.AddTool(s.Server, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.runs.Add(1)
		r, err := app.Elicit(ctx, req, "q", "Proceed?", confirmForm())
		if err != nil {
			s.errs <- err
			return nil, nil, fmt.Errorf("ask: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: describe(r)}}}, nil, nil
	})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "plan"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.runs.Add(1)
		who, err := app.Elicit(ctx, req, "name", "Who deploys?", nameForm())
		if err != nil {
			return nil, nil, err
		}
		ok, err := app.Elicit(ctx, req, "confirm", fmt.Sprintf("Deploy as %v?", who.Content["name"]), confirmForm())
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: describe(who) + "; " + describe(ok)}}}, nil, nil
	})
	return s
}

// connect connects a go-sdk client with copts to s over in-memory
// transports in the era of version.
func connect(t *testing.T, s *mcp.Server, copts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "elicit-client", Version: "v0"}, copts).
		Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// user answers elicitations from a script, keyed by message, recording
// what it was asked.
type user struct {
	answers map[string]*mcp.ElicitResult
	asked   chan *mcp.ElicitParams
}

func newUser(answers map[string]*mcp.ElicitResult) *user {
	return &user{answers: answers, asked: make(chan *mcp.ElicitParams, 16)}
}

func (u *user) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.asked <- req.Params
	if r, ok := u.answers[req.Params.Message]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("unexpected question %q", req.Params.Message)
}

// questions drains what u was asked.
func (u *user) questions() []string {
	var qs []string
	for {
		select {
		case p := <-u.asked:
			qs = append(qs, p.Message)
		default:
			return qs
		}
	}
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func call(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	return res
}

// Elicit gets the user's answer in both eras — accept, decline, cancel —
// natively in a stateful session (the handler runs once) and by an
// input_required round in 2026-07-28 (the retry re-runs the handler).
func TestElicitInBothEras(t *testing.T) {
	for _, era := range eras {
		for _, answer := range []*mcp.ElicitResult{
			{Action: "accept", Content: map[string]any{"confirm": true}},
			{Action: "accept", Content: map[string]any{"confirm": false}},
			{Action: "decline"},
			{Action: "cancel"},
		} {
			t.Run(era.name+"/"+describe(answer), func(t *testing.T) {
				s := newTestServer(t)
				u := newUser(map[string]*mcp.ElicitResult{"Proceed?": answer})
				cs := connect(t, s.Server, &mcp.ClientOptions{ElicitationHandler: u.handle}, era.version)
				res := call(t, cs, &mcp.CallToolParams{Name: "ask"})
				if res.IsError || text(t, res) != describe(answer) {
					t.Fatalf("ask = %q (isError %v), want %q", text(t, res), res.IsError, describe(answer))
				}
				if qs := u.questions(); len(qs) != 1 {
					t.Errorf("the user was asked %q, want once", qs)
				}
				wantRuns := int32(1)
				if era.version == "" {
					wantRuns = 2 // the retry with the answer re-runs the handler
				}
				if got := s.runs.Load(); got != wantRuns {
					t.Errorf("the handler ran %d times, want %d", got, wantRuns)
				}
			})
		}
	}
}

// Two questions in one call: in 2026-07-28 each is its own round, and the
// last retry still has the first answer (carried in requestState).
func TestElicitTwiceInOneCall(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			s := newTestServer(t)
			u := newUser(map[string]*mcp.ElicitResult{
				"Who deploys?":     {Action: "accept", Content: map[string]any{"name": "Ada"}},
				"Deploy as Ada?":   {Action: "accept", Content: map[string]any{"confirm": true}},
				"Deploy as <nil>?": {Action: "cancel"},
			})
			cs := connect(t, s.Server, &mcp.ClientOptions{ElicitationHandler: u.handle}, era.version)
			res := call(t, cs, &mcp.CallToolParams{Name: "plan"})
			if want := "accept map[name:Ada]; accept map[confirm:true]"; res.IsError || text(t, res) != want {
				t.Fatalf("plan = %q (isError %v), want %q", text(t, res), res.IsError, want)
			}
			if qs := u.questions(); strings.Join(qs, "|") != "Who deploys?|Deploy as Ada?" {
				t.Errorf("the user was asked %q, want each question once, in order", qs)
			}
		})
	}
}

// On the wire (a 2026-07-28 client that does its own rounds): the first
// call gets input_required with the form under its key and no state; the
// retry with the answer gets the next form and a requestState holding the
// first answer; the last retry completes. An answer that does not match
// its form, or comes without the state of the earlier rounds, is refused.
func TestElicitInputRequiredRounds(t *testing.T) {
	s := newTestServer(t)
	cs := connect(t, s.Server, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
	}, "")
	res := call(t, cs, &mcp.CallToolParams{Name: "plan"})
	form, ok := res.InputRequests["name"].(*mcp.ElicitParams)
	if !res.NeedsInput() || !ok || form.Message != "Who deploys?" || len(res.InputRequests) != 1 || res.RequestState != "" {
		t.Fatalf("first round: needsInput %v, requests %v, state %q", res.NeedsInput(), res.InputRequests, res.RequestState)
	}
	ada := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}
	res = call(t, cs, &mcp.CallToolParams{Name: "plan", InputResponses: mcp.InputResponseMap{"name": ada}})
	form, ok = res.InputRequests["confirm"].(*mcp.ElicitParams)
	if !res.NeedsInput() || !ok || form.Message != "Deploy as Ada?" || res.RequestState == "" {
		t.Fatalf("second round: needsInput %v, requests %v, state %q", res.NeedsInput(), res.InputRequests, res.RequestState)
	}
	state := res.RequestState
	yes := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	res = call(t, cs, &mcp.CallToolParams{Name: "plan", RequestState: state, InputResponses: mcp.InputResponseMap{"confirm": yes}})
	if res.NeedsInput() || res.IsError || text(t, res) != "accept map[name:Ada]; accept map[confirm:true]" {
		t.Fatalf("last round: needsInput %v, %q", res.NeedsInput(), text(t, res))
	}

	// Without the state, the first question is asked again.
	res = call(t, cs, &mcp.CallToolParams{Name: "plan", InputResponses: mcp.InputResponseMap{"confirm": yes}})
	if _, ok := res.InputRequests["name"]; !res.NeedsInput() || !ok {
		t.Fatalf("retry without state: needsInput %v, requests %v", res.NeedsInput(), res.InputRequests)
	}
	// An answer that does not match the form is an error, not an answer.
	bad := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": "yes"}}
	res = call(t, cs, &mcp.CallToolParams{Name: "ask", InputResponses: mcp.InputResponseMap{"q": bad}})
	if !res.IsError || !strings.Contains(text(t, res), "does not match its form") {
		t.Fatalf("mismatched answer: isError %v, %q", res.IsError, text(t, res))
	}
	res = call(t, cs, &mcp.CallToolParams{Name: "ask", RequestState: "mcpgrain-elicit.v1.!!", InputResponses: mcp.InputResponseMap{"q": yes}})
	if !res.IsError || !strings.Contains(text(t, res), "requestState") {
		t.Fatalf("corrupt state: isError %v, %q", res.IsError, text(t, res))
	}
}

// A client that declared no elicitation, or only URL elicitation, gets a
// clear error wrapping ErrCannotElicit in both eras; the user is never
// asked.
func TestElicitWithoutCapability(t *testing.T) {
	for _, era := range eras {
		for name, tc := range map[string]struct {
			caps *mcp.ClientCapabilities
			want string
		}{
			"none":     {&mcp.ClientCapabilities{}, "did not declare the elicitation capability"},
			"url only": {&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}, "only URL elicitation"},
		} {
			t.Run(era.name+"/"+name, func(t *testing.T) {
				s := newTestServer(t)
				u := newUser(nil)
				copts := &mcp.ClientOptions{Capabilities: tc.caps}
				if tc.caps.Elicitation != nil {
					copts.ElicitationHandler = u.handle // a handler alone would declare form elicitation
				}
				cs := connect(t, s.Server, copts, era.version)
				res := call(t, cs, &mcp.CallToolParams{Name: "ask"})
				if !res.IsError || !strings.Contains(text(t, res), tc.want) {
					t.Fatalf("ask: isError %v, %q; want an error saying %q", res.IsError, text(t, res), tc.want)
				}
				select {
				case err := <-s.errs:
					if !errors.Is(err, app.ErrCannotElicit) || errors.Is(err, app.ErrInputRequired) {
						t.Errorf("Elicit's error %v does not wrap ErrCannotElicit alone", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the handler reported no error")
				}
				if qs := u.questions(); len(qs) != 0 {
					t.Errorf("the user was asked %q", qs)
				}
			})
		}
	}
}

// The fallback seam: when the client cannot elicit, the fallback bound to
// the request answers (the durable approval surfaces will, through Ask).
func TestElicitFallback(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			var gotKey, gotMsg string
			fallback := func(_ context.Context, _ *mcp.CallToolRequest, key string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				gotKey, gotMsg = key, p.Message
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			bind := func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					return next(app.WithElicitFallback(ctx, fallback), method, req)
				}
			}
			s := newTestServer(t, bind)
			cs := connect(t, s.Server, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, era.version)
			res := call(t, cs, &mcp.CallToolParams{Name: "ask"})
			if res.IsError || text(t, res) != "decline" || gotKey != "q" || gotMsg != "Proceed?" {
				t.Fatalf("ask = %q (isError %v); fallback got key %q message %q", text(t, res), res.IsError, gotKey, gotMsg)
			}
		})
	}
}

// The middleware converts a raw handler's error too, and leaves a
// stateful session's results alone; Elicit refuses an empty key.
func TestInputRequiredMiddleware(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "raw", Version: "v0"}, nil)
	s.AddReceivingMiddleware(app.InputRequiredMiddleware)
	s.AddTool(&mcp.Tool{Name: "raw", InputSchema: &jsonschema.Schema{Type: "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, err := app.Elicit(ctx, req, "", "?", nil); err == nil || !strings.Contains(err.Error(), "needs a key") {
			return nil, fmt.Errorf("Elicit with no key: %v", err)
		}
		return nil, &app.InputRequiredError{Requests: mcp.InputRequestMap{"k": &mcp.ElicitParams{Message: "raw?"}}}
	})
	copts := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	res := call(t, connect(t, s, copts, ""), &mcp.CallToolParams{Name: "raw"})
	if p, ok := res.InputRequests["k"].(*mcp.ElicitParams); !res.NeedsInput() || !ok || p.Message != "raw?" {
		t.Fatalf("raw handler: needsInput %v, requests %v", res.NeedsInput(), res.InputRequests)
	}
	_, err := connect(t, s, copts, "2025-11-25").CallTool(t.Context(), &mcp.CallToolParams{Name: "raw"})
	if err == nil || !strings.Contains(err.Error(), "needs the client's input") {
		t.Fatalf("stateful session: %v, want the handler's error", err)
	}
}
