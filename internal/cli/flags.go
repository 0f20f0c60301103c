package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/reminders"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// Addresses the commands default to: a node's, and where the clients
// (approve, try) reach one.
const (
	defaultHTTPAddr = "127.0.0.1:8080"
	defaultGRPCAddr = "127.0.0.1:9090"
	defaultMCPURL   = "http://" + defaultHTTPAddr + "/mcp"
)

// cliName is how the README, the dev banner and try's output call the
// binary: the README's quickstart builds it with
// `go build -o bin/mcpgrain ./cmd/mcpgrain` and runs it from the
// repository root.
const cliName = "bin/mcpgrain"

// errUsage marks an error in the command line or environment (exit 2).
var errUsage = errors.New("invalid usage")

func version() string { return app.Version() }

// common are the flags of every serving command.
type common struct {
	http, grpc, bind, advertise, nodeID string
	grpcCert, grpcKey                   string
	clusterCert, clusterKey, clusterCA  string
	logLevel, logFormat                 string
	enableProbe, gatewayOnly, pprof     bool
	probeIdle, reminderPoll             time.Duration
	probeRate                           float64
	trace                               traceFlags
}

func (c *common) register(fs *flag.FlagSet, httpDefault, bindDefault string) {
	fs.StringVar(&c.http, "http", httpDefault, "HTTP listen address of the gateway (/mcp, /healthz, /readyz, /metrics)")
	fs.StringVar(&c.grpc, "grpc", defaultGRPCAddr, "gRPC listen address (gRPC health; the ApprovalService); empty disables")
	fs.StringVar(&c.grpcCert, "grpc-tls-cert", "", "PEM certificate: serve gRPC over TLS (with --grpc-tls-key)")
	fs.StringVar(&c.grpcKey, "grpc-tls-key", "", "PEM private key of --grpc-tls-cert")
	fs.StringVar(&c.clusterCert, "cluster-tls-cert", "", "PEM certificate of this node for mutual TLS between nodes (with --cluster-tls-key and --cluster-tls-ca; it must name the --advertise host)")
	fs.StringVar(&c.clusterKey, "cluster-tls-key", "", "PEM private key of --cluster-tls-cert")
	fs.StringVar(&c.clusterCA, "cluster-tls-ca", "", "PEM CA certificate every node's cluster certificate chains to")
	fs.StringVar(&c.bind, "bind", bindDefault, "listen address for cluster traffic between nodes (actor remote, gRPC)")
	fs.StringVar(&c.advertise, "advertise", "", "address other nodes dial for cluster traffic (default: --bind)")
	fs.StringVar(&c.nodeID, "node-id", "", "node id (default: derived from the advertised address)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&c.pprof, "enable-pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address to bearer tokens with the admin role (diagnostics)")
	fs.BoolVar(&c.gatewayOnly, "gateway-only", false, "serve HTTP but host no grains: route every request to the members that do")
	fs.BoolVar(&c.enableProbe, "enable-probe", false, "host the built-in probe grain and serve POST /debug/probe/{id} to bearer tokens with the admin role (smoke tests; every probe id is a store row)")
	fs.Float64Var(&c.probeRate, "probe-rate-limit", 10, "/debug/probe requests per second per principal, bursts of twice that (0: unlimited)")
	fs.DurationVar(&c.probeIdle, "probe-idle", time.Minute, "passivate probe grains idle this long (0: never)")
	fs.DurationVar(&c.reminderPoll, "reminder-poll", reminders.DefaultPollInterval, "how often durable reminders are scanned (reminders due sooner are armed in memory)")
	c.trace.register(fs)
}

func (c *common) validate() error {
	if err := c.checkAddrs(); err != nil {
		return err
	}
	if n := countSet(c.clusterCert, c.clusterKey, c.clusterCA); n != 0 && n != 3 {
		return fmt.Errorf("%w: --cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together", errUsage)
	}
	if (c.grpcCert == "") != (c.grpcKey == "") {
		return fmt.Errorf("%w: --grpc-tls-cert and --grpc-tls-key go together", errUsage)
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("%w: --log-format %q: want text or json", errUsage, c.logFormat)
	}
	if c.probeIdle < 0 {
		return fmt.Errorf("%w: --probe-idle must not be negative", errUsage)
	}
	if c.probeRate < 0 {
		return fmt.Errorf("%w: --probe-rate-limit must not be negative", errUsage)
	}
	if c.reminderPoll < 10*time.Millisecond {
		return fmt.Errorf("%w: --reminder-poll must be at least 10ms", errUsage)
	}
	return c.trace.validate()
}

// checkAddrs checks the listen and advertised addresses (host:port;
// --grpc and --advertise may be empty).
func (c *common) checkAddrs() error {
	for _, a := range []struct {
		flag, addr string
		optional   bool
	}{
		{"--http", c.http, false},
		{"--bind", c.bind, false},
		{"--grpc", c.grpc, true},
		{"--advertise", c.advertise, true},
	} {
		if a.optional && a.addr == "" {
			continue
		}
		if err := checkAddr(a.addr); err != nil {
			return fmt.Errorf("%w: %s %q: %v (want host:port)", errUsage, a.flag, a.addr, err)
		}
	}
	return nil
}

func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("unknown level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func (c *common) logger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.logLevel)
	opts := &slog.HandlerOptions{Level: level}
	// tracing.Handler: records logged with a span's context carry its ids.
	if c.logFormat == "json" {
		return slog.New(tracing.NewHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(tracing.NewHandler(slog.NewTextHandler(w, opts)))
}

// parse parses args, then fills every flag not given on the command line
// from its MCPGRAIN_<NAME> environment variable.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || commandLineOnly[f.Name] {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s=%q: %v", errUsage, env, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// commandLineOnly are flags no environment variable sets: a variable
// left in a shell must not widen what a command does (approve --all).
var commandLineOnly = map[string]bool{"all": true}

func envName(flagName string) string {
	return "MCPGRAIN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet returns a flag set whose usage lists the environment names.
func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	return Program{}.newFlagSet(name, summary, stderr)
}

// newFlagSet is the flag set of the program's command name.
func (p Program) newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s %s [flags]\n\n%s\n\nFlags, by group (each also settable as the MCPGRAIN_<FLAG> shown in brackets):\n", p.name(), name, summary)
		printGroupedFlags(stderr, fs, nil)
	}
	return fs
}

// countSet counts the non-empty values.
func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}
