package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcpgrain/mcpgrain/actors/continuation"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/actors/tasks"
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/membership/consul"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/gateway"
	"github.com/mcpgrain/mcpgrain/gateway/approvals"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/inspect"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// process is a process being started by Run: each step fills in its part,
// and close undoes, in reverse order, what the steps started.
type process struct {
	cfg     Config
	log     *slog.Logger
	closers []func()

	// listen
	httpLn, grpcLn net.Listener
	grpcOpts       []grpc.ServerOption
	clusterTLS     *cluster.RemoteTLS
	// store
	st store.Store
	// membership
	provider membership.Provider
	// oauth
	oauth *auth.OAuth
	// identity
	nodeID  string
	reg     *prometheus.Registry
	nodeReg prometheus.Registerer
	// node (its grain.Host, grains, sets demoAPI)
	demoAPI *demo.API
	// handles is the node's handle service (grains sets it).
	handles *handle.Host
	node    *cluster.Node
	// surfaces
	surf surfaces
	// gateway, grpc
	httpSrv   *http.Server
	grpcSrv   *grpc.Server
	healthSrv *health.Server
	errc      chan error     // a server's failure (capacity: one per server)
	serving   sync.WaitGroup // the servers' goroutines: Run returns after they do
	stopped   bool           // wait stopped the node
}

func newProcess(cfg Config) *process {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	return &process{cfg: cfg, log: cfg.Logger, errc: make(chan error, 2)}
}

// onClose registers f to run when Run returns (last registered, first run).
func (p *process) onClose(f func()) { p.closers = append(p.closers, f) }

func (p *process) close() {
	for _, f := range slices.Backward(p.closers) {
		f()
	}
}

// listen opens the HTTP and gRPC listeners first: a taken port is the most
// common startup mistake and should fail before anything else starts. It
// also loads the TLS material of gRPC and of cluster traffic.
func (p *process) listen(context.Context) error {
	cfg := p.cfg
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("cannot listen for HTTP on %s (in use? set --http): %w", cfg.HTTP, err)
	}
	p.httpLn = ln
	p.onClose(func() { _ = ln.Close() })
	if cfg.MCP.NoAuth && !loopbackListener(ln.Addr()) {
		return fmt.Errorf("--no-auth is only allowed when --http listens on a loopback address (it is %s)", ln.Addr())
	}
	if cfg.GRPC != "" {
		gln, err := net.Listen("tcp", cfg.GRPC)
		if err != nil {
			return fmt.Errorf("cannot listen for gRPC on %s (in use? set --grpc): %w", cfg.GRPC, err)
		}
		p.grpcLn = gln
		p.onClose(func() { _ = gln.Close() })
	}
	p.grpcOpts = grpcLimits()
	if cfg.GRPCTLSCert != "" || cfg.GRPCTLSKey != "" {
		creds, err := credentials.NewServerTLSFromFile(cfg.GRPCTLSCert, cfg.GRPCTLSKey)
		if err != nil {
			return fmt.Errorf("gRPC TLS (check --grpc-tls-cert and --grpc-tls-key): %w", err)
		}
		p.grpcOpts = append(p.grpcOpts, grpc.Creds(creds))
	}
	p.clusterTLS, err = loadClusterTLS(cfg.ClusterTLSCert, cfg.ClusterTLSKey, cfg.ClusterTLSCA)
	return err
}

// openStore opens the store the grains persist to.
func (p *process) openStore(ctx context.Context) error {
	openCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := store.Open(openCtx, p.cfg.Store)
	if err != nil {
		return fmt.Errorf("open store (check --store): %w", err)
	}
	p.st = st
	p.onClose(func() { _ = st.Close() })
	return nil
}

// membership picks how the node finds its peers: Consul, or alone.
func (p *process) membership(context.Context) error {
	p.provider = membership.NewSingle()
	if p.cfg.Consul == "" {
		return nil
	}
	c, err := consul.New(consul.Config{Address: p.cfg.Consul, ClusterName: p.cfg.ClusterName, TTL: p.cfg.ConsulTTL, Logger: p.log.With("component", "consul")})
	if err != nil {
		return fmt.Errorf("configure consul membership: %w", err)
	}
	p.provider = c
	return nil
}

// verifier sets up OAuth access-token verification (discovery of the
// issuers' keys) when configured, before the node joins: a wrong issuer
// fails the start, not the first request.
func (p *process) verifier(ctx context.Context) error {
	var err error
	p.oauth, err = newOAuth(ctx, p.cfg.MCP.OAuth, p.log.With("component", "oauth"))
	return err
}

// identity names the node and makes its metrics registries (the
// grains' metrics carry the node label).
func (p *process) identity(context.Context) error {
	p.nodeID = p.cfg.NodeID
	if p.nodeID == "" {
		p.nodeID = defaultNodeID(p.cfg.Advertise, p.cfg.Bind)
	}
	p.reg = prometheus.NewRegistry()
	p.nodeReg = prometheus.WrapRegistererWith(prometheus.Labels{"node": p.nodeID}, p.reg)
	return nil
}

// grains builds the grain kinds this node hosts: sessions, continuations
// (both sharing one runtime builder and, with the code pack, one code
// mode), tasks and the probe. It is the node's grain.Host: the node calls
// it while it starts, with itself as c, through which the kinds' shared
// code reaches other grains (cap evictions, forwarded resumes, task
// starts, catalog broadcasts).
func (p *process) grains(ctx context.Context, c grain.Cluster) ([]grain.Kind, error) {
	cfg := p.cfg
	if cfg.MCP.Code.DemoAPI {
		p.demoAPI = demo.NewOrgAPI()
	}
	codeMode, err := p.codeMode(ctx, c)
	if err != nil {
		return nil, err
	}
	handles, err := handle.NewHost(handle.Config{
		Cluster: c, IdleTTL: cfg.MCP.HandleTTL, MaxPerPrincipal: cfg.MCP.MaxHandlesPerPrincipal, Logger: p.log.With("component", "handle"), Registerer: p.nodeReg,
		Store: p.st,
	})
	if err != nil {
		return nil, err
	}
	p.handles = handles
	newServer, catalog := p.servers(c, handles.Bind)
	if codeMode != nil {
		// The execute description declares the sources' operations: a
		// source whose tools change (an upstream's list_changed, a late
		// connection) has this node's servers register it anew. Every
		// node hears of its own sources' changes, so the change is local.
		codeMode.Tools.OnChange(func() {
			codeMode.RefreshAPI(context.Background())
			if err := catalog.ApplyLocal(toolpacks.CodeAPIChange); err != nil {
				p.log.Debug("execute description not refreshed", "err", err)
			}
		})
	}
	builder, err := p.sessionBuilder(c, newServer, codeMode)
	if err != nil {
		return nil, err
	}
	later := mcpruntime.LaterConfig{PublicURL: cfg.MCP.Code.PublicURL, MaxPendingAsks: cfg.MCP.MaxPendingAsksPerPrincipal,
		Refusals: builder.LaterRefusals()}
	taskHost, err := p.taskGrains(c, newServer, codeMode, later)
	if err != nil {
		return nil, err
	}
	continuations, err := continuation.NewHost(continuation.Config{
		NewServer: newServer, CodeMode: codeMode, Store: runstore.New(p.st), Key: cfg.MCP.StateKey,
		Logger: p.log.With("component", "continuation"), Registerer: p.nodeReg,
		ApplyCatalogChange: catalog.ApplyLocal, Middleware: taskHost.Middleware,
		Calls: p.st, MayDecide: cfg.MCP.Approvers.MayDecide, AskWindow: cfg.MCP.Code.Window, Later: later, Now: p.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("configure sessionless MCP (check --state-key): %w", err)
	}
	p.onClose(continuations.Close)
	sessions, err := session.NewHost(session.Config{
		Builder: builder, Policy: cfg.MCP.Policy, SessionTTL: cfg.MCP.SessionTTL,
		Residency: residency.Config{SoftCap: cfg.MCP.SoftCap}, Memory: residency.Memory{Budget: cfg.MCP.ResidentMemory},
		Evict: session.EvictThrough(c), Directory: directory.New(p.st), Approvers: cfg.MCP.Approvers,
		SessionlessStreams: continuations.OpenStreams,
		Logger:             p.log.With("component", "session"), Registerer: p.nodeReg,
	})
	if err != nil {
		return nil, err
	}
	if cfg.GatewayOnly {
		return nil, nil
	}
	kinds := []grain.Kind{sessions.Kind(), continuations.Kind(), taskHost.Kind(), handles.Kind(), handles.QuotaKind()}
	if cfg.EnableProbe {
		kinds = append(kinds, probe.Kind(probe.Options{IdleTimeout: cfg.ProbeIdle}))
	}
	return kinds, nil
}

// now is the node's clock (Code.Clock) for the grains that take a
// function (nil: their default, the system clock): the SDK's durable
// calls tell time alike in sessions, continuation grains and tasks.
func (p *process) now() func() time.Time {
	if clk := p.cfg.MCP.Code.Clock; clk != nil {
		return clk.Now
	}
	return nil
}

// taskGrains builds the host of the node's task grains (the MCP tasks
// sessionBuilder is the builder of the node's session runtimes; it closes
// with the process.
func (p *process) sessionBuilder(c grain.Cluster, newServer mcpruntime.ServerFactory, codeMode *mcpruntime.CodeMode) (*mcpruntime.Builder, error) {
	cfg := p.cfg
	// Code mode's resume from another session travels on the SDK's
	// continuation route, counted as a forwarded resume.
	cont, err := session.ContinueCounted(c, p.nodeReg)
	if err != nil {
		return nil, err
	}
	builder, err := mcpruntime.NewBuilder(mcpruntime.Config{
		Packs: cfg.MCP.Packs, Store: p.st, Logger: p.log.With("component", "mcp"), NewServer: newServer, CodeMode: codeMode,
		MaxEventBytes: cfg.MCP.MaxEventBytes, SessionEventBytes: cfg.MCP.SessionEventBytes,
		PrincipalEventBytes: cfg.MCP.PrincipalEventBytes, StoredEventBytes: cfg.MCP.StoredEventBytes, Registerer: p.nodeReg,
		AskWindow: cfg.MCP.Code.Window, PublicURL: cfg.MCP.Code.PublicURL,
		MaxPendingAsks: cfg.MCP.MaxPendingAsksPerPrincipal,
		Approvers:      cfg.MCP.Approvers, Decide: session.DecideThrough(c), Continue: cont,
		Clock: cfg.MCP.Code.Clock,
	})
	if err != nil {
		return nil, err
	}
	p.onClose(builder.Close)
	return builder, nil
}

// extension), closed when the process stops.
func (p *process) taskGrains(c grain.Cluster, newServer mcpruntime.ServerFactory, codeMode *mcpruntime.CodeMode, later mcpruntime.LaterConfig) (*tasks.Host, error) {
	cfg := p.cfg
	h, err := tasks.NewHost(tasks.Config{
		NewServer: newServer, CodeMode: codeMode, RunStore: runstore.New(p.st), Store: taskstore.New(p.st), Cluster: c,
		Support: toolpacks.TaskSupportWith(cfg.MCP.ExtraPacks, cfg.MCP.Packs), MayDecide: cfg.MCP.Approvers.MayDecide, TTL: cfg.MCP.TaskTTL,
		Calls: p.st, AskWindow: cfg.MCP.Code.Window, Later: later, Now: p.now(),
		Logger: p.log.With("component", "tasks"), Registerer: p.nodeReg,
	})
	if err != nil {
		return nil, fmt.Errorf("configure MCP tasks: %w", err)
	}
	p.onClose(h.Close)
	return h, nil
}

// servers returns how the node builds its shared servers (sessions,
// continuations and tasks) from its tool packs, and their catalog, kept
// equal to the other nodes' catalogs by broadcasts through c; bind (the
// handle service's) binds their requests to the node's handles.
func (p *process) servers(c grain.Cluster, bind func(*mcp.Server)) (mcpruntime.ServerFactory, *toolpacks.Catalog) {
	catalog := toolpacks.NewCatalog()
	catalog.SetBroadcast(continuation.BroadcastCatalog(c))
	impl := p.cfg.MCP.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "mcpgrain", Version: Version()}
	}
	return func(opts *mcp.ServerOptions, codeMode func(*mcp.Server)) (*mcp.Server, func(), error) {
		srv, closeSrv, err := toolpacks.NewServer(impl, p.cfg.MCP.Packs,
			toolpacks.Options{ServerOptions: opts, CodeMode: codeMode, Catalog: catalog, Packs: p.cfg.MCP.ExtraPacks})
		if err == nil {
			srv.AddReceivingMiddleware(mcpruntime.TraceTools) // execute_tool spans, with tracing on
			bind(srv)                                         // the SDK's handles (NewHandle, OnHandle)
		}
		return srv, closeSrv, err
	}, catalog
}

// codeMode builds code mode when the code pack is on (nil otherwise): its
// tool sources and the node's pool of sandbox worker processes, killed
// when the process stops.
func (p *process) codeMode(ctx context.Context, c grain.Cluster) (*mcpruntime.CodeMode, error) {
	cfg := p.cfg
	if !slices.Contains(cfg.MCP.Packs, toolpacks.Code) {
		return nil, nil
	}
	log := p.log.With("component", "code")
	reg, sources, err := codeSources(ctx, cfg.MCP.Code, p.demoAPI, p.httpLn.Addr(), log)
	if err != nil {
		return nil, fmt.Errorf("code mode tool sources: %w", err)
	}
	p.onClose(sources.close)
	if err := sources.register(p.nodeReg); err != nil {
		return nil, err
	}
	cc := cfg.MCP.Code
	popts := cc.Pool
	popts.Registerer = p.nodeReg
	pool, err := sandbox.NewPool(popts)
	if err != nil {
		return nil, fmt.Errorf("sandbox worker pool: %w", err)
	}
	p.onClose(pool.Close)
	lim := cc.Limits
	lim.Pool = pool
	forward, err := session.ResumeForwarder(c, p.nodeReg)
	if err != nil {
		return nil, err
	}
	expose := make([]mcpruntime.ExposedSource, 0, len(sources.exposed))
	for _, u := range sources.exposed {
		expose = append(expose, u)
	}
	return &mcpruntime.CodeMode{
		Tools: reg, Expose: expose, Policy: cc.Policy, Limits: lim, Window: cc.Window, PublicURL: cc.PublicURL, Clock: cc.Clock, APIBudget: cc.APIBudget,
		Lookup: directory.New(p.st).GetExecution, Directory: directory.New(p.st), Logger: log, Durable: true,
		Approvers: cfg.MCP.Approvers, Forward: forward,
	}, nil
}

// startNode builds the grains (grains, as the node's grain.Host), joins
// the cluster and starts hosting them.
func (p *process) startNode(ctx context.Context) error {
	cfg := p.cfg
	node, err := cluster.Start(ctx, cluster.Config{
		NodeID: p.nodeID, BindAddr: cfg.Bind, AdvertiseAddr: cfg.Advertise, Hosts: []grain.Host{p.grains},
		Membership: p.provider, Store: p.st, Logger: p.log, Registerer: p.reg,
		Meta:        map[string]string{"http": p.httpLn.Addr().String()},
		JoinTimeout: cfg.JoinTimeout, Reminders: cluster.ReminderOptions{PollInterval: cfg.ReminderPoll},
		TLS: p.clusterTLS,
	})
	if err != nil {
		return err
	}
	p.node = node
	p.onClose(func() {
		if !p.stopped { // a later step failed: leave the cluster
			_ = node.Stop(context.Background())
		}
	})
	p.nodeReg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgrain_build_info",
			Help:        "Build information; always 1.",
			ConstLabels: prometheus.Labels{"version": Version()},
		}, func() float64 { return 1 }),
	)
	return nil
}

// surfaces are what every public surface shares: who the caller is, how
// often they may call, and the approvals they may see and decide.
type surfaces struct {
	authn     *auth.Authenticator
	limiter   *auth.Limiter
	approvals *approvals.Service
}

// surfaces builds what the HTTP and gRPC surfaces share.
func (p *process) surfaces(context.Context) error {
	cfg := p.cfg.MCP

	var failures *auth.FailureLimiter
	if cfg.AuthFailureRate >= 0 {
		failures = auth.NewFailureLimiter(auth.FailureLimiterOptions{Rate: cfg.AuthFailureRate, Burst: cfg.AuthFailureBurst})
	}
	p.surf = surfaces{
		authn:     auth.NewAuthenticator(cfg.Keys, auth.AuthOptions{NoAuth: cfg.NoAuth, Realm: "mcpgrain", Failures: failures, OAuth: p.oauth}),
		limiter:   auth.NewLimiter(auth.LimiterOptions{Rate: cfg.RateLimit, Burst: cfg.RateBurst}),
		approvals: approvals.NewService(p.node, directory.New(p.st), approvals.ServiceOptions{Approvers: cfg.Approvers}),
	}
	return nil
}

// serveHTTP serves the gateway: /mcp, the approvals routes and page, the
// demo API, health, metrics and debug routes.
func (p *process) serveHTTP(context.Context) error {
	cfg := p.cfg
	s := p.surf
	pageKey := cfg.MCP.StateKey
	if len(pageKey) < 32 {
		pageKey = []byte(rand.Text() + rand.Text()) // single node without --state-key: forms die with the process
	}
	handler, err := gateway.NewHandler(gateway.Options{
		Node: p.node, Gatherer: p.reg, Registerer: p.nodeReg, Logger: p.log,
		EnableProbe: cfg.EnableProbe, EnablePprof: cfg.EnablePprof, Auth: s.authn, TrustedOrigins: cfg.MCP.TrustedOrigins,
		ProbeLimiter: auth.NewLimiter(auth.LimiterOptions{Rate: cfg.ProbeRateLimit, Burst: int(math.Ceil(2 * cfg.ProbeRateLimit))}),
		MCP: &gateway.MCPOptions{
			Auth: s.authn, Limiter: s.limiter, StateKey: cfg.MCP.StateKey,
			BodyTimeout: cfg.MCP.BodyTimeout, LocalSessionIDs: cfg.MCP.LocalSessionIDs,
			StreamKeepalive: cfg.MCP.StreamKeepalive,
			MaxInFlight:     cfg.MCP.MaxInFlight, QueueWait: cfg.MCP.QueueWait, SchedLagTarget: cfg.MCP.SchedLagTarget,
		},
		Mount: func(mux *http.ServeMux) error {
			if p.demoAPI != nil {
				mux.Handle("/demo/", demoRoute(p.demoAPI, s))
			}
			in := inspect.Inspector{Node: p.node, Store: p.st}
			if p.handles != nil {
				in.HandleList = p.handles
			}
			inspect.Register(mux, in, inspect.HTTPOptions{Auth: s.authn, Limiter: s.limiter, Logger: p.log.With("component", "inspect")})
			return approvals.Register(mux, s.approvals, approvals.HTTPOptions{Auth: s.authn, Limiter: s.limiter, PageKey: pageKey, Logger: p.log.With("component", "approvals"), Stopping: p.node.Draining})
		},
	})
	if err != nil {
		return err
	}
	p.httpSrv = &http.Server{
		Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	p.serving.Go(func() {
		if err := p.httpSrv.Serve(p.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.errc <- fmt.Errorf("http server: %w", err)
		}
	})
	return nil
}

// demoRoute serves the demo to-do API at /demo/ to authenticated callers
// (within their rate), each on its organization's list: the principal
// goes to the API as the tools.Caller on the request's context, as code
// mode's calls carry their execution's owner.
func demoRoute(api *demo.API, s surfaces) http.Handler {
	h := http.StripPrefix("/demo", api.Handler())
	return gateway.Authenticated(s.authn, s.limiter, func(w http.ResponseWriter, r *http.Request, who *pb.Principal) {
		c := tools.Caller{User: who.GetUser(), Org: who.GetOrg(), Role: who.GetRole()}
		h.ServeHTTP(w, r.WithContext(tools.WithCaller(r.Context(), c)))
	})
}

// serveGRPC serves gRPC health and the ApprovalService, when configured.
func (p *process) serveGRPC(context.Context) error {
	if p.grpcLn == nil {
		return nil
	}
	s := p.surf
	p.grpcSrv = grpc.NewServer(p.grpcOpts...)
	p.healthSrv = health.NewServer()
	healthpb.RegisterHealthServer(p.grpcSrv, p.healthSrv)
	approvalGRPC, err := approvals.NewGRPCServer(s.approvals, approvals.GRPCOptions{Auth: s.authn, Limiter: s.limiter, Logger: p.log.With("component", "approvals")})
	if err != nil {
		return err
	}
	approvalGRPC.Register(p.grpcSrv)
	p.serving.Go(func() {
		if err := p.grpcSrv.Serve(p.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			p.errc <- fmt.Errorf("grpc server: %w", err)
		}
	})
	return nil
}

// info describes the started process.
func (p *process) info() Info {
	info := Info{
		NodeID:      p.node.ID(),
		ClusterAddr: p.node.Address(),
		HTTPAddr:    p.httpLn.Addr().String(),
		Store:       store.Redact(p.cfg.Store),
		Members:     len(p.node.View().Members),
	}
	if p.grpcLn != nil {
		info.GRPCAddr = p.grpcLn.Addr().String()
	}
	return info
}

// wait runs until ctx ends or a server fails, then shuts down: gRPC
// health goes NOT_SERVING, the node drains its grains and leaves, the HTTP
// server finishes its requests, gRPC stops.
func (p *process) wait(ctx context.Context) error {
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-p.errc:
		p.log.Error("server failed; shutting down", "err", runErr)
	}
	p.log.Info("shutting down", "timeout", p.cfg.ShutdownTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	if p.healthSrv != nil {
		p.healthSrv.Shutdown()
	}
	p.stopped = true
	if err := p.node.Stop(stopCtx); err != nil {
		p.log.Warn("node stop", "err", err)
	}
	if err := p.httpSrv.Shutdown(stopCtx); err != nil {
		p.log.Warn("http shutdown", "err", err)
	}
	if p.grpcSrv != nil {
		p.grpcSrv.Stop()
	}
	// Nothing of this process runs on after Run: another node started in
	// the same process (tests) must not meet this one's servers (gRPC's
	// logger is a process global that protoactor's remote sets at start).
	p.serving.Wait()
	return runErr
}
