// Package app wires a runnable mcpgrain process — store, membership, cluster
// node, HTTP gateway and gRPC endpoint — from a [Config]. cmd/mcpgrain
// parses flags into a Config; tests can call [Run] directly.
package app

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/callstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
)

// Config is everything a process needs to run. The zero value is not
// usable; internal/cli fills it from flags and MCPGRAIN_* variables.
type Config struct {
	// ClusterName is the Consul service name members register under.
	ClusterName string
	// NodeID names this node; empty derives it from the advertised address.
	NodeID string
	// Consul is the Consul agent's HTTP address; empty runs a single node
	// with embedded membership.
	Consul string
	// ConsulTTL is the membership TTL: a node that stops refreshing is
	// dropped after about this long (zero: consul.DefaultTTL).
	ConsulTTL time.Duration
	// Bind is the host:port of the cluster (actor remote) listener.
	Bind string
	// Advertise is the host:port other members dial; empty uses Bind.
	Advertise string
	// HTTP is the gateway's listen address.
	HTTP string
	// GRPC is the public gRPC listen address (gRPC health and the
	// ApprovalService); empty disables it.
	GRPC string
	// GRPCTLSCert and GRPCTLSKey, when set, serve gRPC over TLS with this
	// PEM certificate and key.
	GRPCTLSCert, GRPCTLSKey string
	// ClusterTLSCert, ClusterTLSKey and ClusterTLSCA, when set (all three),
	// protect node-to-node traffic with mutual TLS: this node's PEM
	// certificate and key, and the CA every member's certificate chains to.
	ClusterTLSCert, ClusterTLSKey, ClusterTLSCA string
	// Store is the store DSN (sqlite:PATH or postgres://…).
	Store string
	// GatewayOnly serves HTTP but hosts no grains: every request is routed
	// to the members that do (an edge gateway).
	GatewayOnly bool
	// EnablePprof serves Go's profiler at /debug/pprof/ to callers with
	// the admin role.
	EnablePprof bool
	// EnableProbe hosts the probe grain kind and serves /debug/probe/{id}
	// to callers with the admin role.
	EnableProbe bool
	// ProbeRateLimit is /debug/probe requests per second per principal
	// (0: unlimited), with bursts of twice that.
	ProbeRateLimit float64
	// ProbeIdle passivates idle probe grains after this long (0: never).
	ProbeIdle time.Duration
	// ReminderPoll is the reminder scan interval (zero:
	// reminders.DefaultPollInterval).
	ReminderPoll time.Duration
	// JoinTimeout bounds joining the cluster at startup (zero:
	// cluster.DefaultJoinTimeout).
	JoinTimeout time.Duration
	// ShutdownTimeout bounds a graceful stop (zero:
	// [DefaultShutdownTimeout]): leaving the membership, draining
	// activations and closing the HTTP server share it, and Run returns
	// when it runs out.
	ShutdownTimeout time.Duration
	// TraceEndpoint is the OTLP endpoint URL spans are exported to (zero:
	// otlp.DefaultEndpoint, tracing off unless the OTEL_EXPORTER_OTLP_*
	// environment sets one; see package tracing/otlp).
	TraceEndpoint string
	// TraceToolArguments is the most bytes of a tools/call's arguments
	// the gateway's span records (zero: otlp.DefaultToolArguments, none;
	// see tracing.Options.ToolArguments).
	TraceToolArguments int
	// Logger is the process logger.
	Logger *slog.Logger
	// MCP configures the MCP endpoint and session grains.
	MCP MCPConfig
}

// MCPConfig configures the MCP side of a node.
type MCPConfig struct {
	// Packs are the tool packs of every session (e.g. "demo"), chosen
	// among the built-in packs and ExtraPacks.
	Packs []string
	// ExtraPacks are packs this program knows besides the built-in ones
	// (an SDK user's server, docs/sdk.md). Nil: the built-ins only.
	ExtraPacks []toolpacks.Pack
	// Implementation is the server a client sees in initialize. Nil:
	// "mcpgrain" at this build's version.
	Implementation *mcp.Implementation
	// Keys authenticates bearer tokens.
	Keys *auth.Keys
	// OAuth verifies bearer tokens that are not keys as OAuth access
	// tokens (zero: off).
	OAuth OAuthConfig
	// NoAuth accepts every request as the anonymous principal; only allowed
	// on a loopback HTTP listener.
	NoAuth bool
	// RateLimit is requests per second per principal (0: unlimited), with
	// bursts of RateBurst.
	RateLimit float64
	RateBurst int
	// Approvers is who may decide paused executions: policy.ApproversMember
	// ("" too: admins and members) or policy.ApproversAdmin; viewers never.
	Approvers policy.Approvers
	// AuthFailureRate is the failed sign-ins per second a client address
	// earns back (0: auth.DefaultFailureRate; negative: failed sign-ins
	// are not limited), with bursts of AuthFailureBurst (0:
	// auth.DefaultFailureBurst). An address out of them gets 429 for every
	// attempt with credentials (every surface).
	AuthFailureRate  float64
	AuthFailureBurst int
	// BodyTimeout bounds reading one request body (zero:
	// gateway.DefaultBodyTimeout).
	BodyTimeout time.Duration
	// StreamKeepalive is how long an MCP SSE stream may stay quiet before
	// the gateway writes a keepalive comment on it (zero:
	// exchange.DefaultStreamKeepalive; negative: never).
	StreamKeepalive time.Duration
	// MaxInFlight bounds the /mcp requests the node serves at once (zero:
	// gateway.DefaultMaxInFlight; negative: unbounded), and QueueWait how
	// long one over it waits before it is shed with 503 and Retry-After
	// (zero: gateway.DefaultQueueWait; negative: shed at once). See
	// gateway.MCPOptions.
	MaxInFlight int
	QueueWait   time.Duration
	// SchedLagTarget is gateway.MCPOptions.SchedLagTarget (zero:
	// gateway.DefaultSchedLagTarget; negative: a fixed bound).
	SchedLagTarget time.Duration
	// TrustedOrigins are browser origins that may call the node's routes
	// (/mcp, /api/, …) cross-origin; every route refuses other cross-origin
	// writes.
	TrustedOrigins []string
	// Policy is the idle policy (zero: executor's defaults).
	Policy alarm.Policy
	// SessionTTL ends sessions idle this long (zero:
	// session.DefaultSessionTTL).
	SessionTTL time.Duration
	// TaskTTL is how long a task (tasks extension) is kept after its
	// creation (zero: tasks.DefaultTTL).
	TaskTTL time.Duration
	// HandleTTL deletes server-minted handles idle this long (zero:
	// handle.DefaultIdleTTL).
	HandleTTL time.Duration
	// MaxHandlesPerPrincipal caps one principal's live handles (zero:
	// handle.DefaultMaxPerPrincipal; negative: unlimited).
	MaxHandlesPerPrincipal int
	// MaxPendingAsksPerPrincipal caps one principal's undecided questions
	// asked with the SDK's AskLater (zero: mcpruntime.DefaultMaxPendingAsks;
	// negative: unlimited).
	MaxPendingAsksPerPrincipal int
	// SoftCap is the resident runtime soft cap (zero:
	// residency.DefaultSoftCap, or derived from ResidentMemory).
	SoftCap int
	// ResidentMemory is the memory budget of resident session runtimes in
	// bytes; the soft cap is derived from it (residency.Memory). Zero: the
	// fixed SoftCap.
	ResidentMemory uint64
	// StateKey signs 2026-07-28 requestState tokens and the approval
	// page's forms; all nodes of a cluster must share it (at least 32
	// bytes).
	StateKey []byte
	// Code configures code mode (the "code" pack).
	Code CodeConfig
	// LocalSessionIDs mints new sessions' ids among the ids the receiving
	// node owns (see gateway.MCPOptions.LocalSessionIDs).
	LocalSessionIDs bool
	// MaxEventBytes bounds one SSE event kept for resumability (zero:
	// mcpruntime.DefaultMaxEventBytes).
	MaxEventBytes int
	// SessionEventBytes bounds the SSE events stored per session, oldest
	// dropped first (zero: mcpruntime.DefaultSessionEventBytes).
	SessionEventBytes int64
	// PrincipalEventBytes bounds the SSE events stored for all the
	// sessions of one principal, oldest dropped first (zero:
	// mcpruntime.DefaultPrincipalEventBytes).
	PrincipalEventBytes int64
	// StoredEventBytes bounds the SSE events the store keeps for every
	// session of every node that shares it, oldest dropped first (zero:
	// mcpruntime.DefaultStoredEventBytes).
	StoredEventBytes int64
}

// Info describes a running process, reported once it is ready.
type Info struct {
	NodeID      string
	ClusterAddr string
	HTTPAddr    string
	GRPCAddr    string
	Store       string
	Members     int
}

// Version returns the build's module version (or "devel").
func Version() string { return version() }

// version reads the build info once: parsing it allocates, and the bench
// client names its version in every initialize.
var version = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
})

func loopbackListener(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// defaultNodeID derives a node id from the advertised (else bound) address,
// like cluster.Start would; with an ephemeral port it is random.
func defaultNodeID(advertise, bind string) string {
	addr := advertise
	if addr == "" {
		addr = bind
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
		return "node-" + strings.ToLower(rand.Text()[:10])
	}
	return "node-" + strings.NewReplacer(":", "-", ".", "-", "[", "", "]", "").Replace(addr)
}

// Run starts the process described by cfg, calls ready once it serves,
// and runs until ctx ends; it then stops gracefully within
// cfg.ShutdownTimeout. It returns an error if anything fails to start.
//
// A process starts in steps, each adding its part (process.go): check
// the session lifecycle settings against each other (CheckLifecycle), listen,
// open the store, pick the membership, set up OAuth verification, name the
// node and make its metrics registries, start the node (it builds the
// grains, handing them itself as their grain.Cluster: nothing is wired to
// the node after it started), build what the public surfaces share
// (authentication, rate limits, approvals), serve HTTP, serve gRPC.
// Whatever a step started is undone, in reverse order, when Run returns.
func Run(ctx context.Context, cfg Config, ready func(Info)) error {
	p := newProcess(cfg)
	defer p.close()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"lifecycle", p.checkLifecycle},
		{"listen", p.listen},
		{"store", p.openStore},
		{"membership", p.membership},
		{"oauth", p.verifier},
		{"identity", p.identity},
		{"tracing", p.tracing},
		{"node", p.startNode},
		{"surfaces", p.surfaces},
		{"gateway", p.serveHTTP},
		{"grpc", p.serveGRPC},
	}
	for _, step := range steps {
		if err := step.run(ctx); err != nil {
			p.log.Debug("startup step failed", "step", step.name, "err", err)
			return err
		}
	}
	info := p.info()
	p.log.Info("mcpgrain ready", "node", info.NodeID, "http", info.HTTPAddr, "grpc", info.GRPCAddr, "cluster", info.ClusterAddr, "store", info.Store)
	if ready != nil {
		ready(info)
	}
	go pruneStore(ctx, p.st, p.log)
	return p.wait(ctx)
}

// What the store keeps, and for how long:
//   - settled and expired rows of the execution directory, executionRetention
//     after their deadline (late cross-session resumes still find the owner),
//     with their runs and journals; runs settled executionRetention ago; and
//     sessionless (continuation) pauses executionRetention after they
//     started, long after their requestState expired (StateTTL, 15 min);
//   - SSE events, eventRetention after they were stored: a client resumes a
//     dropped stream within seconds, and a later resume finds the stream
//     gone and gets its request answered with the restart error (see
//     exchange/eventid.go). Without this the log grows with every request of
//     a long-lived session.
const (
	executionRetention = time.Hour
	eventRetention     = time.Hour
	pruneEvery         = 10 * time.Minute
)

// pruneStore drops old directory rows, runs, SSE events and expired tasks
// until ctx ends.
// Every node does it; the deletes are idempotent.
func pruneStore(ctx context.Context, st store.Store, log *slog.Logger) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := runstore.New(st).PruneExecutions(pctx, time.Now().Add(-executionRetention))
		if err != nil {
			log.Warn("prune execution directory", "err", err)
		} else if n > 0 {
			log.Debug("pruned execution directory", "rows", n)
		}
		n, err = callstore.New(st).Prune(pctx, time.Now().Add(-executionRetention))
		if err != nil {
			log.Warn("prune durable tool calls", "err", err)
		} else if n > 0 {
			log.Debug("pruned durable tool calls", "calls", n)
		}
		n, err = eventstore.New(st).PruneEvents(pctx, time.Now().Add(-eventRetention))
		if err != nil {
			log.Warn("prune sse event log", "err", err)
		} else if n > 0 {
			log.Debug("pruned sse event log", "events", n)
		}
		n, err = taskstore.New(st).PruneTasks(pctx, time.Now())
		cancel()
		if err != nil {
			log.Warn("prune expired tasks", "err", err)
		} else if n > 0 {
			log.Debug("pruned expired tasks", "tasks", n)
		}
	}
}

// loadClusterTLS reads the mutual TLS files of cluster traffic; none set
// is plaintext.
func loadClusterTLS(certFile, keyFile, caFile string) (*cluster.RemoteTLS, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("cluster TLS needs --cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster TLS (check --cluster-tls-cert and --cluster-tls-key): %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster TLS (check --cluster-tls-ca): %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster TLS: --cluster-tls-ca %s holds no PEM certificate", caFile)
	}
	return cluster.MutualTLS(cert, roots), nil
}
