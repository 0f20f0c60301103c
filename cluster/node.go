package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/placement"
	"github.com/mcpgrain/mcpgrain/cluster/reminders"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Config configures a node. Zero values are safe defaults where documented.
type Config struct {
	// NodeID names the node in membership, logs, metrics and the store's
	// owner column. Default: derived from the advertised address.
	NodeID string
	// BindAddr is the host:port the actor remote (gRPC) listens on. Port 0
	// picks a free port. Default "127.0.0.1:0".
	BindAddr string
	// AdvertiseAddr is the host:port other members dial. Default: the bound
	// address; required when BindAddr's host is unspecified (0.0.0.0).
	AdvertiseAddr string
	// Kinds are the grain kinds this node hosts.
	Kinds []grain.Kind
	// Hosts build more kinds for this node to host, kinds whose shared
	// code reaches the cluster outside a grain's turn: Start calls each
	// once, before any grain is hosted, with the node as their
	// grain.Cluster, and fails if one does.
	Hosts []grain.Host
	// Membership discovers the other members. Default: membership.NewSingle().
	Membership membership.Provider
	// Store holds grain ownership and state (required).
	Store store.Store
	// Logger is the node's logger. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the node's metrics; every metric gets a node
	// label. Default: a private registry.
	Registerer prometheus.Registerer
	// Meta is announced with the member (e.g. "http": the HTTP address).
	Meta map[string]string
	// RequestTimeout bounds a Request whose context has no deadline.
	// Default 10s.
	RequestTimeout time.Duration
	// AttemptTimeout bounds one delivery attempt of a Request. A request
	// that times out is retried only if it is idempotent. Default 3s.
	AttemptTimeout time.Duration
	// Reminders tunes the durable reminder service; zero values are defaults.
	Reminders ReminderOptions
	// TLS, when set, protects cluster traffic (the actor remote's gRPC)
	// with mutual TLS: Server is the listener's config (set ClientCAs and
	// ClientAuth to require member certificates), Client the config used to
	// dial other members (RootCAs, Certificates). Every member of a cluster
	// must use TLS or none may. Default: plaintext (a private network).
	TLS *RemoteTLS
	// JoinTimeout bounds how long Start waits for a membership view that
	// contains this node (zero: [DefaultJoinTimeout]).
	JoinTimeout time.Duration
}

// DefaultJoinTimeout is how long [Start] waits to see this node in its
// membership view when [Config].JoinTimeout is zero; a node's
// --join-timeout defaults to it.
const DefaultJoinTimeout = 30 * time.Second

// ReminderOptions tune a node's reminder service (see package reminders).
type ReminderOptions struct {
	// PollInterval is how often the store is scanned (zero:
	// reminders.DefaultPollInterval).
	PollInterval time.Duration
	// Lookahead arms reminders due this far ahead. Default 2×PollInterval.
	Lookahead time.Duration
	// Concurrency bounds deliveries in flight. Default 64.
	Concurrency int
	// Clock is the time source. Default the system clock.
	Clock clock.Clock
}

// Node is one mcpgrain cluster member: a protoactor actor system with gRPC
// remoting, a placement actor that owns this node's grain activations, and
// the client side of grain requests.
type Node struct {
	cfg       Config
	id        string
	self      membership.Member
	system    *actor.ActorSystem
	remote    *remote.Remote
	placement *actor.PID
	reminders *reminders.Service
	logger    *slog.Logger
	metrics   *nodeMetrics

	table  atomic.Pointer[placement.Table]
	viewCh atomic.Pointer[chan struct{}] // closed and replaced on every view change
	// down holds addresses whose remote connection just broke (a peer that
	// probably died), with when it broke. Requests are not sent there until
	// the view moves the grain away, the peer reconnects, or downFor passes.
	down     sync.Map
	joined   chan struct{}
	joinOnce sync.Once
	stopOnce sync.Once
	draining atomic.Bool // Stop began: the node is leaving
	stopErr  error
}

// Start starts a node and returns once it is a member of the cluster (its
// membership view contains itself) or ctx ends.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	system, rem, err := startSystem(cfg)
	if err != nil {
		return nil, err
	}
	address := system.Address()
	if cfg.NodeID == "" {
		cfg.NodeID = "node-" + strings.NewReplacer(":", "-", ".", "-", "[", "", "]", "").Replace(address)
	}
	n := &Node{
		cfg:    cfg,
		id:     cfg.NodeID,
		system: system,
		remote: rem,
		logger: cfg.Logger.With("node", cfg.NodeID),
		joined: make(chan struct{}),
	}
	n.table.Store(placement.NewTable(membership.View{}))
	ch := make(chan struct{})
	n.viewCh.Store(&ch)
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node": cfg.NodeID}, cfg.Registerer)
	n.metrics = newNodeMetrics(reg)
	kinds, kindNames, err := n.buildKinds(ctx)
	if err != nil {
		n.shutdownActors()
		return nil, err
	}
	n.self = membership.Member{ID: cfg.NodeID, Address: address, Kinds: kindNames, Meta: cfg.Meta}
	n.watchEndpoints()
	placement.AnswerDeadLetters(n.system) // local requests wait on a Reply, not a future
	if err := n.spawnGrainHost(kinds, reg); err != nil {
		n.shutdownActors()
		return nil, err
	}
	if err := n.join(ctx); err != nil {
		return nil, err
	}
	n.reminders.Start()
	n.logger.Info("node joined cluster", "address", address, "kinds", kindNames, "members", len(n.View().Members))
	return n, nil
}

// withDefaults checks cfg and fills in its defaults.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Store == nil {
		return cfg, errors.New("cluster: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Membership == nil {
		cfg.Membership = membership.NewSingle()
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1:0"
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 3 * time.Second
	}
	if cfg.JoinTimeout == 0 {
		cfg.JoinTimeout = DefaultJoinTimeout
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	return cfg, nil
}

// buildKinds returns the kinds the node hosts, by name: Config.Kinds and
// those Config.Hosts build, handed the node as their grain.Cluster.
func (n *Node) buildKinds(ctx context.Context) (map[string]grain.Kind, []string, error) {
	list := n.cfg.Kinds
	for _, host := range n.cfg.Hosts {
		kinds, err := host(ctx, n)
		if err != nil {
			return nil, nil, err
		}
		list = append(slices.Clip(list), kinds...)
	}
	return kindsByName(list)
}

// kindsByName indexes the grain kinds a node hosts, refusing unnamed and
// duplicate ones.
func kindsByName(list []grain.Kind) (map[string]grain.Kind, []string, error) {
	kinds := map[string]grain.Kind{}
	var names []string
	for _, k := range list {
		if k.Name == "" || k.New == nil {
			return nil, nil, fmt.Errorf("cluster: grain kind %q needs a name and a constructor", k.Name)
		}
		if _, dup := kinds[k.Name]; dup {
			return nil, nil, fmt.Errorf("cluster: grain kind %q registered twice", k.Name)
		}
		kinds[k.Name] = k
		names = append(names, k.Name)
	}
	return kinds, names, nil
}

// startSystem starts the actor system and its remote (cluster traffic,
// with mutual TLS if configured) on cfg.BindAddr.
func startSystem(cfg Config) (*actor.ActorSystem, *remote.Remote, error) {
	host, port, err := splitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: bad bind address %q: %w", cfg.BindAddr, err)
	}
	if cfg.AdvertiseAddr == "" && (host == "" || net.ParseIP(host).IsUnspecified()) {
		return nil, nil, fmt.Errorf("cluster: bind address %q listens on all interfaces: set the advertised address (--advertise host:port) other nodes can dial", cfg.BindAddr)
	}
	// protoactor's remote panics when it cannot listen; check first to
	// report a clear error instead.
	if port != 0 {
		l, err := net.Listen("tcp", cfg.BindAddr)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: cannot listen on %s for cluster traffic (is another node using it? set --bind): %w", cfg.BindAddr, err)
		}
		_ = l.Close()
	}
	if cfg.TLS != nil && (cfg.TLS.Server == nil || cfg.TLS.Client == nil) {
		return nil, nil, errors.New("cluster: TLS needs both a server and a client config")
	}
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoactorLogger(cfg.Logger) }),
		actor.WithDeadLetterThrottleCount(3),
		actor.WithDeadLetterThrottleInterval(10*time.Second),
	)
	rem := remote.NewRemote(system, remote.Configure(host, port, remoteOptions(cfg)...))
	if err := startRemote(rem); err != nil {
		system.Shutdown()
		return nil, nil, fmt.Errorf("cluster: start remote on %s: %w", cfg.BindAddr, err)
	}
	return system, rem, nil
}

// remoteOptions configure the remote: the advertised address, bounded
// headers, TLS.
func remoteOptions(cfg Config) []remote.ConfigOption {
	var ropts []remote.ConfigOption
	if cfg.AdvertiseAddr != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cfg.AdvertiseAddr))
	}
	// Peers send a few small headers per stream; gRPC's default would let
	// anyone who reaches the cluster port make the node buffer 16 MiB of
	// metadata per call before any check.
	serverOpts := []grpc.ServerOption{grpc.MaxHeaderListSize(RemoteMaxHeaderListSize)}
	if cfg.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(cfg.TLS.Server)))
		ropts = append(ropts, remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS.Client))))
	}
	return append(ropts, remote.WithServerOptions(serverOpts...))
}

// watchEndpoints tracks which peers' connections are down (a request to
// one waits for the view instead of sending into nothing).
func (n *Node) watchEndpoints() {
	n.system.EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *remote.EndpointTerminatedEvent:
			n.down.Store(e.Address, time.Now())
		case *remote.EndpointConnectedEvent:
			n.down.Delete(e.Address)
		}
	})
}

// spawnGrainHost starts the reminder service and the placement actor, the
// only way into this node's grains.
func (n *Node) spawnGrainHost(kinds map[string]grain.Kind, reg prometheus.Registerer) error {
	cfg := n.cfg
	var err error
	n.reminders, err = reminders.New(reminders.Config{
		Store:        cfg.Store,
		Owns:         func(kind, identity string) bool { o, ok := n.Owner(kind, identity); return ok && o.ID == n.id },
		Deliver:      n.deliverReminder,
		PollInterval: cfg.Reminders.PollInterval,
		Lookahead:    cfg.Reminders.Lookahead,
		Concurrency:  cfg.Reminders.Concurrency,
		Clock:        cfg.Reminders.Clock,
		Logger:       n.logger,
		Registerer:   reg,
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	n.placement, err = n.system.Root.SpawnNamed(placement.Props(placement.Config{
		Self:      n.self,
		Kinds:     kinds,
		Store:     cfg.Store,
		Reminders: n.reminders,
		Cluster:   n,
		Logger:    n.logger,
		Metrics:   placement.NewMetrics(reg),
	}), placement.ActorName)
	if err != nil {
		return fmt.Errorf("cluster: spawn placement actor: %w", err)
	}
	return nil
}

// join registers the node in the membership and waits until it sees
// itself in the view, within JoinTimeout.
func (n *Node) join(ctx context.Context) error {
	joinCtx, cancel := context.WithTimeout(ctx, n.cfg.JoinTimeout)
	defer cancel()
	if err := n.cfg.Membership.Start(joinCtx, n.self, n.onMembership); err != nil {
		n.shutdownActors()
		return fmt.Errorf("cluster: join membership: %w", err)
	}
	select {
	case <-n.joined:
		return nil
	case <-joinCtx.Done():
		_ = n.cfg.Membership.Stop(context.Background())
		n.shutdownActors()
		return fmt.Errorf("cluster: node %s did not appear in its own membership view within %s: %w", n.id, n.cfg.JoinTimeout, joinCtx.Err())
	}
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port %q", p)
	}
	return host, port, nil
}

func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return nil
}

// onMembership receives membership events; it must not block.
func (n *Node) onMembership(e membership.Event) {
	if e.Suspect {
		n.logger.Warn("membership lease lapsed: dropping every local activation (other members may own them now)")
		n.metrics.suspects.Inc()
		n.system.Root.Send(n.placement, &placement.Suspect{})
		return
	}
	n.table.Store(placement.NewTable(e.View))
	next := make(chan struct{})
	close(*n.viewCh.Swap(&next))
	n.metrics.members.Set(float64(len(e.View.Members)))
	n.metrics.viewChanges.Inc()
	n.system.Root.Send(n.placement, &placement.ViewChanged{View: e.View})
	n.reminders.Rebalance()
	if e.View.Contains(n.id) {
		n.joinOnce.Do(func() { close(n.joined) })
	}
	n.logger.Info("membership view changed", "members", memberIDs(e.View))
}

func memberIDs(v membership.View) []string {
	ids := make([]string, len(v.Members))
	for i, m := range v.Members {
		ids[i] = m.ID
	}
	return ids
}

// viewChanged returns a channel closed at the next membership view change.
func (n *Node) viewChanged() <-chan struct{} { return *n.viewCh.Load() }

// ID returns the node id.
func (n *Node) ID() string { return n.id }

// Address returns the advertised actor-remote address.
func (n *Node) Address() string { return n.self.Address }

// Self returns this node as announced to membership.
func (n *Node) Self() membership.Member { return n.self }

// View returns the node's current membership view.
func (n *Node) View() membership.View { return n.table.Load().View() }

// Owner returns the member that owns (kind, identity) under this node's view.
func (n *Node) Owner(kind, identity string) (membership.Member, bool) {
	return n.table.Load().Owner(kind, identity)
}

// Member reports whether this node is in its own current view.
func (n *Node) Member() bool { return n.View().Contains(n.id) }

// ActorSystem returns the node's actor system.
func (n *Node) ActorSystem() *actor.ActorSystem { return n.system }

// Store returns the node's store.
func (n *Node) Store() store.Store { return n.cfg.Store }

// Activations returns the grain keys active and stopping on this node.
func (n *Node) Activations(ctx context.Context) (placement.StatsReply, error) {
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	res, err := n.system.Root.RequestFuture(n.placement, &placement.Stats{}, timeout).Result()
	if err != nil {
		return placement.StatsReply{}, fmt.Errorf("cluster: read activations: %w", err)
	}
	return *res.(*placement.StatsReply), nil
}

// Draining reports whether the node is stopping: it has left (or is
// leaving) the membership and drains its grains. Its gateway still answers
// requests meanwhile, but a load balancer should send it no new ones.
func (n *Node) Draining() bool { return n.draining.Load() }

// Stop leaves the cluster gracefully: it deregisters from membership (so
// other members stop routing here), deactivates every local grain (each
// releases ownership; requests arriving meanwhile are forwarded to the new
// owners), then stops remoting and the actor system. It is bounded by ctx
// and safe to call more than once.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.draining.Store(true)
		var errs []error
		if err := n.cfg.Membership.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("leave membership: %w", err))
		}
		if err := n.reminders.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		timeout := 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		if timeout > 0 {
			if _, err := n.system.Root.RequestFuture(n.placement, &placement.Drain{}, timeout).Result(); err != nil {
				errs = append(errs, fmt.Errorf("drain activations: %w", err))
			}
		}
		n.shutdownActors()
		n.stopErr = errors.Join(errs...)
		n.logger.Info("node stopped")
	})
	return n.stopErr
}

// deliverReminder sends a fired reminder to its grain through the normal
// request path (activating it if needed) and waits for the acknowledgement.
func (n *Node) deliverReminder(ctx context.Context, kind, identity string, fired *pb.ReminderFired) error {
	_, err := n.Request(ctx, kind, identity, fired, Idempotent())
	return err
}

// Reminders returns the node's reminder service.
func (n *Node) Reminders() *reminders.Service { return n.reminders }

func (n *Node) shutdownActors() {
	// Not graceful: gRPC's GracefulStop waits for peers' streams, which
	// stay open as long as the peers live.
	n.remote.Shutdown(false)
	n.system.Shutdown()
}

// RemoteMaxHeaderListSize bounds the metadata of one call on the cluster
// listener (actor remote).
const RemoteMaxHeaderListSize = 64 << 10

// RemoteTLS is the mutual TLS of cluster traffic (Config.TLS).
type RemoteTLS struct {
	// Server is used by this member's listener.
	Server *tls.Config
	// Client is used to dial other members.
	Client *tls.Config
}

// MutualTLS returns the RemoteTLS of a member holding cert (its
// certificate and key) that trusts members whose certificates chain to
// roots: both directions verify the peer, TLS 1.3 only. The certificate
// must name every address members dial it by (IP or DNS SANs).
func MutualTLS(cert tls.Certificate, roots *x509.CertPool) *RemoteTLS {
	return &RemoteTLS{
		Server: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    roots,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS13,
		},
		Client: &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      roots,
			MinVersion:   tls.VersionTLS13,
		},
	}
}
