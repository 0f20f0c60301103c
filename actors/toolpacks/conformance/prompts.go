package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The prompts of scenarios prompts-* (and completion-complete); the
// multi-round-trip prompt is in input_required.go.
func (f *conformanceFixture) addPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{
		Name:        "test_simple_prompt",
		Title:       "Simple prompt",
		Description: "A prompt without arguments: one user message.",
	}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "This is a simple prompt for testing."}},
		}}, nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "test_prompt_with_arguments",
		Title:       "Prompt with arguments",
		Description: "A prompt that puts its two arguments into its message (both can be completed).",
		Arguments: []*mcp.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		args, err := promptArguments(req, "arg1", "arg2")
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args[0], args[1])}},
		}}, nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "test_prompt_with_embedded_resource",
		Title:       "Prompt with an embedded resource",
		Description: "A prompt that embeds a text resource under the given URI.",
		Arguments: []*mcp.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		args, err := promptArguments(req, "resourceUri")
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: args[0], MIMEType: "text/plain", Text: "Embedded resource content for testing.",
			}}},
			{Role: "user", Content: &mcp.TextContent{Text: "Please process the embedded resource above."}},
		}}, nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "test_prompt_with_image",
		Title:       "Prompt with an image",
		Description: "A prompt with an image message (a 1x1 red PNG) and a text message.",
	}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.ImageContent{Data: redPixelPNG(), MIMEType: "image/png"}},
			{Role: "user", Content: &mcp.TextContent{Text: "Please analyze the image above."}},
		}}, nil
	})

	f.addInputRequiredPrompt(s)
}

// promptArguments returns the named arguments of a prompts/get request, in
// order, or an invalid-params error naming the first one missing.
func promptArguments(req *mcp.GetPromptRequest, names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, name := range names {
		v, ok := req.Params.Arguments[name]
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("prompt %s: missing required argument %q", req.Params.Name, name)}
		}
		out[i] = v
	}
	return out, nil
}

// Completion candidates (scenario completion-complete asks for arg1 of
// test_prompt_with_arguments).
var (
	promptArgumentCandidates = []string{"paris", "park", "party", "test", "testing", "tested"}
	templateIDCandidates     = []string{"1", "2", "3", "42", "123"}
)

// completionLimit is the most values a completion returns (the spec's cap).
const completionLimit = 100

// complete answers completion/complete for the prompt arguments and the
// template's {id}: the candidates that start with the typed value
// (case-insensitively), in their order.
func (f *conformanceFixture) complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref, arg := req.Params.Ref, req.Params.Argument
	if ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion: missing ref"}
	}
	var candidates []string
	switch ref.Type {
	case "ref/prompt":
		switch ref.Name {
		case "test_prompt_with_arguments":
			if arg.Name == "arg1" || arg.Name == "arg2" {
				candidates = promptArgumentCandidates
			}
		case "test_simple_prompt", "test_prompt_with_embedded_resource", "test_prompt_with_image", inputRequiredPrompt:
		default:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("completion: unknown prompt %q", ref.Name)}
		}
	case "ref/resource":
		if ref.URI != dataTemplate {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("completion: unknown resource template %q", ref.URI)}
		}
		if arg.Name == "id" {
			candidates = templateIDCandidates
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("completion: unknown reference type %q", ref.Type)}
	}
	prefix := strings.ToLower(arg.Value)
	values := []string{}
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), prefix) {
			values = append(values, c)
		}
	}
	total := len(values)
	values = slices.Clip(values[:min(total, completionLimit)])
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: total, HasMore: total > len(values)}}, nil
}
