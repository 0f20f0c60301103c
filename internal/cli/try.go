package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// tryDefaultCode creates a to-do in the demo API: a write, so it pauses.
const tryDefaultCode = `const todo = await tools.demo.createTodo({title: "try mcpgrain"});
console.log("created", todo.id);
return todo;`

// tryWait is try's default --wait: the node's default approval window,
// and a minute more to see the decline it ends with.
const tryWait = engine.DefaultApprovalWindow + time.Minute

// tryCommand is `mcpgrain try`'s flags.
type tryCommand struct {
	endpoint, token, code string
	wait                  time.Duration
}

// flags registers the try command's flags.
func (c *tryCommand) flags(stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("try", "Runs code on an mcpgrain endpoint as an MCP client would, and walks through its approval.", stderr)
	fs.StringVar(&c.endpoint, "url", defaultMCPURL, "MCP endpoint")
	fs.StringVar(&c.token, "token", "", "bearer token")
	fs.StringVar(&c.code, "code", tryDefaultCode, "TypeScript to execute (the default writes to the demo API, so it needs approval)")
	fs.DurationVar(&c.wait, "wait", tryWait, "how long to wait for the decision")
	addSecretFiles(fs)
	return fs
}

// runTry is a tiny MCP client that shows the approval flow end to end: it
// runs code that needs approval, prints where to approve it, waits for the
// decision and prints the outcome.
func runTry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c tryCommand
	fs := c.flags(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "try", true); err != nil {
		return err
	}
	cs, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cs.Close()
	fmt.Fprintf(stdout, "connected to %s (MCP session %s)\n\n", c.endpoint, cs.ID())
	fmt.Fprintf(stdout, "execute:\n%s\n\n", indent(c.code))

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": c.code}})
	cancel()
	if err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	if sc := mcpclient.Structured(res); sc["status"] == "user_approval_required" {
		if res, err = c.awaitDecision(ctx, cs, sc, stdout); err != nil {
			return err
		}
	}
	status, _ := mcpclient.Structured(res)["status"].(string)
	fmt.Fprintf(stdout, "%s:\n%s\n", status, indent(mcpclient.Text(res)))
	if res.IsError || status != "completed" {
		return fmt.Errorf("the execution ended %s", orUnknown(status))
	}
	return nil
}

// connect opens an MCP session at --url, in browser elicitation mode
// (the paused result carries the approval link).
func (c *tryCommand) connect(ctx context.Context) (*mcp.ClientSession, error) {
	u, err := url.Parse(c.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --url %q: want an http(s) URL", errUsage, c.endpoint)
	}
	q := u.Query()
	q.Set("elicitation_mode", "browser") // the paused result carries the approval link
	u.RawQuery = q.Encode()
	var rt http.RoundTripper = http.DefaultTransport
	if c.token != "" {
		rt = mcpclient.Bearer(c.token, nil)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgrain-try", Version: version()}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: u.String(), HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w (is `%s dev` running? is the token right?)", c.endpoint, err, cliName)
	}
	return cs, nil
}

// awaitDecision prints where to decide the paused execution of sc, then
// waits (up to --wait) for the decision with resume.
func (c *tryCommand) awaitDecision(ctx context.Context, cs *mcp.ClientSession, sc map[string]any, stdout io.Writer) (*mcp.CallToolResult, error) {
	id, _ := sc["executionId"].(string)
	link, _ := sc["approvalUrl"].(string)
	if c.token != "" {
		link += "?token=" + url.QueryEscape(c.token) // the page moves it into a cookie
	}
	fmt.Fprintf(stdout, "paused for approval: execution %s\n", id)
	fmt.Fprintf(stdout, "  approve in a browser:  %s\n", link)
	fmt.Fprintf(stdout, "  or from a shell:       %s approve accept %s   (or decline; list shows every pause)\n", cliName, id)
	fmt.Fprintf(stdout, "waiting for the decision (up to %s)...\n\n", c.wait)
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	res, err := cs.CallTool(wctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"executionId": id}})
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", id, err)
	}
	return res, nil
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
