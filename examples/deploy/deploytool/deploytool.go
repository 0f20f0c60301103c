// Package deploytool is examples/deploy's tool, deploy, which asks a human
// before it deploys (mcpgrain.Ask) and performs the deployment in a
// journaled step (mcpgrain.Step). The "deployment" appends a line to the
// file $DEPLOY_LOG (default deployments.log): "deployed SERVICE VERSION";
// before it asks, the tool appends "requested SERVICE VERSION", work that
// is not in a Step (see the command's documentation).
package deploytool

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// DeployArgs are the deploy tool's arguments.
type DeployArgs struct {
	Service string `json:"service" jsonschema:"the service to deploy"`
	Version string `json:"version" jsonschema:"the version to deploy"`
}

// logMu orders the writes of this process to the deployment log.
var logMu sync.Mutex

// record appends one line to the deployment log.
func record(line string) error {
	path := os.Getenv("DEPLOY_LOG")
	if path == "" {
		path = "deployments.log"
	}
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open the deployment log: %w", err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		_ = f.Close()
		return fmt.Errorf("write the deployment log: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync the deployment log: %w", err)
	}
	return f.Close()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// deploy asks for approval, then deploys args.Service at args.Version once.
func deploy(ctx context.Context, req *mcp.CallToolRequest, args DeployArgs) (*mcp.CallToolResult, any, error) {
	// Not journaled: runs again if the handler is run again.
	if err := record("requested " + args.Service + " " + args.Version); err != nil {
		return nil, nil, err
	}
	d, err := mcpgrain.Ask(ctx, req, mcpgrain.Question{
		Summary: fmt.Sprintf("Deploy %s %s?", args.Service, args.Version),
		Details: map[string]any{"service": args.Service, "version": args.Version},
	})
	if err != nil {
		return nil, nil, err
	}
	if !d.Accepted {
		return text(fmt.Sprintf("deploy of %s %s declined by %q: %s", args.Service, args.Version, d.By, d.Reason)), nil, nil
	}
	n, err := mcpgrain.Step(ctx, req, "deploy", func(context.Context) (string, error) {
		return "deployed " + args.Service + " " + args.Version, record("deployed " + args.Service + " " + args.Version)
	})
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("%s, approved by %s", n, d.By)), nil, nil
}

// Register adds the deploy tool to s.
func Register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "deploy", Description: "Deploy a service at a version, once a human approved it."}, deploy)
}
