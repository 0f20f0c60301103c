// Package app wires a runnable mcpgrain process — store, membership, cluster
// node, HTTP gateway and gRPC endpoint — from a [Config]. cmd/mcpgrain
// parses flags into a Config; tests can call [Run] directly.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/membership/consul"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/gateway"
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
	// GRPC is the public gRPC listen address (gRPC health now; the
	// ApprovalService joins it); empty disables it.
	GRPC string
	// Store is the store DSN (sqlite:PATH or postgres://…).
	Store string
	// EnableProbe hosts the probe grain kind and serves /debug/probe/{id}.
	EnableProbe bool
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

	reg := prometheus.NewRegistry()
	var kinds []grain.Kind
	if cfg.EnableProbe {
		kinds = append(kinds, probe.Kind(probe.Options{IdleTimeout: cfg.ProbeIdle}))
	}
	node, err := cluster.Start(ctx, cluster.Config{
		NodeID:        cfg.NodeID,
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
	})
	if err != nil {
		return err
	}
	nodeReg := prometheus.WrapRegistererWith(prometheus.Labels{"node": node.ID()}, reg)
	nodeReg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgrain_build_info",
			Help:        "Build information; always 1.",
			ConstLabels: prometheus.Labels{"version": Version()},
		}, func() float64 { return 1 }),
	)

	httpSrv := &http.Server{
		Handler: gateway.NewHandler(gateway.Options{
			Node:        node,
			Gatherer:    reg,
			Logger:      log,
			EnableProbe: cfg.EnableProbe,
		}),
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
		grpcSrv = grpc.NewServer()
		healthSrv = health.NewServer()
		healthpb.RegisterHealthServer(grpcSrv, healthSrv)
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
