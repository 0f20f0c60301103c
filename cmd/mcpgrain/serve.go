package main

import (
	"context"
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

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", "Runs one mcpgrain node with an embedded SQLite store and no external services.", stderr)
	var c common
	c.register(fs, defaultHTTPAddr, "127.0.0.1:0")
	data := fs.String("data", ".mcpgrain", "data directory (the SQLite store lives here)")
	fs.Lookup("node-id").DefValue, c.nodeID = "dev", "dev"
	var m mcpFlags
	m.register(fs, "code,demo", true)
	addSecretFiles(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "dev", false); err != nil { // dev: local experiments, no warning
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if *data == "" {
		return fmt.Errorf("%w: --data must not be empty", errUsage)
	}
	generated := false
	if m.token == "" && m.keysFile == "" && os.Getenv(auth.EnvVar) == "" && !m.noAuth && len(m.oauth.issuers) == 0 {
		tok, err := auth.GenerateToken()
		if err != nil {
			return err
		}
		m.token, generated = tok, true
	}
	if m.stateKey == "" {
		k, err := devStateKey(*data)
		if err != nil {
			return fmt.Errorf("requestState key: %w", err)
		}
		m.stateKey = k
	}
	mc, err := m.config()
	if err != nil {
		return err
	}
	cfg := c.appConfig(stderr)
	cfg.MCP = mc
	cfg.Store = "sqlite:" + filepath.Join(*data, "mcpgrain.db")
	tuneGC(cfg.Logger)
	return app.Run(ctx, cfg, func(info app.Info) {
		endpoint := "http://" + info.HTTPAddr + "/mcp"
		fmt.Fprintf(stdout, "mcpgrain %s dev node %s (tools: %s)\n\n", version(), info.NodeID, strings.Join(mc.Packs, ", "))
		fmt.Fprintf(stdout, "  MCP endpoint:  %s\n", endpoint)
		switch {
		case m.noAuth:
			fmt.Fprintf(stdout, "  auth:          none (--no-auth)\n")
		case m.token != "":
			note := ""
			if generated {
				note = "  (generated; set your own with --token)"
			}
			fmt.Fprintf(stdout, "  bearer token:  %s%s\n", m.token, note)
		case mc.OAuth.Enabled():
			fmt.Fprintf(stdout, "  auth:          OAuth access tokens of %s for %s\n", strings.Join(mc.OAuth.Issuers, ", "), mc.OAuth.Resource)
		default:
			fmt.Fprintf(stdout, "  auth:          bearer tokens from --keys-file / %s\n", auth.EnvVar)
		}
		fmt.Fprintf(stdout, "  operations:    http://%s/healthz  /readyz  /metrics\n", info.HTTPAddr)
		if mc.Code.DemoAPI {
			fmt.Fprintf(stdout, "  demo API:      http://%s/demo/todos  (your organization's list, with your bearer token; code calls it as tools.demo.*; writes need approval)\n", info.HTTPAddr)
		}
		fmt.Fprintf(stdout, "  approvals:     http://%s/approvals  (inbox)  ·  /approve/<execution id>  ·  mcpgrain approve list\n", info.HTTPAddr)
		if slices.Contains(mc.Packs, "code") {
			try := "mcpgrain try"
			if endpoint != defaultMCPURL {
				try += " --url " + endpoint
			}
			if !m.noAuth && m.token != "" {
				try = "MCPGRAIN_TOKEN=" + m.token + " " + try // not --token: keep tokens off command lines
			}
			fmt.Fprintf(stdout, "  try it:        %s   (runs code that needs approval, prints where to approve it)\n", try)
		}
		if info.GRPCAddr != "" {
			fmt.Fprintf(stdout, "  grpc:          %s\n", info.GRPCAddr)
		}
		fmt.Fprintf(stdout, "  store:         %s\n\n", info.Store)
		header := ""
		if !m.noAuth && m.token != "" {
			header = fmt.Sprintf(`, "headers": {"Authorization": "Bearer %s"}`, m.token)
		}
		label := "URL + bearer header"
		if header == "" && mc.OAuth.Enabled() {
			label = "the client signs in through OAuth: the 401 names the authorization server"
		}
		fmt.Fprintf(stdout, "  client config (%s):\n    {\"mcpServers\": {\"mcpgrain\": {\"type\": \"http\", \"url\": %q%s}}}\n\n  press Ctrl-C to stop\n", label, endpoint, header)
	})
}

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node", "Runs a cluster member: Consul for membership, Postgres (or SQLite for one machine) for state.", stderr)
	var c common
	c.register(fs, defaultHTTPAddr, "127.0.0.1:7070")
	clusterName := fs.String("cluster", "mcpgrain", "cluster name (the Consul service members register under)")
	consulAddr := fs.String("consul", consul.DefaultAddress, "Consul agent HTTP address; empty runs without Consul as a single node")
	ttl := fs.Duration("consul-ttl", consul.DefaultTTL, "membership TTL: a node that stops refreshing is dropped after about this long")
	join := fs.Duration("join-timeout", cluster.DefaultJoinTimeout, "give up starting if the node cannot join the cluster (register in Consul) within this long")
	shutdown := fs.Duration("shutdown-timeout", app.DefaultShutdownTimeout, "longest a graceful stop (SIGTERM) takes: leave the cluster, drain activations and requests, then exit (a supervisor's kill grace, such as a pod's terminationGracePeriodSeconds, must be longer)")
	storeDSN := fs.String("store", "", "store DSN: postgres://user@host:5432/db (clusters) or sqlite:PATH (required); a DSN with a password belongs in --store-file or MCPGRAIN_STORE (or use PGPASSWORD / a .pgpass file)")
	var m mcpFlags
	m.register(fs, "code,demo", false)
	addSecretFiles(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := resolveSecrets(fs, stderr, "node", true); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if *storeDSN == "" {
		return fmt.Errorf("%w: --store is required (e.g. --store postgres://postgres@127.0.0.1:5432/mcpgrain)", errUsage)
	}
	if *clusterName == "" {
		return fmt.Errorf("%w: --cluster must not be empty", errUsage)
	}
	if *consulAddr != "" {
		if err := checkAddr(*consulAddr); err != nil {
			return fmt.Errorf("%w: --consul %q: %v (want host:port)", errUsage, *consulAddr, err)
		}
	}
	if *ttl < time.Second {
		return fmt.Errorf("%w: --consul-ttl must be at least 1s", errUsage)
	}
	if *join <= 0 {
		return fmt.Errorf("%w: --join-timeout must be positive", errUsage)
	}
	if *shutdown <= 0 {
		return fmt.Errorf("%w: --shutdown-timeout must be positive", errUsage)
	}
	mc, err := m.config()
	if err != nil {
		return err
	}
	if mc.Keys.Len() == 0 && !mc.NoAuth && !mc.OAuth.Enabled() {
		return fmt.Errorf("%w: no bearer tokens: set --keys-file, %s, --token-file / MCPGRAIN_TOKEN, or --oauth-issuer (or --no-auth on a loopback --http)", errUsage, auth.EnvVar)
	}
	if mc.StateKey == nil {
		return fmt.Errorf("%w: --state-key is required (the same hex key on every node, e.g. openssl rand -hex 32; give it as --state-key-file or MCPGRAIN_STATE_KEY)", errUsage)
	}
	cfg := c.appConfig(stderr)
	cfg.MCP = mc
	cfg.ClusterName, cfg.Consul, cfg.ConsulTTL, cfg.Store, cfg.JoinTimeout = *clusterName, *consulAddr, *ttl, *storeDSN, *join
	cfg.ShutdownTimeout = *shutdown
	tuneGC(cfg.Logger)
	return app.Run(ctx, cfg, func(info app.Info) {
		fmt.Fprintf(stdout, "mcpgrain %s node %s ready: http %s, cluster %s, %d members\n", version(), info.NodeID, info.HTTPAddr, info.ClusterAddr, info.Members)
	})
}

// tuneGC sets up the garbage collector of a node process as
// [app.GCFor] decides from GOGC, GOMEMLIMIT and the node's memory, and
// logs the settings it runs with.
func tuneGC(log *slog.Logger) {
	mem, _ := app.NodeMemory()
	s := app.GCFor(os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"), mem)
	s.Apply()
	gogc, limit := app.CurrentGC()
	shown := "none"
	if limit < math.MaxInt64 {
		shown = humanize.IBytes(limit)
	}
	log.Info("garbage collector", "gogc", gogc, "gogc_set_by", setBy(s.Percent > 0, "GOGC"),
		"memory_limit", shown, "memory_limit_set_by", setBy(s.Limit > 0, "GOMEMLIMIT"))
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
		NodeID:         c.nodeID,
		Bind:           c.bind,
		Advertise:      c.advertise,
		HTTP:           c.http,
		GRPC:           c.grpc,
		GRPCTLSCert:    c.grpcCert,
		GRPCTLSKey:     c.grpcKey,
		ClusterTLSCert: c.clusterCert,
		ClusterTLSKey:  c.clusterKey,
		ClusterTLSCA:   c.clusterCA,
		EnableProbe:    c.enableProbe,
		ProbeRateLimit: c.probeRate,
		GatewayOnly:    c.gatewayOnly,
		EnablePprof:    c.pprof,
		ProbeIdle:      c.probeIdle,
		ReminderPoll:   c.reminderPoll,
		Logger:         c.logger(stderr),
	}
}
