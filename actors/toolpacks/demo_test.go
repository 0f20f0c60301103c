package toolpacks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

var demoTools = []string{"add", "ask_confirmation", "count_to", "echo", "now"}

// structured decodes a result's structured content into a map.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

func TestDemoEcho(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "demo"), nil, p.version)
			for _, in := range []string{"hello, grain", "", "ünïcödé ✓"} {
				wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": in}}), in)
			}
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}), "text")
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": 7}}), "text")
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strings.Repeat("x", 64<<10+1)}}), "at most 65536")
		})
	}
}

func TestDemoAdd(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "demo"), nil, p.version)
			for _, tc := range []struct{ a, b, sum float64 }{{1, 2, 3}, {-1.5, 0.25, -1.25}, {0, 0, 0}} {
				res := callTool(t, cs, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": tc.a, "b": tc.b}})
				if res.IsError {
					t.Fatalf("add(%g, %g): %s", tc.a, tc.b, mcpclient.Text(res))
				}
				if got := structured(t, res)["sum"]; got != tc.sum {
					t.Errorf("add(%g, %g) structured sum = %v, want %g", tc.a, tc.b, got, tc.sum)
				}
				if got, want := mcpclient.Text(res), fmt.Sprintf(`{"sum":%g}`, tc.sum); got != want {
					t.Errorf("add(%g, %g) text = %q, want %q", tc.a, tc.b, got, want)
				}
			}
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1e308, "b": 1e308}}), "overflows")
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1}}), "b")
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": "1", "b": 2}}), "a")
		})
	}
}

func TestDemoAddAdvertisesOutputSchema(t *testing.T) {
	cs := connect(t, newServer(t, "demo"), nil, legacyProtocol)
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if (tool.Name == "add" || tool.Name == "now" || tool.Name == "ask_confirmation") && tool.OutputSchema == nil {
			t.Errorf("%s has no output schema", tool.Name)
		}
	}
}

func TestDemoNow(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.FixedZone("X", 3600))
	s, closer, err := toolpacks.NewServer(testImpl, []string{"demo"}, toolpacks.Options{Clock: clock.NewFake(at)})
	if err != nil {
		t.Fatal(err)
	}
	defer closer()
	cs := connect(t, s, nil, latestProtocol)
	res := callTool(t, cs, &mcp.CallToolParams{Name: "now"})
	if res.IsError {
		t.Fatal(mcpclient.Text(res))
	}
	got := structured(t, res)
	if got["utc"] != "2026-03-04T04:06:07.008Z" || got["unixMillis"] != float64(at.UnixMilli()) {
		t.Errorf("now = %v", got)
	}

	// With the real clock the time is current.
	cs = connect(t, newServer(t, "demo"), nil, latestProtocol)
	before := time.Now().UTC().Truncate(time.Millisecond)
	res = callTool(t, cs, &mcp.CallToolParams{Name: "now"})
	utc, err := time.Parse(time.RFC3339Nano, structured(t, res)["utc"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if utc.Before(before) || utc.After(time.Now()) || utc.Location() != time.UTC {
		t.Errorf("now = %v, want a UTC time between %v and now", utc, before)
	}
}

func TestDemoCountTo(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			progress := make(chan *mcp.ProgressNotificationParams, 64)
			cs := connect(t, newServer(t, "demo"), &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params
				},
			}, p.version)

			params := &mcp.CallToolParams{Name: "count_to", Arguments: map[string]any{"n": 5}}
			params.SetProgressToken("count-5")
			wantText(t, callTool(t, cs, params), "counted to 5")
			seen := map[float64]bool{}
			for range 5 {
				n := receive(t, progress, "a progress notification")
				if n.ProgressToken != "count-5" || n.Total != 5 || n.Progress < 1 || n.Progress > 5 || seen[n.Progress] {
					t.Errorf("unexpected progress notification %+v", n)
				}
				seen[n.Progress] = true
				if want := fmt.Sprintf("counted %g of 5", n.Progress); n.Message != want {
					t.Errorf("progress message %q, want %q", n.Message, want)
				}
			}
			select {
			case n := <-progress:
				t.Errorf("extra progress notification %+v", n)
			default:
			}

			// The largest n, and no progress token: no notifications.
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "count_to", Arguments: map[string]any{"n": 20}}), "counted to 20")

			for _, n := range []int{0, 21, -3} {
				params := &mcp.CallToolParams{Name: "count_to", Arguments: map[string]any{"n": n}}
				params.SetProgressToken("bad")
				wantToolError(t, callTool(t, cs, params), "n must be an integer from 1 to 20", fmt.Sprintf("got %d", n))
			}
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "count_to", Arguments: map[string]any{"n": 2.5}}), "n")
			select {
			case n := <-progress:
				t.Errorf("progress notification without a token or for a rejected call: %+v", n)
			default:
			}
		})
	}
}

// elicitor is a client elicitation handler that records the request and
// answers with result (or fails with err).
type elicitor struct {
	requests chan *mcp.ElicitParams
	result   *mcp.ElicitResult
	err      error
}

func newElicitor(result *mcp.ElicitResult) *elicitor {
	return &elicitor{requests: make(chan *mcp.ElicitParams, 8), result: result}
}

func (e *elicitor) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.requests <- req.Params
	return e.result, e.err
}

func TestDemoAskConfirmation(t *testing.T) {
	const question = "Deploy to production?"
	for _, p := range protocols {
		for _, tc := range []struct {
			name      string
			answer    *mcp.ElicitResult
			text      string
			action    string
			confirmed bool
		}{
			{"yes", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, "The user answered yes to: " + question, "accept", true},
			{"no", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, "The user answered no to: " + question, "accept", false},
			{"decline", &mcp.ElicitResult{Action: "decline"}, "The user declined to answer: " + question, "decline", false},
			{"cancel", &mcp.ElicitResult{Action: "cancel"}, "The user dismissed the question without answering: " + question, "cancel", false},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				el := newElicitor(tc.answer)
				cs := connect(t, newServer(t, "demo"), &mcp.ClientOptions{ElicitationHandler: el.handle}, p.version)
				res := callTool(t, cs, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": "  " + question + "\n"}})
				wantText(t, res, tc.text)
				if got := structured(t, res); got["action"] != tc.action || got["confirmed"] != tc.confirmed {
					t.Errorf("structured = %v, want action %q confirmed %v", got, tc.action, tc.confirmed)
				}

				req := receive(t, el.requests, "the elicitation request")
				if req.Message != question {
					t.Errorf("elicitation message = %q, want %q", req.Message, question)
				}
				raw, _ := json.Marshal(req.RequestedSchema)
				var schema struct {
					Type       string
					Properties map[string]struct{ Type string }
					Required   []string
				}
				if err := json.Unmarshal(raw, &schema); err != nil || schema.Type != "object" || len(schema.Properties) != 1 ||
					schema.Properties["confirm"].Type != "boolean" || !slices.Equal(schema.Required, []string{"confirm"}) {
					t.Errorf("requested schema %s is not one required boolean", raw)
				}
				select {
				case r := <-el.requests:
					t.Errorf("asked twice: %+v", r)
				default:
				}
			})
		}
	}
}

func TestDemoAskConfirmationErrors(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			// No elicitation capability: a clear isError result.
			cs := connect(t, newServer(t, "demo"), nil, p.version)
			res := callTool(t, cs, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": "Proceed?"}})
			wantToolError(t, res, "ask_confirmation needs elicitation", "did not declare the elicitation capability")

			el := newElicitor(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}})
			cs = connect(t, newServer(t, "demo"), &mcp.ClientOptions{ElicitationHandler: el.handle}, p.version)
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": " \t"}}), "question must not be empty")
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": strings.Repeat("?", 1001)}}), "at most 1000")
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{}}), "question")
			select {
			case r := <-el.requests:
				t.Errorf("invalid input still elicited: %+v", r)
			default:
			}

			// URL-only elicitation cannot show a form.
			cs = connect(t, newServer(t, "demo"), &mcp.ClientOptions{
				ElicitationHandler: el.handle,
				Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			}, p.version)
			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": "Proceed?"}}), "only URL elicitation")
		})
	}
}

func TestDemoAskConfirmationClientFailure(t *testing.T) {
	// The client's elicitation handler fails: the call fails rather than
	// hanging or reporting an answer.
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			el := newElicitor(nil)
			el.err = errors.New("no user at the keyboard")
			cs := connect(t, newServer(t, "demo"), &mcp.ClientOptions{ElicitationHandler: el.handle}, p.version)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": "Proceed?"}})
			if err == nil && !res.IsError {
				t.Fatalf("call succeeded: %q", mcpclient.Text(res))
			}
		})
	}
}
