package toolpacks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

//lint:file-ignore SA1019 the tests drive the fixtures for deprecated sampling, roots and logging (SEP-2577).

// The conformance fixture's features, as the suite's scenarios name them.
var (
	conformanceTools = []string{
		"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
		"test_multiple_content_types", "test_error_handling", "test_tool_with_logging", "test_logging_tool",
		"test_tool_with_progress", "test_reconnection", "test_trigger_tool_change", "test_trigger_prompt_change",
		"json_schema_2020_12_tool", "test_x_mcp_header",
		"test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
		"test_streaming_elicitation", "test_missing_capability",
		"test_input_required_result_elicitation", "test_input_required_result_sampling",
		"test_input_required_result_list_roots", "test_input_required_result_request_state",
		"test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
		"test_input_required_result_tampered_state", "test_input_required_result_capabilities",
		"greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input",
		"test_tool_with_task",
	}
	conformanceResourceURIs = []string{"test://static-binary", "test://static-text", "test://watched-resource"}
	conformancePrompts      = []string{
		"test_input_required_result_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
		"test_prompt_with_image", "test_simple_prompt",
	}
)

// fullClient answers every kind of client request: sampling with "Paris",
// elicitation with the given answer, roots with one root.
func fullClient(answer map[string]any) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
		},
	}
}

// rpcError is the JSON-RPC error in err (failing the test without one).
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return e
}

func TestConformanceFeatures(t *testing.T) {
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "conformance"), nil, p.version)
			if got, want := toolNames(t, cs), sorted(conformanceTools); !slices.Equal(got, want) {
				t.Errorf("tools = %q\nwant %q", got, want)
			}
			var uris []string
			for r, err := range cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if r.Name == "" || r.Description == "" {
					t.Errorf("resource %s lacks a name or description", r.URI)
				}
				uris = append(uris, r.URI)
			}
			if !slices.Equal(uris, conformanceResourceURIs) {
				t.Errorf("resources = %q, want %q", uris, conformanceResourceURIs)
			}
			var templates []string
			for rt, err := range cs.ResourceTemplates(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				templates = append(templates, rt.URITemplate)
			}
			if want := []string{"test://template/{id}/data"}; !slices.Equal(templates, want) {
				t.Errorf("templates = %q, want %q", templates, want)
			}
			var prompts []string
			for pr, err := range cs.Prompts(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if pr.Description == "" {
					t.Errorf("prompt %s has no description", pr.Name)
				}
				prompts = append(prompts, pr.Name)
			}
			if !slices.Equal(prompts, conformancePrompts) {
				t.Errorf("prompts = %q, want %q", prompts, conformancePrompts)
			}
		})
	}
	cs := connect(t, newServer(t, "conformance"), nil, legacyProtocol)
	caps := cs.InitializeResult().Capabilities
	if caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe ||
		caps.Tools == nil || !caps.Tools.ListChanged || caps.Prompts == nil || !caps.Prompts.ListChanged {
		t.Errorf("capabilities %+v: want completions, resources.subscribe, tools and prompts listChanged", caps)
	}
}

func TestConformanceContentTools(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "conformance"), nil, p.version)
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_simple_text"}), "This is a simple text response for testing.")

			res := callTool(t, cs, &mcp.CallToolParams{Name: "test_image_content"})
			img, ok := res.Content[0].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" {
				t.Fatalf("test_image_content = %#v", res.Content)
			}
			decoded, err := png.Decode(bytes.NewReader(img.Data))
			if err != nil || decoded.Bounds().Dx() != 1 || decoded.Bounds().Dy() != 1 {
				t.Errorf("image is not a 1x1 PNG: %v", err)
			} else if r, g, b, a := decoded.At(0, 0).RGBA(); r != 0xffff || g != 0 || b != 0 || a != 0xffff {
				t.Errorf("pixel = %v %v %v %v, want opaque red", r, g, b, a)
			}

			res = callTool(t, cs, &mcp.CallToolParams{Name: "test_audio_content"})
			audio, ok := res.Content[0].(*mcp.AudioContent)
			if !ok || audio.MIMEType != "audio/wav" || len(audio.Data) != 44+160 ||
				string(audio.Data[:4]) != "RIFF" || string(audio.Data[8:16]) != "WAVEfmt " || string(audio.Data[36:40]) != "data" {
				t.Errorf("test_audio_content is not a PCM WAV: %#v", res.Content)
			}

			res = callTool(t, cs, &mcp.CallToolParams{Name: "test_embedded_resource"})
			if r, ok := res.Content[0].(*mcp.EmbeddedResource); !ok || r.Resource.URI != "test://embedded-resource" ||
				r.Resource.MIMEType != "text/plain" || r.Resource.Text != "This is an embedded resource content." {
				t.Errorf("test_embedded_resource = %#v", res.Content)
			}

			res = callTool(t, cs, &mcp.CallToolParams{Name: "test_multiple_content_types"})
			if len(res.Content) != 3 {
				t.Fatalf("test_multiple_content_types: %d items", len(res.Content))
			}
			if _, ok := res.Content[1].(*mcp.ImageContent); !ok {
				t.Errorf("second item %#v is not an image", res.Content[1])
			}
			if r, ok := res.Content[2].(*mcp.EmbeddedResource); !ok || r.Resource.MIMEType != "application/json" || r.Resource.Text != `{"test":"data","value":123}` {
				t.Errorf("third item = %#v", res.Content[2])
			}

			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_error_handling"}), "intentionally returns an error")
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_x_mcp_header", Arguments: map[string]any{"region": "eu"}}), "region=eu")
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_reconnection"}), "Answered on the open stream (this transport cannot close it).")
		})
	}
}

func TestConformanceJSONSchema202012(t *testing.T) {
	ctx := context.Background()
	cs := connect(t, newServer(t, "conformance"), nil, latestProtocol)
	var schema map[string]any
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "json_schema_2020_12_tool" {
			raw, _ := json.Marshal(tool.InputSchema)
			if err := json.Unmarshal(raw, &schema); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, kw := range []string{"$schema", "$defs", "allOf", "if", "then", "else", "additionalProperties"} {
		if _, ok := schema[kw]; !ok {
			t.Errorf("tools/list dropped %s from the input schema: %v", kw, schema)
		}
	}
	if addr, _ := schema["$defs"].(map[string]any)["address"].(map[string]any); addr["$anchor"] != "addressDef" {
		t.Errorf("$defs.address lost its $anchor: %v", addr)
	}
	// The tool holds its arguments to the schema.
	wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "json_schema_2020_12_tool",
		Arguments: map[string]any{"name": "Ada", "contactMethod": "email", "email": "ada@example.com"}}),
		"The arguments satisfy the JSON Schema 2020-12 input schema.")
	for name, args := range map[string]map[string]any{
		"phone chosen but missing":  {"contactMethod": "phone", "email": "ada@example.com"},
		"neither phone nor email":   {"name": "Ada"},
		"an unexpected property":    {"email": "ada@example.com", "age": 36},
		"address of the wrong type": {"email": "ada@example.com", "address": "Main Street"},
	} {
		res := callTool(t, cs, &mcp.CallToolParams{Name: "json_schema_2020_12_tool", Arguments: args})
		if !res.IsError {
			t.Errorf("%s: accepted %v", name, args)
		}
	}
}

func TestConformanceLoggingFollowsEachSessionsLevel(t *testing.T) {
	// One server, two sessions with different levels: each hears what its
	// own level lets through.
	ctx := context.Background()
	s := newServer(t, "conformance")
	listen := func() (*mcp.ClientSession, <-chan *mcp.LoggingMessageParams) {
		logs := make(chan *mcp.LoggingMessageParams, 16)
		cs := connect(t, s, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			logs <- req.Params
		}}, legacyProtocol)
		return cs, logs
	}
	verbose, verboseLogs := listen()
	terse, terseLogs := listen()
	if err := verbose.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if err := terse.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}

	callTool(t, verbose, &mcp.CallToolParams{Name: "test_tool_with_logging"})
	for _, want := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if got := receive(t, verboseLogs, "a log message"); got.Level != "info" || got.Data != want || got.Logger != "conformance" {
			t.Errorf("log = %+v, want info %q", got, want)
		}
	}

	callTool(t, terse, &mcp.CallToolParams{Name: "test_logging_tool"})
	for _, want := range []mcp.LoggingLevel{"warning", "error"} {
		if got := receive(t, terseLogs, "a log message"); got.Level != want {
			t.Errorf("terse session got a %s message, want %s", got.Level, want)
		}
	}
	callTool(t, verbose, &mcp.CallToolParams{Name: "test_logging_tool"})
	for _, want := range []mcp.LoggingLevel{"debug", "info", "warning", "error"} {
		if got := receive(t, verboseLogs, "a log message"); got.Level != want {
			t.Errorf("verbose session got a %s message, want %s", got.Level, want)
		}
	}
	select {
	case extra := <-terseLogs:
		t.Errorf("terse session heard another session's or a filtered message: %+v", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestConformanceProgress(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			progress := make(chan *mcp.ProgressNotificationParams, 8)
			cs := connect(t, newServer(t, "conformance"), &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params
				},
			}, p.version)
			params := &mcp.CallToolParams{Name: "test_tool_with_progress"}
			params.SetProgressToken("tok-1")
			callTool(t, cs, params)
			for _, want := range []float64{0, 50, 100} {
				n := receive(t, progress, "a progress notification")
				if n.ProgressToken != "tok-1" || n.Total != 100 || n.Progress != want {
					t.Errorf("progress = %+v, want %v of 100 for tok-1", n, want)
				}
			}
			// Without a token the tool reports nothing.
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_tool_with_progress"}), "Done (no progress token, so no progress was reported).")
		})
	}
}

func TestConformanceClientTools(t *testing.T) {
	// On both eras: before 2026-07-28 go-sdk sends the requests on the
	// call's stream; from 2026-07-28 on the client retries with answers.
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			answer := map[string]any{"username": "ada", "email": "ada@example.com"}
			cs := connect(t, newServer(t, "conformance"), fullClient(answer), p.version)
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "Capital of France?"}}),
				"LLM response: Paris")
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "Who are you?"}}),
				`User response: action=accept, content={"email":"ada@example.com","username":"ada"}`)
			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_missing_capability"}), "The client can sample: Paris")

			form := connect(t, newServer(t, "conformance"), fullClient(map[string]any{"confirmed": true}), p.version)
			wantText(t, callTool(t, form, &mcp.CallToolParams{Name: "test_streaming_elicitation"}),
				`Elicitation completed: action=accept, content={"confirmed":true}`)
		})
	}
}

func TestConformanceElicitationSchemas(t *testing.T) {
	var seen []*mcp.ElicitParams
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		seen = append(seen, req.Params)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	cs := connect(t, newServer(t, "conformance"), opts, legacyProtocol)
	wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_elicitation_sep1034_defaults"}), "Elicitation completed: action=decline, content={}")
	wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_elicitation_sep1330_enums"}), "Elicitation completed: action=decline, content={}")
	if len(seen) != 2 {
		t.Fatalf("%d elicitations, want 2", len(seen))
	}
	props := func(p *mcp.ElicitParams) map[string]map[string]any {
		raw, _ := json.Marshal(p.RequestedSchema)
		var s struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		return s.Properties
	}
	defaults := props(seen[0])
	for field, want := range map[string]any{"name": "John Doe", "age": 30.0, "score": 95.5, "status": "active", "verified": true} {
		if got := defaults[field]["default"]; got != want {
			t.Errorf("SEP-1034 %s default = %v, want %v", field, got, want)
		}
	}
	enums := props(seen[1])
	if enums["titledSingle"]["oneOf"] == nil || enums["legacyEnum"]["enumNames"] == nil ||
		enums["untitledMulti"]["items"].(map[string]any)["enum"] == nil || enums["titledMulti"]["items"].(map[string]any)["anyOf"] == nil ||
		enums["untitledSingle"]["enum"] == nil {
		t.Errorf("SEP-1330 schema lacks an enum shape: %v", enums)
	}
}

func TestConformanceMissingCapability(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			// A client that declares nothing.
			cs := connect(t, newServer(t, "conformance"), &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}, p.version)
			for tool, args := range map[string]any{"test_missing_capability": nil, "test_sampling": map[string]any{"prompt": "x"}} {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
				e := rpcError(t, err)
				if e.Code != mcp.CodeMissingRequiredClientCapabilities || string(e.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
					t.Errorf("%s: error %d %s %s, want -32021 naming sampling", tool, e.Code, e.Message, e.Data)
				}
			}
		})
	}
}

// manual connects a 2026-07-28 client that hands input_required results
// back to the caller instead of answering them.
func manual(t *testing.T, s *mcp.Server, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	return connect(t, s, &mcp.ClientOptions{Capabilities: caps, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}, latestProtocol)
}

var allInputCaps = &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}, RootsV2: &mcp.RootCapabilities{}}

func accept(content map[string]any) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: content}
}

// keys are the input request keys of a result that needs input.
func keys(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	if !res.NeedsInput() {
		t.Fatalf("want input_required, got %q", mcpclient.Text(res))
	}
	var k []string
	for key := range res.InputRequests {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

func TestConformanceInputRequiredRounds(t *testing.T) {
	cs := manual(t, newServer(t, "conformance"), allInputCaps)
	call := func(name string, responses mcp.InputResponseMap, state string) *mcp.CallToolResult {
		return callTool(t, cs, &mcp.CallToolParams{Name: name, InputResponses: responses, RequestState: state})
	}

	// One elicitation, re-asked when the retry lacks it; extra answers are ignored.
	const basic = "test_input_required_result_elicitation"
	if k := keys(t, call(basic, nil, "")); !slices.Equal(k, []string{"user_name"}) {
		t.Errorf("%s asks %q", basic, k)
	}
	if k := keys(t, call(basic, mcp.InputResponseMap{"wrong_key": accept(map[string]any{"name": "x"})}, "")); !slices.Equal(k, []string{"user_name"}) {
		t.Errorf("%s with a wrong key asks %q", basic, k)
	}
	wantText(t, call(basic, mcp.InputResponseMap{"user_name": accept(map[string]any{"name": "Alice"}), "extra": accept(nil)}, ""), "Hello, Alice!")

	// Sampling and roots.
	res := call("test_input_required_result_sampling", nil, "")
	if k := keys(t, res); !slices.Equal(k, []string{"capital_question"}) {
		t.Errorf("sampling asks %q", k)
	}
	wantText(t, call("test_input_required_result_sampling", mcp.InputResponseMap{
		"capital_question": &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "Paris."}}},
	}, ""), "The model answered: Paris.")
	keys(t, call("test_input_required_result_list_roots", nil, ""))
	wantText(t, call("test_input_required_result_list_roots", mcp.InputResponseMap{
		"client_roots": &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///a"}, {URI: "file:///b"}}},
	}, ""), "The client has 2 root(s): file:///a, file:///b")

	// The request state comes back, and only an intact one is accepted.
	for _, tool := range []string{"test_input_required_result_request_state", "test_input_required_result_tampered_state"} {
		first := call(tool, nil, "")
		if k := keys(t, first); !slices.Equal(k, []string{"confirm"}) || first.RequestState == "" {
			t.Fatalf("%s: keys %q, state %q", tool, k, first.RequestState)
		}
		answer := mcp.InputResponseMap{"confirm": accept(map[string]any{"ok": true})}
		if got := mcpclient.Text(call(tool, answer, first.RequestState)); !strings.HasPrefix(got, "state-ok") {
			t.Errorf("%s: retry answered %q", tool, got)
		}
		for _, bad := range []string{"", first.RequestState + "-TAMPERED", `{"tool":"another","round":1}`, `{"tool":"` + tool + `","round":7}`} {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, InputResponses: answer, RequestState: bad})
			if e := rpcError(t, err); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "invalid requestState") {
				t.Errorf("%s with state %q: %v", tool, bad, e)
			}
		}
	}

	// Three requests at once; a partial answer is asked only for the rest.
	const multi = "test_input_required_result_multiple_inputs"
	first := call(multi, nil, "")
	if k := keys(t, first); !slices.Equal(k, []string{"client_roots", "greeting", "user_name"}) || first.RequestState == "" {
		t.Fatalf("%s: keys %q, state %q", multi, k, first.RequestState)
	}
	partial := mcp.InputResponseMap{"user_name": accept(map[string]any{"name": "Alice"})}
	if k := keys(t, call(multi, partial, first.RequestState)); !slices.Equal(k, []string{"client_roots", "greeting"}) {
		t.Errorf("%s after a partial answer asks %q", multi, k)
	}
	partial["greeting"] = &mcp.CreateMessageWithToolsResult{Role: "assistant", Content: []mcp.Content{&mcp.TextContent{Text: "Hi!"}}}
	partial["client_roots"] = &mcp.ListRootsResult{Roots: []*mcp.Root{}}
	wantText(t, call(multi, partial, first.RequestState), `name="Alice", greeting="Hi!". The client has no roots.`)

	// Three rounds; the state changes and carries the first answer.
	const rounds = "test_input_required_result_multi_round"
	r1 := call(rounds, nil, "")
	if k := keys(t, r1); !slices.Equal(k, []string{"step1"}) {
		t.Fatalf("round 1 asks %q", k)
	}
	r2 := call(rounds, mcp.InputResponseMap{"step1": accept(map[string]any{"name": "Alice"})}, r1.RequestState)
	if k := keys(t, r2); !slices.Equal(k, []string{"step2"}) || r2.RequestState == r1.RequestState {
		t.Fatalf("round 2 asks %q with state %q (round 1: %q)", k, r2.RequestState, r1.RequestState)
	}
	wantText(t, call(rounds, mcp.InputResponseMap{"step2": accept(map[string]any{"color": "blue"})}, r2.RequestState), "Alice's favorite color is blue.")
}

func TestConformanceInputRequiredFollowsTheDeclaredCapabilities(t *testing.T) {
	const tool = "test_input_required_result_capabilities"
	samplingOnly := manual(t, newServer(t, "conformance"), &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
	res := callTool(t, samplingOnly, &mcp.CallToolParams{Name: tool})
	if k := keys(t, res); !slices.Equal(k, []string{"capital_question"}) {
		t.Errorf("a sampling-only client is asked %q", k)
	}
	everything := manual(t, newServer(t, "conformance"), allInputCaps)
	if k := keys(t, callTool(t, everything, &mcp.CallToolParams{Name: tool})); !slices.Equal(k, []string{"capital_question", "client_roots", "user_name"}) {
		t.Errorf("a client with every capability is asked %q", k)
	}
	nothing := manual(t, newServer(t, "conformance"), &mcp.ClientCapabilities{})
	wantText(t, callTool(t, nothing, &mcp.CallToolParams{Name: tool}),
		"The client declared none of elicitation, sampling and roots: there is nothing to ask.")
}

func TestConformanceInputRequiredPrompt(t *testing.T) {
	ctx := context.Background()
	cs := manual(t, newServer(t, "conformance"), allInputCaps)
	first, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_input_required_result_prompt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.InputRequests["user_context"]; !ok {
		t.Fatalf("first get: %+v, want an input request user_context", first)
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_input_required_result_prompt",
		InputResponses: mcp.InputResponseMap{"user_context": accept(map[string]any{"context": "tests"})}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || res.Messages[0].Content.(*mcp.TextContent).Text != `Answer with this context in mind: "tests".` {
		t.Errorf("prompt = %+v", res.Messages)
	}
}

func TestConformanceResourcesPromptsCompletion(t *testing.T) {
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "conformance"), nil, p.version)
			read := func(uri string) *mcp.ResourceContents {
				t.Helper()
				rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil {
					t.Fatalf("read %s: %v", uri, err)
				}
				if len(rr.Contents) != 1 || rr.Contents[0].URI != uri {
					t.Fatalf("read %s: %+v", uri, rr.Contents)
				}
				return rr.Contents[0]
			}
			if c := read("test://static-text"); c.MIMEType != "text/plain" || c.Text != "This is the content of the static text resource." {
				t.Errorf("static-text = %+v", c)
			}
			if c := read("test://static-binary"); c.MIMEType != "image/png" || !bytes.HasPrefix(c.Blob, []byte("\x89PNG")) {
				t.Errorf("static-binary = %+v", c)
			}
			if c := read("test://watched-resource"); c.Text != "Watched resource, version 0." {
				t.Errorf("watched-resource = %+v", c)
			}
			if c := read("test://template/123/data"); c.MIMEType != "application/json" || c.Text != `{"id":"123","templateTest":true,"data":"Data for ID: 123"}` {
				t.Errorf("template = %+v", c)
			}
			for _, uri := range []string{"test://nonexistent-resource-for-conformance-testing", "test://template//data"} {
				_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if e := rpcError(t, err); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(e.Data), uri) {
					t.Errorf("read %s: %v (data %s), want -32602 naming the URI", uri, e, e.Data)
				}
			}

			get := func(name string, args map[string]string) []*mcp.PromptMessage {
				t.Helper()
				gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("prompt %s: %v", name, err)
				}
				return gp.Messages
			}
			if m := get("test_simple_prompt", nil); len(m) != 1 || m[0].Content.(*mcp.TextContent).Text != "This is a simple prompt for testing." {
				t.Errorf("simple prompt = %+v", m)
			}
			if m := get("test_prompt_with_arguments", map[string]string{"arg1": "hello", "arg2": "world"}); m[0].Content.(*mcp.TextContent).Text != "Prompt with arguments: arg1='hello', arg2='world'" {
				t.Errorf("prompt with arguments = %+v", m[0].Content)
			}
			if m := get("test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://x"}); len(m) != 2 || m[0].Content.(*mcp.EmbeddedResource).Resource.URI != "test://x" {
				t.Errorf("prompt with an embedded resource = %+v", m)
			}
			if m := get("test_prompt_with_image", nil); len(m) != 2 || m[0].Content.(*mcp.ImageContent).MIMEType != "image/png" {
				t.Errorf("prompt with an image = %+v", m)
			}
			if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "x"}}); err == nil {
				t.Error("a missing required argument was accepted")
			}

			complete := func(ref *mcp.CompleteReference, name, value string) mcp.CompletionResultDetails {
				t.Helper()
				cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: name, Value: value}})
				if err != nil {
					t.Fatalf("complete %s=%q: %v", name, value, err)
				}
				return cr.Completion
			}
			prompt := &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}
			if c := complete(prompt, "arg1", "par"); !slices.Equal(c.Values, []string{"paris", "park", "party"}) || c.Total != 3 || c.HasMore {
				t.Errorf("complete arg1=par: %+v", c)
			}
			if c := complete(prompt, "arg2", "zzz"); c.Values == nil || len(c.Values) != 0 {
				t.Errorf("complete arg2=zzz: %+v, want an empty (not null) list", c)
			}
			if c := complete(&mcp.CompleteReference{Type: "ref/resource", URI: "test://template/{id}/data"}, "id", "1"); !slices.Equal(c.Values, []string{"1", "123"}) {
				t.Errorf("complete id=1: %+v", c)
			}
			if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "nope"}, Argument: mcp.CompleteParamsArgument{Name: "a"}}); err == nil {
				t.Error("completion of an unknown prompt succeeded")
			}
		})
	}
}

// subscriber connects a legacy client to s that reports resource updates.
func subscriber(t *testing.T, s *mcp.Server) (*mcp.ClientSession, <-chan string) {
	updates := make(chan string, 16)
	cs := connect(t, s, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updates <- req.Params.URI
	}}, legacyProtocol)
	return cs, updates
}

// quiet asserts nothing arrives on ch for a moment.
func quiet(t *testing.T, ch <-chan string, who string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Errorf("%s got an update for %s", who, v)
	case <-time.After(100 * time.Millisecond):
	}
}

// waitPending waits until the fake clock has n timers armed.
func waitPending(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for c.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers armed, want %d", c.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConformanceSubscriptionsArePerSessionOnASharedServer(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(time.Unix(0, 0))
	s, closer, err := toolpacks.NewServer(testImpl, []string{"conformance"}, toolpacks.Options{Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closer)
	a, aUpdates := subscriber(t, s)
	b, bUpdates := subscriber(t, s)
	if fake.Pending() != 0 {
		t.Fatal("the watched resource changes with nobody subscribed")
	}

	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://static-text"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://no-such-resource"}); err == nil {
		t.Error("subscribing to an unknown resource succeeded")
	}
	fake.Advance(2 * time.Second)
	if uri := receive(t, aUpdates, "an update for the subscriber"); uri != "test://watched-resource" {
		t.Errorf("update for %s", uri)
	}
	quiet(t, bUpdates, "the session not subscribed to the watched resource")

	// A second subscriber: still one timer for the server, both hear it.
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	if n := fake.Pending(); n != 1 {
		t.Fatalf("%d timers for two subscribers, want 1", n)
	}
	fake.Advance(2 * time.Second)
	receive(t, aUpdates, "an update for the first subscriber")
	receive(t, bUpdates, "an update for the second subscriber")
	rr, err := a.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://watched-resource"})
	if err != nil || rr.Contents[0].Text != "Watched resource, version 2." {
		t.Errorf("after two changes: %+v %v", rr, err)
	}

	// Unsubscribing is per session.
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(2 * time.Second)
	receive(t, bUpdates, "an update for the remaining subscriber")
	quiet(t, aUpdates, "the session that unsubscribed")

	// A session that ends without unsubscribing releases its subscription:
	// with no subscriber left, the timer is disarmed.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitPending(t, fake, 0)

	// Subscribing again re-arms it; closing the server disarms it for good.
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	waitPending(t, fake, 1)
	closer()
	closer()
	waitPending(t, fake, 0)
	fake.Advance(time.Minute)
	quiet(t, aUpdates, "a subscriber of a closed server")
}

func TestConformanceListChangesReachTheServersOtherSessions(t *testing.T) {
	s := newServer(t, "conformance")
	toolsChanged := make(chan string, 4)
	promptsChanged := make(chan string, 4)
	watcher := connect(t, s, &mcp.ClientOptions{
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { toolsChanged <- "tools" },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- "prompts" },
	}, legacyProtocol)
	before := toolNames(t, watcher)
	trigger := connect(t, s, nil, legacyProtocol)
	wantText(t, callTool(t, trigger, &mcp.CallToolParams{Name: "test_trigger_tool_change"}), "The tool list changed: notifications/tools/list_changed was sent.")
	receive(t, toolsChanged, "notifications/tools/list_changed")
	wantText(t, callTool(t, trigger, &mcp.CallToolParams{Name: "test_trigger_prompt_change"}), "The prompt list changed: notifications/prompts/list_changed was sent.")
	receive(t, promptsChanged, "notifications/prompts/list_changed")
	// The change is undone: the shared server's lists are as they were.
	if after := toolNames(t, watcher); !slices.Equal(after, before) {
		t.Errorf("tools after the trigger = %q, want %q", after, before)
	}
}
