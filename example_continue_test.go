package mcpgrain_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// request_deploy asks without waiting and names the continuation that
// finishes the work; finish_deploy, from any later call of the same user
// (this session or another), runs it on the session that asked, once the
// request is decided. The deployment happens once however many times
// finish_deploy is called: the first completed run's result is recorded
// and answered to every later call.
func ExampleContinueAsk() {
	finish := func(ctx context.Context, c mcpgrain.Continuation) (*mcp.CallToolResult, error) {
		if !c.Decision.Accepted {
			return textResult("not deployed: " + c.Decision.Reason), nil
		}
		// A Step of the continuation (req is nil here): journaled in the
		// question's journal, so a run again after a failure skips it.
		id, err := mcpgrain.Step(ctx, nil, "deploy", func(ctx context.Context) (string, error) {
			return deployNow(ctx, fmt.Sprint(c.Details["service"]), fmt.Sprint(c.Details["version"]))
		})
		if err != nil {
			return nil, err // nothing recorded: the next finish_deploy runs it again
		}
		return textResult("deployed " + id + ", approved by " + c.Decision.By), nil
	}
	requestDeploy := func(ctx context.Context, req *mcp.CallToolRequest, args releaseArgs) (*mcp.CallToolResult, any, error) {
		p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{
			Summary:      "Deploy " + args.Service + " " + args.Version + "?",
			Details:      map[string]any{"service": args.Service, "version": args.Version},
			Continuation: "finish",
		})
		if err != nil {
			return nil, nil, err
		}
		return textResult("waiting for approval: " + p.URL + " (then call finish_deploy with id " + p.ID + ")"), nil, nil
	}
	finishDeploy := func(ctx context.Context, req *mcp.CallToolRequest, args statusArgs) (*mcp.CallToolResult, any, error) {
		res, err := mcpgrain.ContinueAsk(ctx, req, args.ID, nil)
		return res, nil, err // ErrAskPending: not decided yet
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy",
		Continuations: map[string]mcpgrain.ContinueFunc{"finish": finish},
		Register: func(s *mcp.Server) {
			mcp.AddTool(s, &mcp.Tool{Name: "request_deploy"}, requestDeploy)
			mcp.AddTool(s, &mcp.Tool{Name: "finish_deploy"}, finishDeploy)
		}})
}
