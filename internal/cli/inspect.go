package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/inspect"
)

const inspectUsage = `Usage: mcpgrain inspect session|task|execution ID [flags]
       mcpgrain inspect handles USER [flags]

Shows the current state of one session, task or paused execution, from any
node: its owner node, resident or passivated, open streams, leases, paused
executions, reminders, the last dispose reason and time, and the trace ids
of its last requests (open them in your tracing UI, e.g. Jaeger). Only an
admin of the organization that owns it may inspect it; anyone else is
told "not found". "handles USER" lists the live handles (the SDK's
NewHandle) of USER of your organization: when each was minted, last used
and expires.

Your identity is a bearer token (--token-file, MCPGRAIN_TOKEN).

Flags, by group (each also settable as the MCPGRAIN_<FLAG> shown in brackets):
`

// inspectFlags are the inspect command's flags.
type inspectFlags struct {
	base, token string
	asJSON      bool
	timeout     time.Duration
}

// defaultNodeURL is the base URL of a local node's gateway.
const defaultNodeURL = "http://" + defaultHTTPAddr

func (f *inspectFlags) flags(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.base, "url", defaultNodeURL, "HTTP address of any mcpgrain node (its gateway; a trailing /mcp is ignored)")
	fs.StringVar(&f.token, "token", "", "bearer token of an admin of the organization; prefer MCPGRAIN_TOKEN or --token-file")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.DurationVar(&f.timeout, "timeout", 15*time.Second, "request timeout")
	addSecretFiles(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, inspectUsage)
		printGroupedFlags(stderr, fs, nil)
	}
	return fs
}

// inspectPaths maps the inspect command's subcommands to route segments.
var inspectPaths = map[string]string{"session": "sessions", "task": "tasks", "execution": "executions", "handles": "handles"}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f inspectFlags
	fs := f.flags(stderr)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fs.Usage()
		return flag.ErrHelp
	}
	if len(args) == 0 || inspectPaths[args[0]] == "" {
		fs.Usage()
		return fmt.Errorf("%w: inspect needs what to inspect: session, task, execution or handles", errUsage)
	}
	what := args[0]
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		if what == "handles" {
			return fmt.Errorf("%w: inspect handles needs one user", errUsage)
		}
		return fmt.Errorf("%w: inspect %s needs one id", errUsage, what)
	}
	if err := resolveSecrets(fs, stderr, "inspect", true); err != nil {
		return err
	}
	body, err := f.get(ctx, what, pos[0])
	if err != nil {
		return err
	}
	if f.asJSON {
		_, err := stdout.Write(body)
		return err
	}
	return printInspected(stdout, what, body)
}

// parseInterleaved parses flags before and after positional arguments,
// then MCPGRAIN_* for the flags not given.
func parseInterleaved(fs *flag.FlagSet, rest []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	return pos, parse(fs, nil)
}

// get fetches GET /api/inspect/<what>s/<id> and returns the JSON body.
func (f inspectFlags) get(ctx context.Context, what, id string) ([]byte, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(f.base, "/"), "/mcp"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --url %q: want an http(s) URL", errUsage, f.base)
	}
	u = u.JoinPath("api", "inspect", inspectPaths[what], id)
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("inspect: read answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		if what == "handles" {
			return nil, fmt.Errorf("you may not list %q's handles (inspection needs an admin token of the user's organization)", id)
		}
		return nil, fmt.Errorf("no %s %q that you may inspect (inspection needs an admin token of its organization)", what, id)
	case http.StatusUnauthorized:
		return nil, errors.New("unauthorized: give an admin's token (--token-file, MCPGRAIN_TOKEN)")
	}
	return nil, fmt.Errorf("inspect: %s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// printInspected prints an inspection's JSON answer as text.
func printInspected(w io.Writer, what string, body []byte) error {
	var v interface{ Text(io.Writer) error }
	switch what {
	case "session":
		v = &inspect.Session{}
	case "task":
		v = &inspect.Task{}
	case "handles":
		v = &inspect.Handles{}
	default:
		v = &inspect.Execution{}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("inspect: decode answer: %w", err)
	}
	return v.Text(w)
}
