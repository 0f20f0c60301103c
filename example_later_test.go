package mcpgrain_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// request_deploy asks a human without holding the tool call: the model is
// told at once where the request waits, and calls deploy_status later
// (ExampleAskStatus).
func ExampleAskLater() {
	requestDeploy := func(ctx context.Context, req *mcp.CallToolRequest, args releaseArgs) (*mcp.CallToolResult, any, error) {
		p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{
			Summary: "Deploy " + args.Service + " " + args.Version + "?",
			Details: map[string]any{"service": args.Service, "version": args.Version},
		})
		if err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("waiting for approval: %s (call deploy_status with id %s)", p.URL, p.ID)), nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "request_deploy"}, requestDeploy)
	}})
}

type statusArgs struct {
	ID string `json:"id"`
}

// deploy_status reads a request's decision in a later tool call, of this
// session or of another session of the same user, and acts once on an
// approval (keyed by the request's id: two status calls deploy once).
func ExampleAskStatus() {
	deployStatus := func(ctx context.Context, req *mcp.CallToolRequest, args statusArgs) (*mcp.CallToolResult, any, error) {
		st, err := mcpgrain.AskStatus(ctx, req, args.ID)
		if err != nil {
			return nil, nil, err // ErrUnknownAsk, ErrForeignAsk: not the caller's
		}
		switch {
		case st.State == mcpgrain.AskWaiting:
			return textResult("still waiting for approval until " + st.Deadline.String()), nil, nil
		case st.State == mcpgrain.AskExpired:
			return textResult("nobody approved it in time"), nil, nil
		case !st.Decision.Accepted:
			return textResult("declined by " + st.Decision.By + ": " + st.Decision.Reason), nil, nil
		}
		if _, err := deployNow(ctx, fmt.Sprint(st.Details["service"]), fmt.Sprint(st.Details["version"])); err != nil {
			return nil, nil, err
		}
		return textResult("deployed, approved by " + st.Decision.By), nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "deploy_status"}, deployStatus)
	}})
}

// await_deploy holds the tool call until a request of this session is
// decided or expires (another session's is ErrAwaitElsewhere: read it
// with AskStatus).
func ExampleAwaitAsk() {
	awaitDeploy := func(ctx context.Context, req *mcp.CallToolRequest, args statusArgs) (*mcp.CallToolResult, any, error) {
		st, err := mcpgrain.AwaitAsk(ctx, req, args.ID)
		if err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("%s: accepted %v by %q", st.State, st.Decision.Accepted, st.Decision.By)), nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "await_deploy"}, awaitDeploy)
	}})
}
