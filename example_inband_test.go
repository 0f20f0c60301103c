package mcpgrain_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// deploy asks with ClientMayDecide: besides the approval surfaces, the
// caller's own client is asked with a native elicitation if the caller's
// role may decide (--approvers); a viewer's client is not asked, and the
// call waits for an approver.
func ExampleQuestion_clientMayDecide() {
	deploy := func(ctx context.Context, req *mcp.CallToolRequest, args releaseArgs) (*mcp.CallToolResult, any, error) {
		d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{
			Summary:         "Deploy " + args.Service + " " + args.Version + "?",
			ClientMayDecide: true,
		})
		if err != nil {
			return nil, nil, err
		}
		if !d.Accepted {
			return textResult("not deployed: " + d.Reason), nil, nil
		}
		return textResult("deployed, approved by " + d.By), nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "deploy"}, deploy)
	}})
}

type approveArgs struct {
	ID     string `json:"id"`
	Accept bool   `json:"accept"`
}

// approve_deploy relays the user's answer to a request asked with
// AskLater and ClientMayDecide, from any session of the same user, as
// code mode's resume with an action does: the session that asked records
// it as an approval surface's decision, once.
func ExampleDecideAsk() {
	approveDeploy := func(ctx context.Context, req *mcp.CallToolRequest, args approveArgs) (*mcp.CallToolResult, any, error) {
		st, err := mcpgrain.DecideAsk(ctx, req, args.ID, mcpgrain.Answer{Accept: args.Accept, Reason: "the user said so"})
		switch {
		case errors.Is(err, mcpgrain.ErrMayNotDecide):
			return textResult("your role may not approve deploys: an approver decides it on the approval page"), nil, nil
		case errors.Is(err, mcpgrain.ErrAlreadyDecided):
			return textResult(fmt.Sprintf("decided already: accepted %v by %s", st.Decision.Accepted, st.Decision.By)), nil, nil
		case err != nil:
			return nil, nil, err
		}
		return textResult(fmt.Sprintf("%s: accepted %v", st.State, st.Decision.Accepted)), nil, nil
	}
	mcpgrain.Main(mcpgrain.Server{Name: "deploy", Register: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "approve_deploy"}, approveDeploy)
	}})
}

// InBandFor is the rule: a viewer never decides in band.
func ExampleInBandFor() {
	fmt.Println(mcpgrain.InBandFor(true, "member", mcpgrain.ApproversMember) == mcpgrain.InBandOpen)
	fmt.Println(mcpgrain.InBandFor(true, "viewer", mcpgrain.ApproversMember) == mcpgrain.InBandRefused)
	fmt.Println(mcpgrain.InBandFor(false, "admin", mcpgrain.ApproversMember) == mcpgrain.InBandClosed)
	// Output:
	// true
	// true
	// true
}
