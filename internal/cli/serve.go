package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/membership/consul"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// devCommand is `mcpgrain dev`: one node with an embedded SQLite store.
type devCommand struct {
	prog   Program
	common common
	mcp    mcpFlags
	data   string
}

// flags registers the dev command's flags.
func (d *devCommand) flags(stderr io.Writer) *flag.FlagSet {
	fs := d.prog.newFlagSet("dev", "Runs one mcpgrain node with an embedded SQLite store and no external services.", stderr)
	d.common.register(fs, defaultHTTPAddr, "127.0.0.1:0")
	fs.StringVar(&d.data, "data", ".mcpgrain", "data directory (the SQLite store lives here)")
	fs.Lookup("node-id").DefValue, d.common.nodeID = "dev", "dev"
	d.mcp.extra, d.mcp.impl = d.prog.Packs, d.prog.Implementation
	d.mcp.register(fs, d.prog.tools(), !d.prog.sdk()) // the demo API serves code mode: on in the mcpgrain command's dev
	addSecretFiles(fs)
	return fs
}

func (p Program) runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := devCommand{prog: p}
	fs := d.flags(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "dev", false); err != nil { // dev: local experiments, no warning
		return err
	}
	if err := d.common.validate(); err != nil {
		return err
	}
	if d.data == "" {
		return fmt.Errorf("%w: --data must not be empty", errUsage)
	}
	generated, err := d.devSecrets()
	if err != nil {
		return err
	}
	mc, err := d.mcp.config()
	if err != nil {
		return err
	}
	cfg := d.common.appConfig(stderr)
	cfg.MCP = mc
	cfg.Store = "sqlite:" + filepath.Join(d.data, "mcpgrain.db")
	tuneGC(ctx, cfg.Logger)
	return app.Run(ctx, cfg, func(info app.Info) {
		b := devBanner{prog: p, info: info, mc: mc, noAuth: d.mcp.noAuth, token: d.mcp.token, generated: generated}
		b.print(stdout)
	})
}

// devSecrets fills in what a dev node needs and was not given: a bearer
// token when no other way to sign in is set (generated reports it), and
// the requestState key kept in the data directory.
func (d *devCommand) devSecrets() (generated bool, err error) {
	m := &d.mcp
	if m.token == "" && m.keysFile == "" && os.Getenv(auth.EnvVar) == "" && !m.noAuth && len(m.oauth.issuers) == 0 {
		tok, err := auth.GenerateToken()
		if err != nil {
			return false, err
		}
		m.token, generated = tok, true
	}
	if m.stateKey == "" {
		k, err := devStateKey(d.data)
		if err != nil {
			return false, fmt.Errorf("requestState key: %w", err)
		}
		m.stateKey = k
	}
	return generated, nil
}

// devBanner is what a started dev node prints: where it serves, how to
// sign in, and a client configuration.
type devBanner struct {
	prog      Program
	info      app.Info
	mc        app.MCPConfig
	noAuth    bool
	token     string
	generated bool // the token was generated
}

func (b devBanner) print(w io.Writer) {
	endpoint := "http://" + b.info.HTTPAddr + "/mcp"
	fmt.Fprintf(w, "%s dev is ready — version %s, node id %q, tools: %s\n\n", b.prog.name(), b.prog.version(), b.info.NodeID, strings.Join(b.mc.Packs, ", "))
	fmt.Fprintf(w, "  MCP endpoint:  %s\n", endpoint)
	b.printAuth(w)
	fmt.Fprintf(w, "  operations:    http://%s/healthz  /readyz  /metrics\n", b.info.HTTPAddr)
	if b.mc.Code.DemoAPI {
		fmt.Fprintf(w, "  demo API:      http://%s/demo/todos  (your organization's list, with your bearer token; code calls it as tools.demo.*; writes need approval)\n", b.info.HTTPAddr)
	}
	fmt.Fprintf(w, "  approvals:     http://%s/approvals  (inbox)  ·  /approve/<execution id>  ·  %s approve list\n", b.info.HTTPAddr, b.prog.command())
	if slices.Contains(b.mc.Packs, "code") {
		fmt.Fprintf(w, "  try it:        %s   (runs code that needs approval, prints where to approve it)\n", b.tryCommand(endpoint))
	}
	if b.info.GRPCAddr != "" {
		fmt.Fprintf(w, "  grpc:          %s\n", b.info.GRPCAddr)
	}
	fmt.Fprintf(w, "  store:         %s\n\n", b.info.Store)
	b.printClientConfig(w, endpoint)
}

// printAuth prints how callers sign in.
func (b devBanner) printAuth(w io.Writer) {
	switch {
	case b.noAuth:
		fmt.Fprintf(w, "  auth:          none (--no-auth)\n")
	case b.token != "":
		note := ""
		if b.generated {
			note = "  (generated; set your own with --token)"
		}
		fmt.Fprintf(w, "  bearer token:  %s%s\n", b.token, note)
	case b.mc.OAuth.Enabled():
		fmt.Fprintf(w, "  auth:          OAuth access tokens of %s for %s\n", strings.Join(b.mc.OAuth.Issuers, ", "), b.mc.OAuth.Resource)
	default:
		fmt.Fprintf(w, "  auth:          bearer tokens from --keys-file / %s\n", auth.EnvVar)
	}
}

// tryCommand is the `mcpgrain try` command line that reaches endpoint.
func (b devBanner) tryCommand(endpoint string) string {
	try := cliName + " try"
	if endpoint != defaultMCPURL {
		try += " --url " + endpoint
	}
	if !b.noAuth && b.token != "" {
		try = "MCPGRAIN_TOKEN=" + b.token + " " + try // not --token: keep tokens off command lines
	}
	return try
}

// printClientConfig prints an MCP client's configuration for endpoint.
func (b devBanner) printClientConfig(w io.Writer, endpoint string) {
	header := ""
	if !b.noAuth && b.token != "" {
		header = fmt.Sprintf(`, "headers": {"Authorization": "Bearer %s"}`, b.token)
	}
	label := "URL + bearer header"
	if header == "" && b.mc.OAuth.Enabled() {
		label = "the client signs in through OAuth: the 401 names the authorization server"
	}
	fmt.Fprintf(w, "  client config (%s):\n    {\"mcpServers\": {%q: {\"type\": \"http\", \"url\": %q%s}}}\n\n  press Ctrl-C to stop\n", label, b.prog.name(), endpoint, header)
}

// nodeCommand is `mcpgrain node`: a cluster member.
type nodeCommand struct {
	prog                      Program
	common                    common
	mcp                       mcpFlags
	cluster, consul, store    string
	consulTTL, join, shutdown time.Duration
}

// flags registers the node command's flags.
func (n *nodeCommand) flags(stderr io.Writer) *flag.FlagSet {
	fs := n.prog.newFlagSet("node", "Runs a cluster member: Consul for membership, Postgres (or SQLite for one machine) for state.", stderr)
	n.common.register(fs, defaultHTTPAddr, "127.0.0.1:7070")
	fs.StringVar(&n.cluster, "cluster", "mcpgrain", "cluster name (the Consul service members register under)")
	fs.StringVar(&n.consul, "consul", consul.DefaultAddress, "Consul agent HTTP address; empty runs without Consul as a single node")
	fs.DurationVar(&n.consulTTL, "consul-ttl", consul.DefaultTTL, "membership TTL: a node that stops refreshing is dropped after about this long")
	fs.DurationVar(&n.join, "join-timeout", cluster.DefaultJoinTimeout, "give up starting if the node cannot join the cluster (register in Consul) within this long")
	fs.DurationVar(&n.shutdown, "shutdown-timeout", app.DefaultShutdownTimeout, "longest a graceful stop (SIGTERM) takes: leave the cluster, drain activations and requests, then exit (a supervisor's kill grace, such as a pod's terminationGracePeriodSeconds, must be longer)")
	fs.StringVar(&n.store, "store", "", "store DSN: postgres://user@host:5432/db (clusters) or sqlite:PATH (required); a DSN with a password belongs in --store-file or MCPGRAIN_STORE (or use PGPASSWORD / a .pgpass file)")
	n.mcp.extra, n.mcp.impl = n.prog.Packs, n.prog.Implementation
	n.mcp.register(fs, n.prog.tools(), false)
	addSecretFiles(fs)
	return fs
}

func (p Program) runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	n := nodeCommand{prog: p}
	fs := n.flags(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "node", true); err != nil {
		return err
	}
	if err := n.common.validate(); err != nil {
		return err
	}
	if err := n.validate(); err != nil {
		return err
	}
	mc, err := n.mcp.config()
	if err != nil {
		return err
	}
	if err := checkNodeAuth(mc); err != nil {
		return err
	}
	cfg := n.common.appConfig(stderr)
	cfg.MCP = mc
	cfg.ClusterName, cfg.Consul, cfg.ConsulTTL, cfg.Store, cfg.JoinTimeout = n.cluster, n.consul, n.consulTTL, n.store, n.join
	cfg.ShutdownTimeout = n.shutdown
	tuneGC(ctx, cfg.Logger)
	return app.Run(ctx, cfg, func(info app.Info) {
		fmt.Fprintf(stdout, "%s %s node %s ready: http %s, cluster %s, %d members\n", p.name(), p.version(), info.NodeID, info.HTTPAddr, info.ClusterAddr, info.Members)
	})
}

// validate checks the node command's own flags.
func (n *nodeCommand) validate() error {
	switch {
	case n.store == "":
		return fmt.Errorf("%w: --store is required (e.g. --store postgres://postgres@127.0.0.1:5432/mcpgrain)", errUsage)
	case n.cluster == "":
		return fmt.Errorf("%w: --cluster must not be empty", errUsage)
	}
	if n.consul != "" {
		if err := checkAddr(n.consul); err != nil {
			return fmt.Errorf("%w: --consul %q: %v (want host:port)", errUsage, n.consul, err)
		}
	}
	switch {
	case n.consulTTL < time.Second:
		return fmt.Errorf("%w: --consul-ttl must be at least 1s", errUsage)
	case n.join <= 0:
		return fmt.Errorf("%w: --join-timeout must be positive", errUsage)
	case n.shutdown <= 0:
		return fmt.Errorf("%w: --shutdown-timeout must be positive", errUsage)
	}
	return nil
}

// checkNodeAuth checks that a cluster member can authenticate callers
// and sign requestState: it has no generated fallbacks, unlike dev.
func checkNodeAuth(mc app.MCPConfig) error {
	if mc.Keys.Len() == 0 && !mc.NoAuth && !mc.OAuth.Enabled() {
		return fmt.Errorf("%w: no bearer tokens: set --keys-file, %s, --token-file / MCPGRAIN_TOKEN, or --oauth-issuer (or --no-auth on a loopback --http)", errUsage, auth.EnvVar)
	}
	if mc.StateKey == nil {
		return fmt.Errorf("%w: --state-key is required (the same hex key on every node, e.g. openssl rand -hex 32; give it as --state-key-file or MCPGRAIN_STATE_KEY)", errUsage)
	}
	return nil
}

// tuneGC sets up the garbage collector of a node process as
// [app.GCFor] decides from GOGC, GOMEMLIMIT and the node's memory, and
// logs the settings it runs with; an adaptive target ([app.GCPolicy])
// follows the node's allocation rate until ctx ends.
func tuneGC(ctx context.Context, log *slog.Logger) {
	mem, _ := app.NodeMemory()
	s := app.GCFor(os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"), mem)
	s.Apply(ctx)
	gogc, limit := app.CurrentGC()
	shown := "none"
	if limit < math.MaxInt64 {
		shown = humanize.IBytes(limit)
	}
	log.Info("garbage collector", "gogc", gogc, "gogc_set_by", setBy(s.Percent > 0, "GOGC"),
		"gogc_adaptive", s.Adaptive, "memory_limit", shown, "memory_limit_set_by", setBy(s.Limit > 0, "GOMEMLIMIT"))
}

// setBy names who set a collector setting: the node, or the environment
// variable env (or Go's default, where it is unset).
func setBy(node bool, env string) string {
	if node {
		return "node"
	}
	return env + " or Go's default"
}

func (c *common) appConfig(stderr io.Writer) app.Config {
	return app.Config{
		NodeID:             c.nodeID,
		Bind:               c.bind,
		Advertise:          c.advertise,
		HTTP:               c.http,
		GRPC:               c.grpc,
		GRPCTLSCert:        c.grpcCert,
		GRPCTLSKey:         c.grpcKey,
		ClusterTLSCert:     c.clusterCert,
		ClusterTLSKey:      c.clusterKey,
		ClusterTLSCA:       c.clusterCA,
		EnableProbe:        c.enableProbe,
		ProbeRateLimit:     c.probeRate,
		GatewayOnly:        c.gatewayOnly,
		EnablePprof:        c.pprof,
		ProbeIdle:          c.probeIdle,
		ReminderPoll:       c.reminderPoll,
		Logger:             c.logger(stderr),
		TraceEndpoint:      c.trace.endpoint,
		TraceToolArguments: c.trace.toolArguments,
	}
}
