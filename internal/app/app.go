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
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/continuation"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/membership/consul"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/residency"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/gateway"
	"github.com/mcpgrain/mcpgrain/gateway/approvals"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Config is everything a process needs to run. The zero value is not
// usable; cmd/mcpgrain fills it from flags and MCPGRAIN_* variables.
type Config struct {
	// ClusterName is the Consul service name members register under.
	ClusterName string
	// NodeID names this node; empty derives it from the advertised address.
	NodeID string
	// Consul is the Consul agent's HTTP address; empty runs a single node
	// with embedded membership.
	Consul string
	// ConsulTTL is the membership TTL: a node that stops refreshing is
	// dropped after about this long.
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
	// ReminderPoll is the reminder scan interval (default 1s).
	ReminderPoll time.Duration
	// JoinTimeout bounds joining the cluster at startup (default 30s).
	JoinTimeout time.Duration
	// ShutdownTimeout bounds a graceful stop.
	ShutdownTimeout time.Duration
	// Logger is the process logger.
	Logger *slog.Logger
	// MCP configures the MCP endpoint and session grains.
	MCP MCPConfig
}

// MCPConfig configures the MCP side of a node.
type MCPConfig struct {
	// Packs are the tool packs of every session (e.g. "demo").
	Packs []string
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
	// Approvers is who may decide paused executions: session.ApproversMember
	// ("" too: admins and members) or session.ApproversAdmin; viewers never.
	Approvers string
	// AuthFailureRate is the failed sign-ins per second a client address
	// earns back (0: auth.DefaultFailureRate; negative: failed sign-ins
	// are not limited), with bursts of AuthFailureBurst (0:
	// auth.DefaultFailureBurst). An address out of them gets 429 for every
	// attempt with credentials (every surface).
	AuthFailureRate  float64
	AuthFailureBurst int
	// BodyTimeout bounds reading one request body (zero: 30s).
	BodyTimeout time.Duration
	// TrustedOrigins may call /mcp from browsers.
	TrustedOrigins []string
	// Policy is the idle policy (zero: seed defaults).
	Policy alarm.Policy
	// SessionTTL ends sessions idle this long (zero: 30 days).
	SessionTTL time.Duration
	// SoftCap is the resident runtime soft cap (zero: 32, or derived from
	// ResidentMemory).
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
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

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
func Run(ctx context.Context, cfg Config, ready func(Info)) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	log := cfg.Logger

	// Listen first: a taken port is the most common startup mistake and
	// should fail before anything else starts.
	httpLn, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("cannot listen for HTTP on %s (in use? set --http): %w", cfg.HTTP, err)
	}
	defer httpLn.Close()
	var grpcLn net.Listener
	if cfg.GRPC != "" {
		if grpcLn, err = net.Listen("tcp", cfg.GRPC); err != nil {
			return fmt.Errorf("cannot listen for gRPC on %s (in use? set --grpc): %w", cfg.GRPC, err)
		}
		defer grpcLn.Close()
	}
	grpcOpts := grpcLimits()
	if cfg.GRPCTLSCert != "" || cfg.GRPCTLSKey != "" {
		creds, err := credentials.NewServerTLSFromFile(cfg.GRPCTLSCert, cfg.GRPCTLSKey)
		if err != nil {
			return fmt.Errorf("gRPC TLS (check --grpc-tls-cert and --grpc-tls-key): %w", err)
		}
		grpcOpts = append(grpcOpts, grpc.Creds(creds))
	}

	clusterTLS, err := loadClusterTLS(cfg.ClusterTLSCert, cfg.ClusterTLSKey, cfg.ClusterTLSCA)
	if err != nil {
		return err
	}

	openCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	st, err := store.Open(openCtx, cfg.Store)
	cancel()
	if err != nil {
		return fmt.Errorf("open store (check --store): %w", err)
	}
	defer st.Close()

	var provider membership.Provider = membership.NewSingle()
	if cfg.Consul != "" {
		p, err := consul.New(consul.Config{Address: cfg.Consul, ClusterName: cfg.ClusterName, TTL: cfg.ConsulTTL, Logger: log.With("component", "consul")})
		if err != nil {
			return fmt.Errorf("configure consul membership: %w", err)
		}
		provider = p
	}

	if cfg.MCP.NoAuth && !loopbackListener(httpLn.Addr()) {
		return fmt.Errorf("--no-auth is only allowed when --http listens on a loopback address (it is %s)", httpLn.Addr())
	}
	oauth, err := newOAuth(ctx, cfg.MCP.OAuth, log.With("component", "oauth"))
	if err != nil {
		return err
	}
	nodeID := cfg.NodeID
	if nodeID == "" {
		nodeID = defaultNodeID(cfg.Advertise, cfg.Bind)
	}
	reg := prometheus.NewRegistry()
	nodeReg := prometheus.WrapRegistererWith(prometheus.Labels{"node": nodeID}, reg)

	var node *cluster.Node
	newServer := func(opts *mcp.ServerOptions, codeMode func(*mcp.Server)) (*mcp.Server, func(), error) {
		return toolpacks.NewServer(&mcp.Implementation{Name: "mcpgrain", Version: Version()}, cfg.MCP.Packs, toolpacks.Options{ServerOptions: opts, CodeMode: codeMode})
	}
	var demoAPI *demo.API
	if cfg.MCP.Code.DemoAPI {
		demoAPI = demo.NewAPI()
	}
	forwards := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgrain_resume_forwards_total",
		Help: "Resumes forwarded from the session that received them to the session that owns the execution (seed #1300), by outcome: ok, forbidden, already_decided, already_settled, expired, not_found, error (no answer).",
	}, []string{"outcome"})
	nodeReg.MustRegister(forwards)
	var codeMode *mcpruntime.CodeMode
	if slices.Contains(cfg.MCP.Packs, toolpacks.Code) {
		reg, closeSources, err := codeSources(ctx, cfg.MCP.Code, demoAPI, httpLn.Addr())
		if err != nil {
			return fmt.Errorf("code mode tool sources: %w", err)
		}
		defer closeSources()
		cc := cfg.MCP.Code
		// The node's executions run in its own pool of sandbox worker processes, killed when the
		// node stops.
		popts := cc.Pool
		popts.Registerer = nodeReg
		pool, err := sandbox.NewPool(popts)
		if err != nil {
			return fmt.Errorf("sandbox worker pool: %w", err)
		}
		defer pool.Close()
		lim := cc.Limits
		lim.Pool = pool
		codeMode = &mcpruntime.CodeMode{
			Tools: reg, Policy: cc.Policy, Limits: lim, Window: cc.Window, PublicURL: cc.PublicURL, Clock: cc.Clock,
			Lookup: st.GetExecution, Directory: st, Logger: log.With("component", "code"), Durable: true,
			Forward: func(ctx context.Context, sessionID string, m *pb.ExecutionResumeForModel) (*pb.ExecutionReply, error) {
				r, err := node.Request(ctx, session.KindName, sessionID, m, cluster.Idempotent())
				if err != nil {
					forwards.WithLabelValues("error").Inc()
					return nil, err
				}
				reply, ok := r.(*pb.ExecutionReply)
				if !ok {
					forwards.WithLabelValues("error").Inc()
					return nil, fmt.Errorf("forward resume: unexpected reply %T", r)
				}
				forwards.WithLabelValues(forwardOutcome(reply.GetStatus())).Inc()
				return reply, nil
			},
		}
	}
	builder, err := mcpruntime.NewBuilder(mcpruntime.Config{
		Packs:             cfg.MCP.Packs,
		Store:             st,
		Logger:            log.With("component", "mcp"),
		NewServer:         newServer,
		CodeMode:          codeMode,
		MaxEventBytes:     cfg.MCP.MaxEventBytes,
		SessionEventBytes: cfg.MCP.SessionEventBytes,
		Registerer:        nodeReg,
	})
	if err != nil {
		return err
	}
	defer builder.Close()
	sessions, err := session.NewHost(session.Config{
		Builder:    builder,
		Policy:     cfg.MCP.Policy,
		SessionTTL: cfg.MCP.SessionTTL,
		Residency:  residency.Config{SoftCap: cfg.MCP.SoftCap},
		Memory:     residency.Memory{Budget: cfg.MCP.ResidentMemory},
		Evict: func(ctx context.Context, id string) (bool, error) {
			r, err := node.Request(ctx, session.KindName, id, &pb.RequestCapEviction{})
			if err != nil {
				return false, err
			}
			reply, _ := r.(*pb.CapEvictionReply)
			return reply.GetEvicted(), nil
		},
		Directory:  st,
		Approvers:  cfg.MCP.Approvers,
		Logger:     log.With("component", "session"),
		Registerer: nodeReg,
	})
	if err != nil {
		return err
	}
	continuations, err := continuation.NewHost(continuation.Config{
		NewServer:  newServer,
		CodeMode:   codeMode,
		Store:      st,
		Key:        cfg.MCP.StateKey,
		Logger:     log.With("component", "continuation"),
		Registerer: nodeReg,
	})
	if err != nil {
		return fmt.Errorf("configure sessionless MCP (check --state-key): %w", err)
	}
	kinds := []grain.Kind{sessions.Kind(), continuations.Kind()}
	if cfg.EnableProbe {
		kinds = append(kinds, probe.Kind(probe.Options{IdleTimeout: cfg.ProbeIdle}))
	}
	if cfg.GatewayOnly {
		kinds = nil
	}
	node, err = cluster.Start(ctx, cluster.Config{
		NodeID:        nodeID,
		BindAddr:      cfg.Bind,
		AdvertiseAddr: cfg.Advertise,
		Kinds:         kinds,
		Membership:    provider,
		Store:         st,
		Logger:        log,
		Registerer:    reg,
		Meta:          map[string]string{"http": httpLn.Addr().String()},
		JoinTimeout:   cfg.JoinTimeout,
		Reminders:     cluster.ReminderOptions{PollInterval: cfg.ReminderPoll},
		TLS:           clusterTLS,
	})
	if err != nil {
		return err
	}
	nodeReg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgrain_build_info",
			Help:        "Build information; always 1.",
			ConstLabels: prometheus.Labels{"version": Version()},
		}, func() float64 { return 1 }),
	)

	var failures *auth.FailureLimiter
	if cfg.MCP.AuthFailureRate >= 0 {
		failures = auth.NewFailureLimiter(auth.FailureLimiterOptions{Rate: cfg.MCP.AuthFailureRate, Burst: cfg.MCP.AuthFailureBurst})
	}
	authn := auth.NewAuthenticator(cfg.MCP.Keys, auth.AuthOptions{NoAuth: cfg.MCP.NoAuth, Realm: "mcpgrain", Failures: failures, OAuth: oauth})
	limiter := auth.NewLimiter(auth.LimiterOptions{Rate: cfg.MCP.RateLimit, Burst: cfg.MCP.RateBurst})
	approvalSvc := approvals.NewService(node, st, approvals.ServiceOptions{Approvers: cfg.MCP.Approvers})
	pageKey := cfg.MCP.StateKey
	if len(pageKey) < 32 {
		pageKey = []byte(rand.Text() + rand.Text()) // single node without --state-key: forms die with the process
	}
	handler, err := gateway.NewHandler(gateway.Options{
		Node:         node,
		Gatherer:     reg,
		Registerer:   nodeReg,
		Logger:       log,
		EnableProbe:  cfg.EnableProbe,
		EnablePprof:  cfg.EnablePprof,
		Auth:         authn,
		ProbeLimiter: auth.NewLimiter(auth.LimiterOptions{Rate: cfg.ProbeRateLimit, Burst: int(math.Ceil(2 * cfg.ProbeRateLimit))}),
		MCP: &gateway.MCPOptions{
			Auth:            authn,
			Limiter:         limiter,
			TrustedOrigins:  cfg.MCP.TrustedOrigins,
			StateKey:        cfg.MCP.StateKey,
			BodyTimeout:     cfg.MCP.BodyTimeout,
			LocalSessionIDs: cfg.MCP.LocalSessionIDs,
		},
		Mount: func(mux *http.ServeMux) error {
			if demoAPI != nil {
				mux.Handle("/demo/", http.StripPrefix("/demo", demoAPI.Handler()))
			}
			return approvals.Register(mux, approvalSvc, approvals.HTTPOptions{Auth: authn, Limiter: limiter, PageKey: pageKey, Logger: log.With("component", "approvals")})
		},
	})
	if err != nil {
		_ = node.Stop(context.Background())
		return err
	}
	httpSrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	go func() {
		if err := httpSrv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	var grpcSrv *grpc.Server
	var healthSrv *health.Server
	if grpcLn != nil {
		grpcSrv = grpc.NewServer(grpcOpts...)
		healthSrv = health.NewServer()
		healthpb.RegisterHealthServer(grpcSrv, healthSrv)
		approvalGRPC, err := approvals.NewGRPCServer(approvalSvc, approvals.GRPCOptions{Auth: authn, Limiter: limiter, Logger: log.With("component", "approvals")})
		if err != nil {
			_ = node.Stop(context.Background())
			return err
		}
		approvalGRPC.Register(grpcSrv)
		go func() {
			if err := grpcSrv.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("grpc server: %w", err)
			}
		}()
	}

	info := Info{
		NodeID:      node.ID(),
		ClusterAddr: node.Address(),
		HTTPAddr:    httpLn.Addr().String(),
		Store:       store.Redact(cfg.Store),
		Members:     len(node.View().Members),
	}
	if grpcLn != nil {
		info.GRPCAddr = grpcLn.Addr().String()
	}
	log.Info("mcpgrain ready", "node", info.NodeID, "http", info.HTTPAddr, "grpc", info.GRPCAddr, "cluster", info.ClusterAddr, "store", info.Store)
	if ready != nil {
		ready(info)
	}

	go pruneStore(ctx, st, log)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		log.Error("server failed; shutting down", "err", runErr)
	}

	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if healthSrv != nil {
		healthSrv.Shutdown()
	}
	if err := node.Stop(stopCtx); err != nil {
		log.Warn("node stop", "err", err)
	}
	if err := httpSrv.Shutdown(stopCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if grpcSrv != nil {
		grpcSrv.Stop()
	}
	return runErr
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
//     gateway/resume.go). Without this the log grows with every request of
//     a long-lived session.
const (
	executionRetention = time.Hour
	eventRetention     = time.Hour
	pruneEvery         = 10 * time.Minute
)

// pruneStore drops old directory rows, runs and SSE events until ctx ends.
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
		n, err := st.PruneExecutions(pctx, time.Now().Add(-executionRetention))
		if err != nil {
			log.Warn("prune execution directory", "err", err)
		} else if n > 0 {
			log.Debug("pruned execution directory", "rows", n)
		}
		n, err = st.PruneEvents(pctx, time.Now().Add(-eventRetention))
		cancel()
		if err != nil {
			log.Warn("prune sse event log", "err", err)
		} else if n > 0 {
			log.Debug("pruned sse event log", "events", n)
		}
	}
}

// forwardOutcome is the resume_forwards_total label of a forward's reply.
func forwardOutcome(st pb.ExecutionReply_Status) string {
	switch st {
	case pb.ExecutionReply_STATUS_OK:
		return "ok"
	case pb.ExecutionReply_STATUS_FORBIDDEN:
		return "forbidden"
	case pb.ExecutionReply_STATUS_ALREADY_SETTLED:
		return "already_settled"
	case pb.ExecutionReply_STATUS_NOT_FOUND:
		return "not_found"
	case pb.ExecutionReply_STATUS_ALREADY_DECIDED:
		return "already_decided"
	}
	return "expired"
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
