package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// tryDefaultCode creates a to-do in the demo API: a write, so it pauses.
const tryDefaultCode = `const todo = await tools.demo.createTodo({title: "try mcpgrain"});
console.log("created", todo.id);
return todo;`

// runTry is a tiny MCP client that shows the approval flow end to end: it
// runs code that needs approval, prints where to approve it, waits for the
// decision and prints the outcome.
func runTry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("try", "Runs code on an mcpgrain endpoint as an MCP client would, and walks through its approval.", stderr)
	endpoint := fs.String("url", defaultMCPURL, "MCP endpoint")
	token := fs.String("token", "", "bearer token")
	code := fs.String("code", tryDefaultCode, "TypeScript to execute (the default writes to the demo API, so it needs approval)")
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for the decision")
	addSecretFiles(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "try", true); err != nil {
		return err
	}
	u, err := url.Parse(*endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --url %q: want an http(s) URL", errUsage, *endpoint)
	}
	q := u.Query()
	q.Set("elicitation_mode", "browser") // the paused result carries the approval link
	u.RawQuery = q.Encode()
	var rt http.RoundTripper = http.DefaultTransport
	if *token != "" {
		rt = mcpclient.Bearer(*token, nil)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgrain-try", Version: version()}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: u.String(), HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	cancel()
	if err != nil {
		return fmt.Errorf("connect to %s: %w (is `mcpgrain dev` running? is the token right?)", *endpoint, err)
	}
	defer cs.Close()
	fmt.Fprintf(stdout, "connected to %s (MCP session %s)\n\n", *endpoint, cs.ID())
	fmt.Fprintf(stdout, "execute:\n%s\n\n", indent(*code))

	cctx, cancel = context.WithTimeout(ctx, time.Minute)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": *code}})
	cancel()
	if err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	sc := mcpclient.Structured(res)
	if sc["status"] == "user_approval_required" {
		id, _ := sc["executionId"].(string)
		link, _ := sc["approvalUrl"].(string)
		if *token != "" {
			link += "?token=" + url.QueryEscape(*token) // the page moves it into a cookie
		}
		fmt.Fprintf(stdout, "paused for approval: execution %s\n", id)
		fmt.Fprintf(stdout, "  approve in a browser:  %s\n", link)
		fmt.Fprintf(stdout, "  or from a shell:       mcpgrain approve accept %s   (or decline; list shows every pause)\n", id)
		fmt.Fprintf(stdout, "waiting for the decision (up to %s)...\n\n", *wait)
		wctx, cancel := context.WithTimeout(ctx, *wait)
		res, err = cs.CallTool(wctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"executionId": id}})
		cancel()
		if err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
		sc = mcpclient.Structured(res)
	}
	status, _ := sc["status"].(string)
	fmt.Fprintf(stdout, "%s:\n%s\n", status, indent(mcpclient.Text(res)))
	if res.IsError || status != "completed" {
		return fmt.Errorf("the execution ended %s", orUnknown(status))
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "with an error"
	}
	return s
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
