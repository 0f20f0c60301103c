// Package demo is the built-in "demo" pack: small, safe tools (echo, add,
// now, count_to, ask_confirmation) that make a node useful before real
// tools exist.
//
// It is written as a user's server is, on the public API only: go-sdk's
// mcp.AddTool and the SDK's handler calls (ask_confirmation asks with
// Elicit, the implementation the root package mcpgrain exports). The
// package imports nothing of mcpgrain but actors/app, the SDK's runtime
// side, and only names the root package re-exports; internal/layers
// (TestDemoIsWrittenOnThePublicAPI) keeps it so.
package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// Limits of the demo tools' inputs.
const (
	demoMaxText     = 64 << 10 // bytes of echo text
	demoMaxCount    = 20       // count_to's largest n
	demoMaxQuestion = 1000     // characters of an ask_confirmation question
)

// demoConfirmationKey names ask_confirmation's elicitation in the
// multi-round-trip input requests and responses.
const demoConfirmationKey = "confirmation"

// Register adds the demo pack's tools to server; now tells the now tool
// the time (time.Now in a program, the node's clock in mcpgrain). It
// starts no background work.
func Register(server *mcp.Server, now func() time.Time) {
	mcp.AddTool(server, &mcp.Tool{
		Name:        "echo",
		Title:       "Echo",
		Description: "Returns the given text unchanged.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, demoEcho)

	mcp.AddTool(server, &mcp.Tool{
		Name:        "add",
		Title:       "Add",
		Description: "Adds two numbers and returns their sum as structured output.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, demoAdd)

	mcp.AddTool(server, &mcp.Tool{
		Name:        "now",
		Title:       "Current time",
		Description: "Returns the current time in UTC (RFC 3339) and as Unix milliseconds.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, demoNow(now))

	mcp.AddTool(server, &mcp.Tool{
		Name:        "count_to",
		Title:       "Count to n",
		Description: fmt.Sprintf("Counts from 1 to n (1 to %d), sending a progress notification per step when the request has a progress token.", demoMaxCount),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, demoCountTo)

	mcp.AddTool(server, &mcp.Tool{
		Name:        "ask_confirmation",
		Title:       "Ask for confirmation",
		Description: "Asks the user a yes/no question through elicitation and reports the answer. Needs a client with the elicitation capability.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, demoAskConfirmation)
}

// demoEchoInput is echo's input.
type demoEchoInput struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

func demoEcho(_ context.Context, _ *mcp.CallToolRequest, in demoEchoInput) (*mcp.CallToolResult, any, error) {
	if len(in.Text) > demoMaxText {
		return nil, nil, fmt.Errorf("text is %d bytes; at most %d are allowed", len(in.Text), demoMaxText)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
}

// demoAddInput is add's input.
type demoAddInput struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

// demoAddOutput is add's structured output.
type demoAddOutput struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

func demoAdd(_ context.Context, _ *mcp.CallToolRequest, in demoAddInput) (*mcp.CallToolResult, demoAddOutput, error) {
	sum := in.A + in.B
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		return nil, demoAddOutput{}, fmt.Errorf("%g + %g overflows a 64-bit float", in.A, in.B)
	}
	return nil, demoAddOutput{Sum: sum}, nil
}

// demoNowOutput is now's structured output.
type demoNowOutput struct {
	UTC        string `json:"utc" jsonschema:"the current time in UTC, RFC 3339 with nanoseconds"`
	UnixMillis int64  `json:"unixMillis" jsonschema:"the current time in milliseconds since the Unix epoch"`
}

func demoNow(now func() time.Time) mcp.ToolHandlerFor[struct{}, demoNowOutput] {
	return func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, demoNowOutput, error) {
		t := now().UTC()
		return nil, demoNowOutput{UTC: t.Format(time.RFC3339Nano), UnixMillis: t.UnixMilli()}, nil
	}
}

// demoCountToInput is count_to's input.
type demoCountToInput struct {
	N int `json:"n" jsonschema:"how far to count: an integer from 1 to 20"`
}

func demoCountTo(ctx context.Context, req *mcp.CallToolRequest, in demoCountToInput) (*mcp.CallToolResult, any, error) {
	if in.N < 1 || in.N > demoMaxCount {
		return nil, nil, fmt.Errorf("n must be an integer from 1 to %d, got %d", demoMaxCount, in.N)
	}
	token := req.Params.GetProgressToken()
	for i := 1; i <= in.N; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("count_to stopped at %d: %w", i-1, err)
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(i),
			Total:         float64(in.N),
			Message:       fmt.Sprintf("counted %d of %d", i, in.N),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sending progress %d of %d: %w", i, in.N, err)
		}
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("counted to %d", in.N)}},
	}, nil, nil
}

// demoAskInput is ask_confirmation's input.
type demoAskInput struct {
	Question string `json:"question" jsonschema:"the yes/no question to ask the user"`
}

// demoAskOutput is ask_confirmation's structured output.
type demoAskOutput struct {
	Action    string `json:"action" jsonschema:"what the user did: accept, decline or cancel"`
	Confirmed bool   `json:"confirmed" jsonschema:"true only if the user accepted and answered yes"`
}

// demoConfirmationSchema is the form ask_confirmation shows the user: one
// required boolean.
func demoConfirmationSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"confirm": {
				Type:        "boolean",
				Title:       "Confirm",
				Description: "Yes (true) or no (false)",
			},
		},
		Required: []string{"confirm"},
	}
}

// demoAskConfirmation asks with Elicit: natively in a stateful session;
// in the 2026-07-28 era Elicit returns the input_required error this
// handler returns, and the client's retry with the answer runs the handler
// again, whose Elicit then returns the answer (the validation before it is
// idempotent).
func demoAskConfirmation(ctx context.Context, req *mcp.CallToolRequest, in demoAskInput) (*mcp.CallToolResult, demoAskOutput, error) {
	question := strings.TrimSpace(in.Question)
	if question == "" {
		return nil, demoAskOutput{}, errors.New("question must not be empty")
	}
	if n := utf8.RuneCountInString(question); n > demoMaxQuestion {
		return nil, demoAskOutput{}, fmt.Errorf("question is %d characters; at most %d are allowed", n, demoMaxQuestion)
	}
	r, err := app.Elicit(ctx, req, demoConfirmationKey, question, demoConfirmationSchema())
	switch {
	case errors.Is(err, app.ErrCannotElicit):
		return nil, demoAskOutput{}, fmt.Errorf("ask_confirmation needs elicitation: %w; use a client that supports elicitation", err)
	case err != nil:
		return nil, demoAskOutput{}, err
	}
	return demoConfirmationAnswer(question, r)
}

// demoConfirmationAnswer turns the client's answer into the tool result.
func demoConfirmationAnswer(question string, r *mcp.ElicitResult) (*mcp.CallToolResult, demoAskOutput, error) {
	var text string
	out := demoAskOutput{Action: r.Action}
	switch r.Action {
	case "accept":
		confirmed, ok := r.Content["confirm"].(bool)
		if !ok {
			return nil, demoAskOutput{}, errors.New(`the user accepted, but the answer has no boolean "confirm"`)
		}
		out.Confirmed = confirmed
		answer := "no"
		if confirmed {
			answer = "yes"
		}
		text = fmt.Sprintf("The user answered %s to: %s", answer, question)
	case "decline":
		text = "The user declined to answer: " + question
	case "cancel":
		text = "The user dismissed the question without answering: " + question
	default:
		return nil, demoAskOutput{}, fmt.Errorf("unexpected elicitation action %q", r.Action)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}
