package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

const approveUsage = `Usage: mcpgrain approve <command> [flags] [EXECUTION_ID...]

Sees and decides executions paused for approval, through a node's gRPC
ApprovalService.

Commands:
  list                 the paused executions of your organization
  show ID              one paused execution, with its arguments
  accept ID...|--all   accept them: the tool call runs and the execution goes on
  decline ID...|--all  decline them: the call fails with a declined error
  watch                print each paused execution as it appears (Ctrl-C stops)

Your identity is a bearer token (--token-file, MCPGRAIN_TOKEN): a static
key, or an OAuth access token; or the CLI gets an access token itself with
the client credentials grant (--oauth-token-url, --oauth-client-id,
--oauth-client-secret-file).

Run "mcpgrain approve <command> -h" for one command's flags.

Flags, by group (each also settable as the MCPGRAIN_<FLAG> shown in brackets):
`

// approveFlags are the approve command's flags.
type approveFlags struct {
	// prog is the program's name in the help ("": mcpgrain).
	prog                        string
	addr, token, caFile, reason string
	useTLS, asJSON, quiet, all  bool
	timeout                     time.Duration
	cc                          clientCredentials
}

// flags registers the approve command's flags.
func (f *approveFlags) flags(stderr io.Writer) *flag.FlagSet {
	prog := f.prog
	if prog == "" {
		prog = "mcpgrain"
	}
	fs := flag.NewFlagSet(prog+" approve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "grpc", defaultGRPCAddr, "gRPC address of any mcpgrain node")
	fs.StringVar(&f.token, "token", "", "bearer token (your identity; its organization's executions are visible); prefer MCPGRAIN_TOKEN or --token-file")
	fs.BoolVar(&f.useTLS, "tls", false, "connect with TLS (system roots unless --tls-ca)")
	fs.StringVar(&f.caFile, "tls-ca", "", "PEM CA certificate(s) to verify the node with (implies --tls)")
	fs.StringVar(&f.reason, "reason", "", "decline: why (kept with the decision)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.BoolVar(&f.quiet, "q", false, "list: print only execution ids, one per line")
	fs.BoolVar(&f.all, "all", false, "accept, decline: every execution waiting (each decided on its own, with your role checked for each)")
	fs.DurationVar(&f.timeout, "timeout", approveTimeout, "per-request timeout")
	f.cc.register(fs)
	addSecretFiles(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, strings.ReplaceAll(approveUsage, "mcpgrain approve", fs.Name()))
		printGroupedFlags(stderr, fs, nil)
	}
	return fs
}

// approveTimeout is the approve command's default --timeout.
const approveTimeout = 15 * time.Second

func runApprove(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) error {
	f := approveFlags{prog: prog}
	fs := f.flags(stderr)
	cmd, pos, err := parseApprove(fs, args)
	if err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "approve", true); err != nil {
		return err
	}
	if err := f.check(cmd, pos); err != nil {
		return err
	}
	if err := f.clientCredentials(ctx); err != nil {
		return err
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewApprovalServiceClient(conn)
	if f.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	if cmd == "watch" {
		return approveWatch(ctx, client, f, stdout)
	}
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	switch cmd {
	case "list":
		return approveList(rctx, client, f, stdout)
	case "show":
		return approveShow(rctx, client, f, pos[0], stdout)
	}
	return approveDecideAll(rctx, client, f, cmd, pos, stdout)
}

// parseApprove parses the approve command line: the command first, then
// flags before or after the positional arguments, then MCPGRAIN_*
// variables for flags not given.
func parseApprove(fs *flag.FlagSet, args []string) (cmd string, pos []string, err error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return "", nil, flag.ErrHelp
		}
		fs.Usage()
		return "", nil, fmt.Errorf("%w: approve needs a command: list, show, accept, decline or watch", errUsage)
	}
	cmd = args[0]
	setApproveCommandUsage(fs, cmd)
	// Flags may come before or after the execution id.
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", nil, err
			}
			return "", nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if err := parse(fs, nil); err != nil { // MCPGRAIN_* for flags not given
		return "", nil, err
	}
	return cmd, pos, nil
}

// check checks the command, its arguments and the flags that go with it.
func (f *approveFlags) check(cmd string, pos []string) error {
	decide := cmd == "accept" || cmd == "decline"
	switch {
	case cmd != "list" && cmd != "watch" && cmd != "show" && !decide:
		return fmt.Errorf("%w: unknown approve command %q (want list, show, accept, decline or watch)", errUsage, cmd)
	case cmd == "show" && len(pos) != 1:
		return fmt.Errorf("%w: approve show needs exactly one execution id", errUsage)
	case decide && f.all && len(pos) != 0:
		return fmt.Errorf("%w: approve %s: give execution ids or --all, not both", errUsage, cmd)
	case !decide && cmd != "show" && len(pos) != 0:
		return fmt.Errorf("%w: approve %s takes no arguments", errUsage, cmd)
	case f.reason != "" && cmd != "decline":
		return fmt.Errorf("%w: --reason is only for decline", errUsage)
	case f.all && !decide:
		return fmt.Errorf("%w: --all is only for accept and decline", errUsage)
	}
	if err := checkAddr(f.addr); err != nil {
		return fmt.Errorf("%w: --grpc %q: %v (want host:port)", errUsage, f.addr, err)
	}
	return nil
}

// clientCredentials gets the access token through the client credentials
// grant, when it is configured.
func (f *approveFlags) clientCredentials(ctx context.Context) error {
	if !f.cc.set() {
		return nil
	}
	if f.token != "" {
		return fmt.Errorf("%w: a token (--token, --token-file, MCPGRAIN_TOKEN) and a client credentials grant (--oauth-token-url) both set: use one", errUsage)
	}
	tok, err := f.cc.token(ctx, f.timeout)
	if err != nil {
		return err
	}
	f.token = tok
	return nil
}

// approveList prints the paused executions (ids only with -q).
func approveList(ctx context.Context, client pb.ApprovalServiceClient, f approveFlags, w io.Writer) error {
	resp, err := client.ListPausedExecutions(ctx, &pb.ListPausedExecutionsRequest{})
	if err != nil {
		return rpcError(err)
	}
	if f.quiet {
		for _, p := range resp.GetExecutions() {
			fmt.Fprintln(w, p.GetExecutionId())
		}
		return nil
	}
	return printList(w, resp.GetExecutions(), f.asJSON)
}

// approveShow prints one paused execution.
func approveShow(ctx context.Context, client pb.ApprovalServiceClient, f approveFlags, id string, w io.Writer) error {
	resp, err := client.GetPausedExecution(ctx, &pb.GetPausedExecutionRequest{ExecutionId: id})
	if err != nil {
		return rpcError(err)
	}
	return printOne(w, resp.GetExecution(), f.asJSON)
}

// approveDecide accepts or declines (action) execution id.
func approveDecide(ctx context.Context, client pb.ApprovalServiceClient, f approveFlags, action, id string, w io.Writer) error {
	req := &pb.DecideExecutionRequest{ExecutionId: id, Action: action}
	if f.reason != "" {
		b, _ := json.Marshal(map[string]string{"reason": f.reason})
		req.ContentJson = string(b)
	}
	resp, err := client.DecideExecution(ctx, req)
	if err != nil {
		return rpcError(err)
	}
	if f.asJSON {
		return writeProtoJSON(w, resp)
	}
	fmt.Fprintf(w, "%s: %s\n", id, outcomeWord(resp.GetStatus()))
	return nil
}

func (f approveFlags) dial() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if f.useTLS || f.caFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.caFile != "" {
			pem, err := os.ReadFile(f.caFile)
			if err != nil {
				return nil, fmt.Errorf("%w: --tls-ca: %v", errUsage, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: --tls-ca %s: no PEM certificates", errUsage, f.caFile)
			}
			cfg.RootCAs = pool
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", f.addr, err)
	}
	return conn, nil
}

// rpcError turns a gRPC status into the CLI's message.
func rpcError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unauthenticated:
		return fmt.Errorf("not authenticated (set MCPGRAIN_TOKEN, --token-file or --oauth-token-url): %s", st.Message())
	case codes.Unavailable:
		return fmt.Errorf("unavailable: %s", st.Message())
	}
	return errors.New(st.Message())
}

func writeProtoJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func until(ms int64) string {
	d := time.Until(time.UnixMilli(ms)).Round(time.Second)
	if d <= 0 {
		return "expired"
	}
	return "in " + d.String()
}

func printList(w io.Writer, list []*pb.PausedExecution, asJSON bool) error {
	if asJSON {
		return writeProtoJSON(w, &pb.ListPausedExecutionsResponse{Executions: list})
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "no paused executions")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tTOOL\tOWNER\tDECIDE BY\tSESSION")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.GetExecutionId(), p.GetAddress(), p.GetPrincipal().GetUser(), until(p.GetDeadlineMs()), p.GetSessionId())
	}
	return tw.Flush()
}

func printOne(w io.Writer, p *pb.PausedExecution, asJSON bool) error {
	if asJSON {
		return writeProtoJSON(w, p)
	}
	args := p.GetArgumentsJson()
	var v any
	if json.Unmarshal([]byte(args), &v) == nil {
		if b, err := json.MarshalIndent(v, "  ", "  "); err == nil {
			args = string(b)
		}
	}
	fmt.Fprintf(w, "execution:  %s\nsession:    %s\ntool:       %s\n", p.GetExecutionId(), p.GetSessionId(), p.GetAddress())
	if p.GetApprovalText() != "" {
		fmt.Fprintf(w, "request:    %s\n", p.GetApprovalText())
	}
	if p.GetMessage() != "" {
		fmt.Fprintf(w, "message:    %s\n", p.GetMessage())
	}
	fmt.Fprintf(w, "owner:      %s (%s)\ndecide by:  %s (%s)\narguments:\n  %s\n", p.GetPrincipal().GetUser(), p.GetPrincipal().GetOrg(),
		time.UnixMilli(p.GetDeadlineMs()).UTC().Format(time.RFC3339), until(p.GetDeadlineMs()), args)
	return nil
}

func approveWatch(ctx context.Context, client pb.ApprovalServiceClient, f approveFlags, w io.Writer) error {
	stream, err := client.WatchPausedExecutions(ctx, &pb.WatchPausedExecutionsRequest{})
	if err != nil {
		return rpcError(err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return rpcError(err)
		}
		p := m.GetExecution()
		if f.asJSON {
			b, err := protojson.Marshal(p)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, string(b))
			continue
		}
		fmt.Fprintf(w, "%s  %s  %s  decide %s\n", p.GetExecutionId(), p.GetAddress(), p.GetPrincipal().GetUser(), until(p.GetDeadlineMs()))
	}
}
