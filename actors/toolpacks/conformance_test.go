package toolpacks_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// The everything-server's features (go-sdk v1.8.0
// conformance/everything-server/main.go).
var (
	conformanceTools = []string{
		"test_simple_text",
		"test_image_content",
		"test_audio_content",
		"test_embedded_resource",
		"test_multiple_content_types",
		"test_tool_with_logging",
		"test_tool_with_progress",
		"test_error_handling",
		"test_sampling",
		"test_elicitation",
		"test_elicitation_sep1034_defaults",
		"test_elicitation_sep1330_enums",
		"json_schema_2020_12_tool",
		"test_reconnection",
		"test_x_mcp_header",
		"test_missing_capability",
		"test_streaming_elicitation",
		"test_logging_tool",
		"test_trigger_tool_change",
		"test_trigger_prompt_change",
		"test_input_required_result_elicitation",
		"test_input_required_result_sampling",
		"test_input_required_result_list_roots",
		"test_input_required_result_request_state",
		"test_input_required_result_multiple_inputs",
		"test_input_required_result_multi_round",
		"test_input_required_result_tampered_state",
		"test_input_required_result_capabilities",
	}
	conformanceResources         = []string{"static-text", "static-binary", "watched-resource"}
	conformanceResourceURIs      = []string{"test://static-text", "test://static-binary", "test://watched-resource"}
	conformanceResourceTemplates = []string{"test://template/{id}/data"}
	conformancePrompts           = []string{
		"test_simple_prompt",
		"test_prompt_with_arguments",
		"test_prompt_with_embedded_resource",
		"test_prompt_with_image",
		"test_input_required_result_prompt",
	}
)

// The everything-server's test media.
const (
	testImageBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	testAudioBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformanceFeatureNames(t *testing.T) {
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "conformance"), nil, p.version)
			if got, want := toolNames(t, cs), sorted(conformanceTools); !slices.Equal(got, want) {
				t.Errorf("tools = %q\nwant %q", got, want)
			}

			var names, uris []string
			for r, err := range cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, r.Name)
				uris = append(uris, r.URI)
			}
			if got, want := sorted(names), sorted(conformanceResources); !slices.Equal(got, want) {
				t.Errorf("resources = %q, want %q", got, want)
			}
			if got, want := sorted(uris), sorted(conformanceResourceURIs); !slices.Equal(got, want) {
				t.Errorf("resource URIs = %q, want %q", got, want)
			}

			var templates []string
			for rt, err := range cs.ResourceTemplates(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if rt.Name != "template" {
					t.Errorf("resource template name %q, want template", rt.Name)
				}
				templates = append(templates, rt.URITemplate)
			}
			if !slices.Equal(templates, conformanceResourceTemplates) {
				t.Errorf("resource templates = %q, want %q", templates, conformanceResourceTemplates)
			}

			var prompts []string
			for pr, err := range cs.Prompts(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				prompts = append(prompts, pr.Name)
			}
			if got, want := sorted(prompts), sorted(conformancePrompts); !slices.Equal(got, want) {
				t.Errorf("prompts = %q, want %q", got, want)
			}

			caps := cs.InitializeResult().Capabilities
			//lint:ignore SA1019 the everything-server keeps go-sdk's default logging capability.
			if caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe || caps.Logging == nil {
				t.Errorf("capabilities %+v: want completions, resources.subscribe and logging", caps)
			}
		})
	}
}

func TestConformanceTools(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "conformance"), nil, p.version)

			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_simple_text"}), "This is a simple text response for testing.")

			res := callTool(t, cs, &mcp.CallToolParams{Name: "test_image_content"})
			if len(res.Content) != 1 {
				t.Fatalf("test_image_content: %d content items", len(res.Content))
			}
			img, ok := res.Content[0].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" || !bytes.Equal(img.Data, decode(t, testImageBase64)) {
				t.Errorf("test_image_content = %#v", res.Content[0])
			}

			res = callTool(t, cs, &mcp.CallToolParams{Name: "test_audio_content"})
			if a, ok := res.Content[0].(*mcp.AudioContent); !ok || a.MIMEType != "audio/wav" || !bytes.Equal(a.Data, decode(t, testAudioBase64)) {
				t.Errorf("test_audio_content = %#v", res.Content[0])
			}

			res = callTool(t, cs, &mcp.CallToolParams{Name: "test_embedded_resource"})
			if r, ok := res.Content[0].(*mcp.EmbeddedResource); !ok || r.Resource.URI != "test://embedded-resource" || r.Resource.Text != "This is an embedded resource" {
				t.Errorf("test_embedded_resource = %#v", res.Content[0])
			}

			wantToolError(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_error_handling"}), "this tool intentionally returns an error for testing")

			wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_x_mcp_header", Arguments: map[string]any{"region": "eu"}}), "region=eu")
		})
	}
}

func TestConformanceToolWithProgress(t *testing.T) {
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
			wantText(t, callTool(t, cs, params), "tok-1")
			var got []float64
			for range 3 {
				n := receive(t, progress, "a progress notification")
				if n.ProgressToken != "tok-1" || n.Total != 100 || n.Message != fmt.Sprintf("Completed step %.0f of 100", n.Progress) {
					t.Errorf("unexpected progress notification %+v", n)
				}
				got = append(got, n.Progress)
			}
			slices.Sort(got)
			if !slices.Equal(got, []float64{0, 50, 100}) {
				t.Errorf("progress = %v, want [0 50 100]", got)
			}
		})
	}
}

func TestConformanceElicitation(t *testing.T) {
	// test_elicitation sends elicitation/create from inside the call, which
	// go-sdk allows only on sessions before protocol version 2026-07-28; the
	// conformance suite's elicitation scenario uses such a session.
	el := newElicitor(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice"}})
	cs := connect(t, newServer(t, "conformance"), &mcp.ClientOptions{ElicitationHandler: el.handle}, legacyProtocol)
	res := callTool(t, cs, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "Who are you?"}})
	wantText(t, res, "Elicitation result: action=accept, content=map[username:alice]")
	if req := receive(t, el.requests, "the elicitation request"); req.Message != "Who are you?" {
		t.Errorf("elicitation message %q", req.Message)
	}

	// The multi-round-trip variant works on both protocol versions.
	for _, p := range protocols {
		el := newElicitor(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "bob"}})
		cs := connect(t, newServer(t, "conformance"), &mcp.ClientOptions{ElicitationHandler: el.handle}, p.version)
		wantText(t, callTool(t, cs, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"}), "Hello, bob!")
	}
}

func TestConformanceResourcesPromptsCompletion(t *testing.T) {
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			cs := connect(t, newServer(t, "conformance"), nil, p.version)

			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Contents) != 1 || rr.Contents[0].URI != "test://static-text" || rr.Contents[0].MIMEType != "text/plain" ||
				rr.Contents[0].Text != "This is the content of the static text resource." {
				t.Errorf("static-text = %+v", rr.Contents)
			}

			rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"})
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"id": "42", "templateTest": true, "data": "Data for ID: 42"}`; len(rr.Contents) != 1 || rr.Contents[0].Text != want {
				t.Errorf("template = %+v, want text %s", rr.Contents, want)
			}

			gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "x", "arg2": "y"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(gp.Messages) != 1 || gp.Messages[0].Role != "user" {
				t.Fatalf("prompt messages = %+v", gp.Messages)
			}
			if tc, ok := gp.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Prompt with arguments: arg1='x', arg2='y'" {
				t.Errorf("prompt content = %#v", gp.Messages[0].Content)
			}

			cr, err := cs.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "x"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(cr.Completion.Values) != 0 || cr.Completion.Total != 0 {
				t.Errorf("completion = %+v, want empty", cr.Completion)
			}
		})
	}
}

func TestConformanceWatchedResourceUpdaterStopsOnClose(t *testing.T) {
	before := toolpacks.LiveWatchedResourceUpdaters()
	s, closer, err := toolpacks.NewServerWithWatchInterval(testImpl, []string{"conformance"}, toolpacks.Options{}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closer)
	if got := toolpacks.LiveWatchedResourceUpdaters() - before; got != 1 {
		t.Fatalf("%d updaters running after NewServer, want 1", got)
	}

	// A subscribed client hears the updates.
	updates := make(chan string, 1)
	cs := connect(t, s, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updates <- req.Params.URI:
			default:
			}
		},
	}, legacyProtocol)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	if uri := receive(t, updates, "a watched-resource update"); uri != "test://watched-resource" {
		t.Errorf("update for %q", uri)
	}

	// The closer waits for the updater to exit, and may be called again.
	closer()
	if got := toolpacks.LiveWatchedResourceUpdaters(); got != before {
		t.Fatalf("%d updaters still running after close", got-before)
	}
	closer()
	if got := toolpacks.LiveWatchedResourceUpdaters(); got != before {
		t.Fatalf("second close changed the updater count by %d", got-before)
	}
}

func TestConformanceCloserConcurrent(t *testing.T) {
	before := toolpacks.LiveWatchedResourceUpdaters()
	_, closer, err := toolpacks.NewServer(testImpl, []string{"demo", "conformance"}, toolpacks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			closer()
			done <- struct{}{}
		}()
	}
	for range 4 {
		receive(t, done, "a closer to return")
	}
	if got := toolpacks.LiveWatchedResourceUpdaters(); got != before {
		t.Fatalf("%d updaters still running after close", got-before)
	}
}
