package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 the suite requires logging fixtures (SEP-2577 deprecates logging from 2026-07-28, still serves it).

// noInput is the input of a tool without arguments.
type noInput struct{}

// The tools that answer without asking the client: content of every kind,
// a tool error, logging, progress, a JSON Schema 2020-12 input schema, a
// parameter mirrored into an HTTP header, a stream closed mid-call, and the
// triggers of list-change notifications. The scenario each serves is
// named in its description's first words.
func (f *conformanceFixture) addTools(s *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	add := func(name, description string, h mcp.ToolHandlerFor[noInput, any]) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: description, Annotations: readOnly}, h)
	}

	add("test_simple_text", "tools-call-simple-text: returns one text item.",
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: text("This is a simple text response for testing.")}, nil, nil
		})
	add("test_image_content", "tools-call-image: returns one image item (a 1x1 red PNG).",
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: redPixelPNG(), MIMEType: "image/png"}}}, nil, nil
		})
	add("test_audio_content", "tools-call-audio: returns one audio item (10 ms of silence as WAV).",
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silentWAV(), MIMEType: "audio/wav"}}}, nil, nil
		})
	add("test_embedded_resource", "tools-call-embedded-resource: returns one embedded text resource.",
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
			}}}}, nil, nil
		})
	add("test_multiple_content_types", "tools-call-mixed-content: returns a text, an image and an embedded JSON resource.",
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "Multiple content types test:"},
				&mcp.ImageContent{Data: redPixelPNG(), MIMEType: "image/png"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
				}},
			}}, nil, nil
		})
	add("test_error_handling", "tools-call-error: always fails as a tool (isError), not as a protocol error.",
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: text("This tool intentionally returns an error for testing")}, nil, nil
		})
	add("test_tool_with_logging", "tools-call-with-logging: logs three info messages 50 ms apart while it runs.",
		testToolWithLogging)
	add("test_logging_tool", "server-stateless: logs one message at each of debug, info, warning and error; a request sets the level that reaches it (none without one from 2026-07-28 on).",
		testLoggingTool)
	add("test_tool_with_progress", "tools-call-with-progress: reports progress 0, 50 and 100 of 100, 50 ms apart, when the request has a progress token.",
		testToolWithProgress)
	add("test_reconnection", "server-sse-polling: closes its response stream mid-call (SEP-1699) and answers on the stream the client resumes; before 2026-07-28 only.",
		testReconnection)

	f.addListChangeTriggers(s)
	addSchemaTool(s)
	addHeaderTool(s)
}

// logTo sends one log message of the tool's session (go-sdk drops it below
// the session's level, or without a level for the request from 2026-07-28
// on).
func logTo(ctx context.Context, req *mcp.CallToolRequest, level mcp.LoggingLevel, msg string) error {
	return req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: conformanceLogger, Data: msg})
}

func testToolWithLogging(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			if err := pause(ctx, 50*time.Millisecond); err != nil {
				return nil, nil, err
			}
		}
		if err := logTo(ctx, req, "info", msg); err != nil {
			return nil, nil, err
		}
	}
	return &mcp.CallToolResult{Content: text("Logged three messages: started, processing, completed.")}, nil, nil
}

func testLoggingTool(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	levels := []mcp.LoggingLevel{"debug", "info", "warning", "error"}
	for _, level := range levels {
		if err := logTo(ctx, req, level, fmt.Sprintf("a %s message from test_logging_tool", level)); err != nil {
			return nil, nil, err
		}
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("Logged %d messages (debug, info, warning, error); the session's level decides which were sent.", len(levels)))}, nil, nil
}

func testToolWithProgress(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			if err := pause(ctx, 50*time.Millisecond); err != nil {
				return nil, nil, err
			}
		}
		if token == nil {
			continue
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("%.0f%% done", p),
		}); err != nil {
			return nil, nil, err
		}
	}
	if token == nil {
		return &mcp.CallToolResult{Content: text("Done (no progress token, so no progress was reported).")}, nil, nil
	}
	return &mcp.CallToolResult{Content: text(fmt.Sprintf("Done: reported progress 0, 50 and 100 of 100 for token %v.", token))}, nil, nil
}

// reconnectionRetry is the reconnection delay test_reconnection asks for,
// and reconnectionDelay how long it then works before it answers.
const (
	reconnectionRetry = 100 * time.Millisecond
	reconnectionDelay = 200 * time.Millisecond
)

// testReconnection closes the request's SSE stream (with a retry hint) and
// answers a little later: the client gets the answer on the stream it
// resumes with Last-Event-ID. go-sdk offers the close only before
// 2026-07-28 (which removed resumability); then the answer simply comes on
// the open stream.
func testReconnection(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
	closed := req.Extra != nil && req.Extra.CloseSSEStream != nil
	if closed {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: reconnectionRetry})
	}
	if err := pause(ctx, reconnectionDelay); err != nil {
		return nil, nil, err
	}
	if closed {
		return &mcp.CallToolResult{Content: text("Answered after the server closed the response stream.")}, nil, nil
	}
	return &mcp.CallToolResult{Content: text("Answered on the open stream (this transport cannot close it).")}, nil, nil
}

// schemaToolInput is json_schema_2020_12_tool's input schema: the JSON
// Schema 2020-12 keywords SEP-1613 and SEP-2106 say must reach the client
// unchanged ($schema, $defs with an $anchor, $ref, allOf/anyOf,
// if/then/else, additionalProperties).
const schemaToolInput = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {
		"address": {
			"$anchor": "addressDef",
			"type": "object",
			"properties": {"street": {"type": "string"}, "city": {"type": "string"}}
		}
	},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contactMethod": {"type": "string", "enum": ["phone", "email"]},
		"phone": {"type": "string"},
		"email": {"type": "string"}
	},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}`

// addSchemaTool adds json_schema_2020_12_tool. Its schema is handed to
// go-sdk as raw JSON, so that tools/list carries it byte for byte; the tool
// validates its arguments against it and reports a violation as a tool
// error.
func addSchemaTool(s *mcp.Server) {
	var schema jsonschema.Schema
	if err := json.Unmarshal([]byte(schemaToolInput), &schema); err != nil {
		panic(fmt.Sprintf("json_schema_2020_12_tool: %v", err)) // a constant
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("json_schema_2020_12_tool: %v", err)) // a constant
	}
	s.AddTool(&mcp.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "json-schema-2020-12: takes a contact whose input schema uses JSON Schema 2020-12 ($defs, $anchor, $ref, allOf/anyOf, if/then/else) and reports whether the arguments satisfy it.",
		InputSchema: json.RawMessage(schemaToolInput),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]any{}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "json_schema_2020_12_tool: arguments are not a JSON object"}
			}
		}
		if err := resolved.Validate(args); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: text("The arguments do not satisfy the input schema: " + err.Error())}, nil
		}
		return &mcp.CallToolResult{Content: text("The arguments satisfy the JSON Schema 2020-12 input schema.")}, nil
	})
}

// headerToolInput is test_x_mcp_header's input schema: its region is
// mirrored into the Mcp-Param-Region request header (SEP-2243), which the
// server checks against the body from 2026-07-28 on.
const headerToolInput = `{
	"type": "object",
	"properties": {
		"region": {"type": "string", "description": "A region name, also sent as the Mcp-Param-Region header", "x-mcp-header": "Region"}
	},
	"required": ["region"]
}`

func addHeaderTool(s *mcp.Server) {
	s.AddTool(&mcp.Tool{
		Name:        "test_x_mcp_header",
		Description: "http-custom-header-server-validation: takes a region that clients also send as the Mcp-Param-Region header (x-mcp-header) and echoes it.",
		InputSchema: json.RawMessage(headerToolInput),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Region *string `json:"region"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Region == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `test_x_mcp_header: the argument "region" (a string) is required`}
		}
		return &mcp.CallToolResult{Content: text("region=" + *in.Region)}, nil
	})
}

// Names of the catalog changes the triggers apply (see app.Catalog).
const (
	changeTransientTool   = "conformance/transient-tool"
	changeTransientPrompt = "conformance/transient-prompt"
)

// addListChangeTriggers adds the tools of server-stateless's list-change
// checks. Each applies, through the node's catalog, a change that adds an
// item and removes it again: every server of the cluster makes it, so
// every client that listens for the list's changes hears of it, whichever
// node it is connected to.
func (f *conformanceFixture) addListChangeTriggers(s *mcp.Server) {
	f.catalog.Define(changeTransientTool, s, func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "test_transient_tool", Description: "Exists only while test_trigger_tool_change runs.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: text("transient")}, nil
			})
		s.RemoveTools("test_transient_tool")
	})
	f.catalog.Define(changeTransientPrompt, s, func(s *mcp.Server) {
		s.AddPrompt(&mcp.Prompt{Name: "test_transient_prompt", Description: "Exists only while test_trigger_prompt_change runs."},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "transient"}}}}, nil
			})
		s.RemovePrompts("test_transient_prompt")
	})
	mutates := &mcp.ToolAnnotations{OpenWorldHint: new(false)}
	trigger := func(name, description, change, done string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: description, Annotations: mutates},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
				if err := f.catalog.Apply(ctx, change); err != nil {
					return &mcp.CallToolResult{IsError: true, Content: text(err.Error())}, nil, nil
				}
				return &mcp.CallToolResult{Content: text(done)}, nil, nil
			})
	}
	trigger("test_trigger_tool_change", "server-stateless: adds a tool and removes it again on every node, so every session and listen stream gets notifications/tools/list_changed.",
		changeTransientTool, "The tool list changed: notifications/tools/list_changed was sent.")
	trigger("test_trigger_prompt_change", "server-stateless: adds a prompt and removes it again on every node, so every session and listen stream gets notifications/prompts/list_changed.",
		changeTransientPrompt, "The prompt list changed: notifications/prompts/list_changed was sent.")
}
