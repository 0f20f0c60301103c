// Package deploytool is examples/deploy's tools: deploy, which asks a
// human before it deploys (mcpgrain.Ask) and performs the deployment in a
// journaled step (mcpgrain.Step); and request_deploy with deploy_status,
// which ask without holding the call (mcpgrain.AskLater) and deploy once a
// later call reads the approval (mcpgrain.AskStatus); and finish_deploy,
// which continues a request on the session that asked it (the
// continuation finish_deploy, mcpgrain.ContinueAsk) and answers its
// recorded result to every caller. The "deployment" appends a line to the
// file $DEPLOY_LOG (default deployments.log): "deployed SERVICE VERSION";
// before it asks, the tool appends "requested SERVICE VERSION", work that
// is not in a Step (see the command's documentation). The deployment is
// preceded by "step KEY" (mcpgrain.StepKey), by which a step run again
// after an interruption finds it deployed already.
package deploytool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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

// logPath is the deployment log's path.
func logPath() string {
	if path := os.Getenv("DEPLOY_LOG"); path != "" {
		return path
	}
	return "deployments.log"
}

// record appends one line to the deployment log.
func record(line string) error { return appendOnce("", line) }

// appendOnce appends line to the deployment log, after a line "step KEY"
// in the same write if key is not "" — unless that line is in the log
// already: the effect of a step the client's retry runs again (it was
// interrupted after its effect, before its journal write) is visible once.
// The check and the write are ordered within this process; runs of one
// call on two nodes overlap only if the first was inside its step as its
// session moved (the example does not lock the file across processes).
func appendOnce(key, line string) error {
	logMu.Lock()
	defer logMu.Unlock()
	if key != "" {
		b, err := os.ReadFile(logPath())
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("read the deployment log: %w", err)
		}
		if slices.Contains(strings.Split(string(b), "\n"), "step "+key) {
			return nil
		}
		line = "step " + key + "\n" + line
	}
	f, err := os.OpenFile(logPath(), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
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
	n, err := mcpgrain.Step(ctx, req, "deploy", func(ctx context.Context) (string, error) {
		line := "deployed " + args.Service + " " + args.Version
		return line, appendOnce(mcpgrain.StepKey(ctx), line)
	})
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("%s, approved by %s", n, d.By)), nil, nil
}

// Register adds the tools to s: deploy, and request_deploy with
// deploy_status.
func Register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "deploy", Description: "Deploy a service at a version, once a human approved it."}, deploy)
	mcp.AddTool(s, &mcp.Tool{Name: "request_deploy", Description: "Ask a human to approve deploying a service at a version, " +
		"and return at once with the request's id and approval page; call deploy_status with the id later."}, requestDeploy)
	mcp.AddTool(s, &mcp.Tool{Name: "deploy_status", Description: "Where a deployment request stands; " +
		"deploys it (once) when a human approved it."}, deployStatus)
	mcp.AddTool(s, &mcp.Tool{Name: "finish_deploy", Description: "Finish a decided deployment request on the session that " +
		"asked it: deploys it if approved (once: every call gets the same answer)."}, finishDeploy)
}

// Continuations are the server's continuations (mcpgrain.Server's
// Continuations): finish_deploy, which request_deploy's question names.
func Continuations() map[string]mcpgrain.ContinueFunc {
	return map[string]mcpgrain.ContinueFunc{finishName: finish}
}

// finishName is the continuation request_deploy's question names.
const finishName = "finish_deploy"

// finishDeploy continues request args.ID (mcpgrain.ContinueAsk): the
// continuation runs on the session that asked, once; an undecided request
// is reported as waiting.
func finishDeploy(ctx context.Context, req *mcp.CallToolRequest, args StatusArgs) (*mcp.CallToolResult, any, error) {
	res, err := mcpgrain.ContinueAsk(ctx, req, args.ID, nil)
	if errors.Is(err, mcpgrain.ErrAskPending) {
		return text("the deploy request " + args.ID + " is waiting for approval: nothing to finish yet"), nil, nil
	}
	return res, nil, err
}

// finish is the continuation finish_deploy: it deploys an approved
// request — in a journaled step, and once per request whichever tool gets
// there (the deployment log's "step ask/ID" line, as deploy_status
// writes it) — and says who decided.
func finish(ctx context.Context, c mcpgrain.Continuation) (*mcp.CallToolResult, error) {
	service, version := fmt.Sprint(c.Details["service"]), fmt.Sprint(c.Details["version"])
	switch {
	case c.State == mcpgrain.AskExpired:
		return text(fmt.Sprintf("deploy of %s %s expired: nobody approved it in time", service, version)), nil
	case !c.Decision.Accepted:
		return text(fmt.Sprintf("deploy of %s %s declined by %q: %s", service, version, c.Decision.By, c.Decision.Reason)), nil
	}
	line, err := mcpgrain.Step(ctx, nil, "deploy", func(context.Context) (string, error) {
		line := "deployed " + service + " " + version
		return line, appendOnce("ask/"+c.ID, line)
	})
	if err != nil {
		return nil, err
	}
	return text(fmt.Sprintf("%s, approved by %s (finished by %s)", line, c.Decision.By, c.Caller)), nil
}

// Request is the answer of request_deploy: the pending question's id and
// approval page.
type Request struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// requestDeploy asks for approval without waiting (mcpgrain.AskLater):
// the model is told where a human approves, and calls deploy_status later.
func requestDeploy(ctx context.Context, req *mcp.CallToolRequest, args DeployArgs) (*mcp.CallToolResult, Request, error) {
	p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{
		Summary: fmt.Sprintf("Deploy %s %s?", args.Service, args.Version),
		Details: map[string]any{"service": args.Service, "version": args.Version},
		// finish_deploy continues it on this session once decided (in a
		// 2026-07-28 request the name is kept but nothing runs it: there
		// deploy_status deploys).
		Continuation: finishName,
	})
	if err != nil {
		return nil, Request{}, err
	}
	return text(fmt.Sprintf("waiting for approval: %s (call deploy_status with id %s)", p.URL, p.ID)), Request{ID: p.ID, URL: p.URL}, nil
}

// StatusArgs are deploy_status's arguments.
type StatusArgs struct {
	ID string `json:"id" jsonschema:"the id request_deploy returned"`
}

// deployStatus reads the request's decision (mcpgrain.AskStatus) and, if
// it was approved, deploys: once per request, whichever call and session
// gets there (the deployment log's "step ask/ID" line, written with it).
func deployStatus(ctx context.Context, req *mcp.CallToolRequest, args StatusArgs) (*mcp.CallToolResult, any, error) {
	st, err := mcpgrain.AskStatus(ctx, req, args.ID)
	if err != nil {
		return nil, nil, err
	}
	service, version := fmt.Sprint(st.Details["service"]), fmt.Sprint(st.Details["version"])
	switch {
	case st.State == mcpgrain.AskWaiting:
		return text(fmt.Sprintf("deploy of %s %s is waiting for approval until %s", service, version, st.Deadline.UTC().Format("15:04:05"))), nil, nil
	case st.State == mcpgrain.AskExpired:
		return text(fmt.Sprintf("deploy of %s %s expired: nobody approved it in time", service, version)), nil, nil
	case !st.Decision.Accepted:
		return text(fmt.Sprintf("deploy of %s %s declined by %q: %s", service, version, st.Decision.By, st.Decision.Reason)), nil, nil
	}
	line := "deployed " + service + " " + version
	if err := appendOnce("ask/"+st.ID, line); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("%s, approved by %s", line, st.Decision.By)), nil, nil
}
