package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

//lint:file-ignore SA1019 the suite requires sampling and roots input requests (SEP-2577 deprecates them from 2026-07-28, still serves them).

// The multi-round-trip fixtures of 2026-07-28 (SEP-2322, scenarios
// input-required-result-*): a request that needs more from the client
// returns resultType "input_required" with inputRequests (and, when it has
// something to carry to the next round, a requestState); the client
// retries the same request with inputResponses and the state echoed.
//
// The state is the tool's own: a small JSON document naming the tool and
// the round, and what earlier rounds gathered. It stays readable here; on
// an mcpgrain node the continuation grain seals every requestState it
// hands out (signed, bound to the principal and the grain, expiring) and
// unwraps the one a retry brings, so the tool only ever sees a state it
// issued, and a tampered one is refused before it gets here
// (actors/continuation). The tool checks the shape anyway, so that it
// never continues from a state it did not make.
//
// A retry that lacks a response the tool asked for (or brings one of the
// wrong kind) is asked again for what is missing, as SEP-2322 recommends,
// not failed; responses it did not ask for are ignored.
//
// These fixtures probe the round-trip mechanics, so each asks what its
// scenario names whatever the client declared (their scenarios' clients
// declare sampling, elicitation and roots). The rule that a server asks
// only for what the client declared has its own probe,
// test_input_required_result_capabilities; the client tools
// (client.go) refuse an undeclared capability with -32021.

// inputRequiredPrompt is the prompt that needs input (scenario
// input-required-result-non-tool-request).
const inputRequiredPrompt = "test_input_required_result_prompt"

// roundState is the requestState of the multi-round fixtures.
type roundState struct {
	// Tool is the tool (or prompt) that issued the state.
	Tool string `json:"tool"`
	// Round is the round the state was issued in (1 for the first).
	Round int `json:"round"`
	// Name is the name the user gave in an earlier round.
	Name string `json:"name,omitempty"`
}

func (s roundState) encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a struct of strings and an int always marshals
	}
	return string(b)
}

// invalidState is the error for a requestState the fixture did not issue.
func invalidState(tool, why string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: invalid requestState: %s", tool, why)}
}

// decodeState reads the state a retry of tool echoed; it must have been
// issued by tool, in one of the given rounds.
func decodeState(tool, raw string, rounds ...int) (roundState, error) {
	if raw == "" {
		return roundState{}, invalidState(tool, "missing (echo the requestState of the previous result)")
	}
	var s roundState
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil || dec.More() {
		return roundState{}, invalidState(tool, "not a state this server issued")
	}
	if s.Tool != tool {
		return roundState{}, invalidState(tool, fmt.Sprintf("issued by %q", s.Tool))
	}
	for _, r := range rounds {
		if s.Round == r {
			return s, nil
		}
	}
	return roundState{}, invalidState(tool, fmt.Sprintf("round %d is not one this request continues", s.Round))
}

// needInput is a tool result asking for requests, with state (empty: none).
func needInput(requests mcp.InputRequestMap, state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: requests, RequestState: state}
}

// nameForm asks for one string field.
func nameForm(message, field string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Message: message,
		RequestedSchema: json.RawMessage(fmt.Sprintf(
			`{"type":"object","properties":{%q:{"type":"string"}},"required":[%q]}`, field, field)),
	}
}

// acceptedString is the string field of an accepted elicitation answer
// under key, if the retry brought one.
func acceptedString(responses mcp.InputResponseMap, key, field string) (value string, answered bool) {
	r, ok := elicitAnswer(responses, key)
	if !ok {
		return "", false
	}
	if r.Action != "accept" {
		return "", true
	}
	v, _ := r.Content[field].(string)
	return v, true
}

// Input request keys and texts of the multi-round fixtures.
const (
	keyUserName      = "user_name"
	keyCapital       = "capital_question"
	keyClientRoots   = "client_roots"
	keyConfirm       = "confirm"
	keyGreeting      = "greeting"
	keyStep1         = "step1"
	keyStep2         = "step2"
	keyUserContext   = "user_context"
	questionName     = "What is your name?"
	questionCapital  = "What is the capital of France?"
	questionGreeting = "Generate a greeting"
)

// confirmRequest asks the user for a boolean ok.
func confirmRequest(message string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Message:         message,
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
	}
}

func (f *conformanceFixture) addInputRequiredTools(s *mcp.Server) {
	add := func(name, description string, h mcp.ToolHandlerFor[noInput, any]) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: description, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}}, h)
	}
	add("test_input_required_result_elicitation",
		"input-required-result-basic-elicitation: asks the user's name (input request user_name) and greets them.",
		irElicitation)
	add("test_input_required_result_sampling",
		"input-required-result-basic-sampling: asks the client's model a question (input request capital_question) and returns its answer.",
		irSampling)
	add("test_input_required_result_list_roots",
		"input-required-result-basic-list-roots: asks for the client's roots (input request client_roots) and lists them.",
		irListRoots)
	add("test_input_required_result_request_state",
		"input-required-result-request-state: asks for a confirmation with a requestState, and answers state-ok once the retry echoes that state.",
		irRequestState)
	add("test_input_required_result_multiple_inputs",
		"input-required-result-multiple-input-requests: asks for a name (elicitation), a greeting (sampling) and the roots at once, with a requestState.",
		irMultipleInputs)
	add("test_input_required_result_multi_round",
		"input-required-result-multi-round: asks for a name, then (with a new requestState carrying it) for a favorite color, then answers.",
		irMultiRound)
	add("test_input_required_result_tampered_state",
		"input-required-result-tampered-state: asks for a confirmation with a requestState; a retry whose state was altered is refused (-32602).",
		irTamperedState)
	add("test_input_required_result_capabilities",
		"input-required-result-capability-check: asks for input only in the ways the request's client capabilities declare (elicitation, sampling, roots).",
		irCapabilities)
}

// irElicitation asks with the SDK's Elicit: its input request (user_name,
// the name form, no requestState) and its answer are the scenario's.
func irElicitation(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	answer, err := app.Elicit(ctx, req, keyUserName, questionName, nameSchema)
	if err != nil {
		return nil, nil, err
	}
	name, _ := answer.Content["name"].(string)
	if answer.Action != "accept" || name == "" {
		return &mcp.CallToolResult{Content: text("Hello, stranger! (no name was given)")}, nil, nil
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("Hello, %s!", name))}, nil, nil
}

// nameSchema is the form of nameForm(_, "name"), for Elicit.
var nameSchema = &jsonschema.Schema{
	Type:       "object",
	Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}},
	Required:   []string{"name"},
}

func irSampling(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	if answer, ok := sampleAnswer(req.Params.InputResponses, keyCapital); ok {
		return &mcp.CallToolResult{Content: text("The model answered: " + answer)}, nil, nil
	}
	return needInput(mcp.InputRequestMap{keyCapital: samplingRequest(questionCapital, 100)}, ""), nil, nil
}

// describeRoots lists roots for a tool result.
func describeRoots(r *mcp.ListRootsResult) string {
	if len(r.Roots) == 0 {
		return "The client has no roots."
	}
	uris := make([]string, len(r.Roots))
	for i, root := range r.Roots {
		uris[i] = root.URI
	}
	return fmt.Sprintf("The client has %d root(s): %s", len(uris), strings.Join(uris, ", "))
}

func irListRoots(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	if roots, ok := rootsAnswer(req.Params.InputResponses, keyClientRoots); ok {
		return &mcp.CallToolResult{Content: text(describeRoots(roots))}, nil, nil
	}
	return needInput(mcp.InputRequestMap{keyClientRoots: &mcp.ListRootsParams{}}, ""), nil, nil
}

// confirmWithState is a tool that asks for a confirmation with a
// requestState and answers only when the retry echoes the state it issued.
func confirmWithState(tool string) mcp.ToolHandlerFor[noInput, any] {
	return func(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
		first := roundState{Tool: tool, Round: 1}
		answer, answered := elicitAnswer(req.Params.InputResponses, keyConfirm)
		if !answered {
			if req.Params.RequestState != "" {
				if _, err := decodeState(tool, req.Params.RequestState, 1); err != nil {
					return nil, nil, err
				}
			}
			return needInput(mcp.InputRequestMap{keyConfirm: confirmRequest("Please confirm")}, first.encode()), nil, nil
		}
		if _, err := decodeState(tool, req.Params.RequestState, 1); err != nil {
			return nil, nil, err
		}
		ok, _ := answer.Content["ok"].(bool)
		return &mcp.CallToolResult{Content: text(fmt.Sprintf("state-ok: the requestState came back intact (action=%s, ok=%t)", answer.Action, ok))}, nil, nil
	}
}

var (
	irRequestState  = confirmWithState("test_input_required_result_request_state")
	irTamperedState = confirmWithState("test_input_required_result_tampered_state")
)

func irMultipleInputs(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	const tool = "test_input_required_result_multiple_inputs"
	responses := req.Params.InputResponses
	state := roundState{Tool: tool, Round: 1}
	if req.Params.RequestState != "" {
		if _, err := decodeState(tool, req.Params.RequestState, 1); err != nil {
			return nil, nil, err
		}
	}
	name, nameOK := acceptedString(responses, keyUserName, "name")
	greeting, greetingOK := sampleAnswer(responses, keyGreeting)
	roots, rootsOK := rootsAnswer(responses, keyClientRoots)
	missing := mcp.InputRequestMap{}
	if !nameOK {
		missing[keyUserName] = nameForm(questionName, "name")
	}
	if !greetingOK {
		missing[keyGreeting] = samplingRequest(questionGreeting, 50)
	}
	if !rootsOK {
		missing[keyClientRoots] = &mcp.ListRootsParams{}
	}
	if len(missing) > 0 {
		return needInput(missing, state.encode()), nil, nil
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("name=%q, greeting=%q. %s", name, greeting, describeRoots(roots)))}, nil, nil
}

func irMultiRound(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	const tool = "test_input_required_result_multi_round"
	responses := req.Params.InputResponses
	step1 := nameForm("Step 1: What is your name?", "name")
	step2 := nameForm("Step 2: What is your favorite color?", "color")
	if req.Params.RequestState == "" {
		return needInput(mcp.InputRequestMap{keyStep1: step1}, roundState{Tool: tool, Round: 1}.encode()), nil, nil
	}
	state, err := decodeState(tool, req.Params.RequestState, 1, 2)
	if err != nil {
		return nil, nil, err
	}
	if state.Round == 1 {
		name, ok := acceptedString(responses, keyStep1, "name")
		if !ok {
			return needInput(mcp.InputRequestMap{keyStep1: step1}, state.encode()), nil, nil
		}
		next := roundState{Tool: tool, Round: 2, Name: name}
		return needInput(mcp.InputRequestMap{keyStep2: step2}, next.encode()), nil, nil
	}
	color, ok := acceptedString(responses, keyStep2, "color")
	if !ok {
		return needInput(mcp.InputRequestMap{keyStep2: step2}, state.encode()), nil, nil
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("%s's favorite color is %s.", state.Name, color))}, nil, nil
}

func irCapabilities(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	caps := req.ClientCapabilities()
	responses := req.Params.InputResponses
	var got []string
	asks := mcp.InputRequestMap{}
	if hasCapability(caps, capElicitation) {
		if name, ok := acceptedString(responses, keyUserName, "name"); ok {
			got = append(got, fmt.Sprintf("name=%q", name))
		} else {
			asks[keyUserName] = nameForm(questionName, "name")
		}
	}
	if hasCapability(caps, capSampling) {
		if answer, ok := sampleAnswer(responses, keyCapital); ok {
			got = append(got, fmt.Sprintf("model=%q", answer))
		} else {
			asks[keyCapital] = samplingRequest(questionCapital, 100)
		}
	}
	if hasCapability(caps, capRoots) {
		if roots, ok := rootsAnswer(responses, keyClientRoots); ok {
			got = append(got, describeRoots(roots))
		} else {
			asks[keyClientRoots] = &mcp.ListRootsParams{}
		}
	}
	if len(asks) > 0 {
		return needInput(asks, ""), nil, nil
	}
	if len(got) == 0 {
		return &mcp.CallToolResult{Content: text("The client declared none of elicitation, sampling and roots: there is nothing to ask.")}, nil, nil
	}
	return &mcp.CallToolResult{Content: text("Gathered: " + strings.Join(got, "; "))}, nil, nil
}

// addInputRequiredPrompt adds the prompt that asks the user for context
// before it can be built: input_required is not only for tools.
func (f *conformanceFixture) addInputRequiredPrompt(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{
		Name:        inputRequiredPrompt,
		Title:       "Prompt that needs input",
		Description: "input-required-result-non-tool-request: asks the user what context to use (input request user_context), then builds its message from it.",
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if given, ok := acceptedString(req.Params.InputResponses, keyUserContext, "context"); ok {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Answer with this context in mind: %q.", given)}},
			}}, nil
		}
		return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{
			keyUserContext: nameForm("What context should the prompt use?", "context"),
		}}, nil
	})
}
