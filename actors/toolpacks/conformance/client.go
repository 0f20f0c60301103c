package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

//lint:file-ignore SA1019 the suite requires sampling and roots fixtures (SEP-2577 deprecates them from 2026-07-28, still serves them).

// The tools that need the client: they ask for a sample (sampling) or for
// the user's input (elicitation).
//
// test_elicitation and test_streaming_elicitation ask as a user's tool
// does, with the SDK's Elicit: in a session before 2026-07-28 it sends
// elicitation/create on the call's own response stream and waits for the
// answer; from 2026-07-28 on (servers must not send clients requests) it
// returns the input_required result, and the client's retry brings the
// answer. The others return their request as a multi-round-trip input
// request (SEP-2322) themselves and answer when the call is retried with
// the response (for an older client go-sdk's server middleware sends the
// request and re-invokes the tool with the answer): sampling has no SDK
// call, and the SEP-1034/SEP-1330 forms go to the client exactly as
// written (see elicitForm). Either way one code path serves both protocol
// eras.

// Keys of the client tools' input requests.
const (
	samplingKey    = "sampling"
	elicitationKey = "user_input"
)

// Client capabilities a tool can need, by their name in ClientCapabilities.
const (
	capSampling    = "sampling"
	capElicitation = "elicitation"
	capRoots       = "roots"
)

// hasCapability reports whether caps declares the named capability.
func hasCapability(caps *mcp.ClientCapabilities, name string) bool {
	if caps == nil {
		return false
	}
	switch name {
	case capSampling:
		return caps.Sampling != nil
	case capElicitation:
		return caps.Elicitation != nil
	case capRoots:
		return caps.RootsV2 != nil
	}
	return false
}

// requireCapabilities returns the MissingRequiredClientCapability error
// (-32021, SEP-2575) when caps lacks any of the named capabilities; its
// data names what is missing as a ClientCapabilities object, e.g.
// {"requiredCapabilities":{"sampling":{}}}.
func requireCapabilities(tool string, caps *mcp.ClientCapabilities, names ...string) error {
	missing := map[string]struct{}{}
	for _, name := range names {
		if !hasCapability(caps, name) {
			missing[name] = struct{}{}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"requiredCapabilities": missing})
	if err != nil {
		return err
	}
	list := make([]string, 0, len(missing))
	for name := range missing {
		list = append(list, name)
	}
	slices.Sort(list)
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: fmt.Sprintf("%s needs the client capabilities it did not declare: %s", tool, strings.Join(list, ", ")),
		Data:    data,
	}
}

// elicitAnswer is the elicitation response under key, if the retry brought
// one.
func elicitAnswer(responses mcp.InputResponseMap, key string) (*mcp.ElicitResult, bool) {
	r, ok := responses[key].(*mcp.ElicitResult)
	return r, ok && r != nil
}

// sampleAnswer is the text of the sampling response under key, if the
// retry brought one (a client may answer with one content item or, with
// tool use, several: their texts are joined).
func sampleAnswer(responses mcp.InputResponseMap, key string) (string, bool) {
	var content []mcp.Content
	switch r := responses[key].(type) {
	case *mcp.CreateMessageResult:
		if r == nil {
			return "", false
		}
		content = []mcp.Content{r.Content}
	case *mcp.CreateMessageWithToolsResult:
		if r == nil {
			return "", false
		}
		content = r.Content
	default:
		return "", false
	}
	var texts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, " "), true
}

// rootsAnswer is the roots/list response under key, if the retry brought
// one.
func rootsAnswer(responses mcp.InputResponseMap, key string) (*mcp.ListRootsResult, bool) {
	r, ok := responses[key].(*mcp.ListRootsResult)
	return r, ok && r != nil
}

// samplingRequest asks the client's model to answer prompt.
func samplingRequest(prompt string, maxTokens int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: maxTokens,
	}
}

// describeElicitation renders an elicitation answer for a tool result:
// "action=accept, content={...}".
func describeElicitation(r *mcp.ElicitResult) string {
	content, err := json.Marshal(r.Content)
	if err != nil || r.Content == nil {
		content = []byte("{}")
	}
	return fmt.Sprintf("action=%s, content=%s", r.Action, content)
}

// samplingInput is test_sampling's input.
type samplingInput struct {
	Prompt string `json:"prompt" jsonschema:"the prompt to send to the client's model"`
}

// elicitationInput is test_elicitation's input.
type elicitationInput struct {
	Message string `json:"message" jsonschema:"the message to show the user"`
}

func (f *conformanceFixture) addClientTools(s *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_sampling",
		Description: "tools-call-sampling: asks the client's model to answer the prompt (sampling/createMessage, 100 tokens) and returns the answer. Needs the sampling capability.",
		Annotations: readOnly,
	}, testSampling)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_elicitation",
		Description: "tools-call-elicitation: asks the user for a username and an email (elicitation/create) and returns the answer. Needs the elicitation capability.",
		Annotations: readOnly,
	}, testElicitation)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_elicitation_sep1034_defaults",
		Description: "elicitation-sep1034-defaults: asks the user for a form whose string, integer, number, enum and boolean fields all have defaults (SEP-1034).",
		Annotations: readOnly,
	}, elicitForm("test_elicitation_sep1034_defaults", "Please review your profile (every field has a default).", sep1034Schema))

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_elicitation_sep1330_enums",
		Description: "elicitation-sep1330-enums: asks the user for a form with the five enum shapes of SEP-1330 (untitled, titled and legacy titled single-select; untitled and titled multi-select).",
		Annotations: readOnly,
	}, elicitForm("test_elicitation_sep1330_enums", "Please choose your options.", sep1330Schema))

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_streaming_elicitation",
		Description: "server-stateless: asks the user to confirm. Before 2026-07-28 the elicitation/create request is streamed on the call's response stream; from 2026-07-28 it comes back as an input_required result, never as a request of its own.",
		Annotations: readOnly,
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
		answer, err := elicit(ctx, req, "test_streaming_elicitation", "Please confirm to continue.", confirmSchema)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: text("Elicitation completed: " + describeElicitation(answer))}, nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_missing_capability",
		Description: "server-stateless: needs the client's sampling capability. Without it the call fails with MissingRequiredClientCapability (-32021) naming sampling; with it the tool asks the client's model one question.",
		Annotations: readOnly,
	}, testMissingCapability)
}

func testSampling(_ context.Context, req *mcp.CallToolRequest, in samplingInput) (*mcp.CallToolResult, any, error) {
	if answer, ok := sampleAnswer(req.Params.InputResponses, samplingKey); ok {
		return &mcp.CallToolResult{Content: text("LLM response: " + answer)}, nil, nil
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "test_sampling: prompt must not be empty"}
	}
	if err := requireCapabilities("test_sampling", req.ClientCapabilities(), capSampling); err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{samplingKey: samplingRequest(in.Prompt, 100)}}, nil, nil
}

// userInfoSchema is test_elicitation's form.
var userInfoSchema = mustSchema(`{
	"type": "object",
	"properties": {
		"username": {"type": "string", "description": "User's response"},
		"email": {"type": "string", "description": "User's email address"}
	},
	"required": ["username", "email"]
}`)

func testElicitation(ctx context.Context, req *mcp.CallToolRequest, in elicitationInput) (*mcp.CallToolResult, any, error) {
	if _, ok := elicitAnswer(req.Params.InputResponses, elicitationKey); !ok && strings.TrimSpace(in.Message) == "" {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "test_elicitation: message must not be empty"}
	}
	answer, err := elicit(ctx, req, "test_elicitation", in.Message, userInfoSchema)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: text("User response: " + describeElicitation(answer))}, nil, nil
}

// elicit asks for the form schema with the SDK's Elicit (under
// elicitationKey), after refusing a client without the elicitation
// capability with -32021 as the suite requires (Elicit's own refusal,
// ErrCannotElicit, is not that protocol error).
func elicit(ctx context.Context, req *mcp.CallToolRequest, tool, message string, schema *jsonschema.Schema) (*mcp.ElicitResult, error) {
	if _, ok := elicitAnswer(req.Params.InputResponses, elicitationKey); !ok {
		if err := requireCapabilities(tool, req.ClientCapabilities(), capElicitation); err != nil {
			return nil, err
		}
	}
	return app.Elicit(ctx, req, elicitationKey, message, schema)
}

// mustSchema reads one of the fixture's constant forms.
func mustSchema(raw string) *jsonschema.Schema {
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		panic(fmt.Sprintf("conformance: a fixture's form is not a JSON schema: %v", err))
	}
	return &s
}

// sep1034Schema has a default for every primitive type (SEP-1034).
var sep1034Schema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"name": {"type": "string", "title": "Name", "default": "John Doe"},
		"age": {"type": "integer", "title": "Age", "minimum": 0, "default": 30},
		"score": {"type": "number", "title": "Score", "minimum": 0, "maximum": 100, "default": 95.5},
		"status": {"type": "string", "title": "Status", "enum": ["active", "inactive", "pending"], "default": "active"},
		"verified": {"type": "boolean", "title": "Verified", "default": true}
	}
}`)

// sep1330Schema has one field of each enum shape of SEP-1330.
var sep1330Schema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"untitledSingle": {"type": "string", "title": "Untitled single-select", "enum": ["option1", "option2", "option3"]},
		"titledSingle": {"type": "string", "title": "Titled single-select", "oneOf": [
			{"const": "value1", "title": "First Option"},
			{"const": "value2", "title": "Second Option"},
			{"const": "value3", "title": "Third Option"}
		]},
		"legacyEnum": {"type": "string", "title": "Legacy titled single-select", "enum": ["opt1", "opt2", "opt3"],
			"enumNames": ["Option One", "Option Two", "Option Three"]},
		"untitledMulti": {"type": "array", "title": "Untitled multi-select", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
		"titledMulti": {"type": "array", "title": "Titled multi-select", "items": {"anyOf": [
			{"const": "value1", "title": "First Choice"},
			{"const": "value2", "title": "Second Choice"},
			{"const": "value3", "title": "Third Choice"}
		]}}
	}
}`)

// confirmSchema is a one-field yes/no form.
var confirmSchema = mustSchema(`{
	"type": "object",
	"properties": {"confirmed": {"type": "boolean", "title": "Confirm", "description": "Yes (true) or no (false)"}},
	"required": ["confirmed"]
}`)

// elicitForm is a tool without arguments that asks the user to fill in
// schema and returns what the user did. It returns the input request
// itself rather than calling Elicit: these forms (SEP-1034 defaults,
// SEP-1330 enum shapes) go to the client byte for byte as the suite wrote
// them, and an answer is reported as given, not checked against them.
func elicitForm(tool, message string, schema json.RawMessage) mcp.ToolHandlerFor[noInput, any] {
	return func(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
		if answer, ok := elicitAnswer(req.Params.InputResponses, elicitationKey); ok {
			return &mcp.CallToolResult{Content: text("Elicitation completed: " + describeElicitation(answer))}, nil, nil
		}
		if err := requireCapabilities(tool, req.ClientCapabilities(), capElicitation); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			elicitationKey: &mcp.ElicitParams{Message: message, RequestedSchema: schema},
		}}, nil, nil
	}
}

func testMissingCapability(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	if err := requireCapabilities("test_missing_capability", req.ClientCapabilities(), capSampling); err != nil {
		return nil, nil, err
	}
	if answer, ok := sampleAnswer(req.Params.InputResponses, samplingKey); ok {
		return &mcp.CallToolResult{Content: text("The client can sample: " + answer)}, nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
		samplingKey: samplingRequest("Reply with one word to show that sampling works.", 20),
	}}, nil, nil
}
