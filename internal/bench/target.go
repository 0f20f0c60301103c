package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/actors/tools/openapi"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// protocolVersion is the MCP version the bench client negotiates (the
// newest session-ful version, as the gateway benchmarks use).
const protocolVersion = "2025-11-25"

// target is an MCP endpoint under load.
type target struct {
	// endpoint is the MCP URL; base is its origin (for /metrics and the
	// approval routes).
	endpoint, base string
	hc             *http.Client
	client         *mcp.Client
	// store is the DSN of the in-process node's store (empty elsewhere).
	store string
	// stop releases what the target started (nil: nothing).
	stop func()
}

// newTarget returns a target for endpoint, sending token (if any) as a
// bearer token. The HTTP client keeps enough idle connections for
// conns concurrent requests.
func newTarget(endpoint, token string, conns int) (*target, error) {
	base, err := origin(endpoint)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns + 16
	tr.MaxIdleConnsPerHost = conns + 16
	var rt http.RoundTripper = tr
	if token != "" {
		rt = mcpclient.Bearer(token, tr)
	}
	return &target{
		endpoint: endpoint, base: base,
		hc:     &http.Client{Transport: rt},
		client: mcp.NewClient(&mcp.Implementation{Name: "mcpgrain-bench", Version: app.Version()}, nil),
	}, nil
}

// origin returns the scheme and host of an MCP endpoint URL (where its
// node serves /metrics).
func origin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("endpoint %q: want an http(s) URL like http://127.0.0.1:8080/mcp", endpoint)
	}
	return u.Scheme + "://" + u.Host, nil
}

func (t *target) close() {
	if t.stop != nil {
		t.stop()
	}
	t.hc.CloseIdleConnections()
}

// connect opens (initializes) one MCP session. The standalone GET stream
// is off: the bench measures request/response traffic, and a held GET per
// session would only add idle connections.
func (t *target) connect(ctx context.Context) (*mcp.ClientSession, error) {
	cs, err := t.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: t.endpoint, HTTPClient: t.hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return cs, nil
}

// NodeOptions configure the in-process node [Run] starts when no URL is
// given.
type NodeOptions struct {
	// SoftCap, when positive, fixes the resident runtime soft cap (as
	// --resident-soft-cap does). Zero derives it from ResidentMemory, as a
	// node with default flags does.
	SoftCap int
	// ResidentMemory is the memory budget the soft cap is derived from
	// when SoftCap is zero (zero: [app.DefaultResidentMemory], as
	// --resident-memory auto).
	ResidentMemory uint64
	// Logger receives the node's log (nil: discarded).
	Logger *slog.Logger
	// Store is the node's store DSN (empty: SQLite in the node's
	// temporary data directory).
	Store string
}

// startNode runs a single mcpgrain node in this process the way `mcpgrain
// dev` does (embedded SQLite store in a temporary directory unless
// o.Store names one, code mode with the demo API, a generated token), on a
// free loopback port, without rate limiting.
func startNode(ctx context.Context, o NodeOptions, conns int) (*target, error) {
	token, err := auth.GenerateToken()
	if err != nil {
		return nil, err
	}
	keys, err := auth.NewKeys(auth.Entry{Token: token, User: "bench", Org: "local", Role: auth.RoleAdmin})
	if err != nil {
		return nil, fmt.Errorf("bench token: %w", err)
	}
	var dir string // the store's temporary directory ("": o.Store names one)
	if o.Store == "" {
		if dir, err = os.MkdirTemp("", "mcpgrain-bench-"); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	var budget uint64
	if o.SoftCap <= 0 {
		budget = o.ResidentMemory
		if budget == 0 {
			budget = app.DefaultResidentMemory()
		}
	}
	storeDSN := o.Store
	if storeDSN == "" {
		storeDSN = "sqlite:" + filepath.Join(dir, "mcpgrain.db")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := app.Config{
		NodeID: "bench", Bind: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		Store:           storeDSN,
		ShutdownTimeout: 10 * time.Second,
		Logger:          logger,
		MCP: app.MCPConfig{
			Packs: []string{toolpacks.Code, toolpacks.Demo}, Keys: keys, RateLimit: 0, RateBurst: 1,
			SoftCap: o.SoftCap, ResidentMemory: budget, StateKey: []byte(rand.Text() + rand.Text()),
			// One bench principal runs every worker's executions: the
			// per-user and per-organization running caps (fairness bounds
			// between tenants) must not refuse them; one organization may
			// use the whole node, as on a node that serves one.
			Code: app.CodeConfig{DemoAPI: true, Pool: sandbox.PoolOptions{MaxRunningPerTenant: max(sandbox.DefaultMaxRunningPerTenant, conns), MaxRunningPerOrg: -1}},
		},
	}
	nctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan app.Info, 1)
	done := make(chan error, 1)
	go func() { done <- app.Run(nctx, cfg, func(i app.Info) { ready <- i }) }()
	stop := func() {
		cancel()
		<-done
		_ = os.RemoveAll(dir)
	}
	select {
	case info := <-ready:
		t, err := newTarget("http://"+info.HTTPAddr+"/mcp", token, conns)
		if err != nil {
			stop()
			return nil, err
		}
		t.stop, t.store = stop, storeDSN
		return t, nil
	case err := <-done:
		cancel()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("in-process node: %w", err)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// startBaseline runs the plain go-sdk server (baselineHandler) on a
// loopback listener in this process.
func startBaseline(ctx context.Context, code bool, conns int) (*target, error) {
	url, _, stop, err := runBaseline(ctx, "127.0.0.1:0", code, false)
	if err != nil {
		return nil, err
	}
	t, err := newTarget(url, "", conns)
	if err != nil {
		_ = stop()
		return nil, err
	}
	t.stop = func() { _ = stop() }
	return t, nil
}

// ServeBaseline serves the plain go-sdk server the benchmarks compare with
// (the demo pack and code mode, see baselineHandler) at /mcp on addr until
// ctx ends, so it can run in a process of its own — pinned to its own
// cores, say, like the nodes it is compared with — and be profiled there
// (Go's profiler at /debug/pprof/, like a node's --enable-pprof; it is a
// benchmark's server, with no credentials). ready gets its MCP URL.
func ServeBaseline(ctx context.Context, addr string, ready func(url string)) error {
	url, served, stop, err := runBaseline(ctx, addr, true, true)
	if err != nil {
		return err
	}
	ready(url)
	select {
	case err := <-served:
		_ = stop()
		return fmt.Errorf("baseline server: %w", err)
	case <-ctx.Done():
		return stop()
	}
}

// runBaseline serves baselineHandler on addr (with Go's profiler when
// profiled) and returns its MCP URL, the error its server stopped with
// (once, unless stop stopped it), and the function that stops it.
func runBaseline(ctx context.Context, addr string, code, profiled bool) (url string, served <-chan error, stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, nil, fmt.Errorf("baseline listener: %w", err)
	}
	base := "http://" + ln.Addr().String()
	h, stopHandler, err := baselineHandler(ctx, code, base)
	if err != nil {
		ln.Close()
		return "", nil, nil, err
	}
	if profiled {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		h = mux
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	stop = func() error {
		// The sessions first: a client's open GET stream keeps its
		// connection busy, and Shutdown waits for it.
		stopHandler()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := hs.Shutdown(sctx)
		if err != nil {
			// Still busy after the grace — net/http counts a connection
			// that has not sent its first request as busy for 5 s (a
			// client's spare connection): closed, which is no failure.
			err = hs.Close()
		}
		<-done
		return err
	}
	return base + "/mcp", errc, stop, nil
}

// baselineHandler is the plain go-sdk server: one mcp.Server with the demo
// pack behind mcp.NewStreamableHTTPHandler at /mcp. With code it also has
// code mode's execute and resume (the same engine, over the same demo API
// as tool source "demo", served at base+"/demo" and called in process as
// mcpgrain's node calls it) and a minimal POST
// /api/executions/{eid}/resume that decides a pause in the engine
// directly — what a single-process server would do without sessions as
// grains, a store or approval surfaces. stop ends its sessions (their
// open streams too) and its background work.
func baselineHandler(ctx context.Context, code bool, base string) (h http.Handler, stop func(), err error) {
	mux := http.NewServeMux()
	opts := toolpacks.Options{}
	var eng *engine.Engine
	if code {
		api := demo.NewAPI()
		mux.Handle("/demo/", http.StripPrefix("/demo", api.Handler()))
		// Called in process, as mcpgrain's node calls its demo API.
		client, err := api.Client(base + "/demo")
		if err != nil {
			return nil, nil, fmt.Errorf("baseline demo client: %w", err)
		}
		src, err := openapi.Load(ctx, openapi.Options{Name: "demo", Spec: "demo", Document: api.Spec(base + "/demo"), Client: client})
		if err != nil {
			return nil, nil, fmt.Errorf("baseline demo source: %w", err)
		}
		reg, err := tools.NewRegistry(src)
		if err != nil {
			return nil, nil, fmt.Errorf("baseline tool registry: %w", err)
		}
		eng = engine.New(engine.Config{Tools: reg, Logger: slog.New(slog.DiscardHandler)})
		rt := plainRuntime{eng}
		opts.CodeMode = func(s *mcp.Server) {
			codemode.Register(s, codemode.Options{Runtime: rt, Sources: []string{"demo"}, Logger: slog.New(slog.DiscardHandler)})
		}
		mux.HandleFunc("POST /api/executions/{eid}/resume", resumeHandler(eng))
	}
	packs := []string{toolpacks.Demo}
	if code {
		packs = append(packs, toolpacks.Code)
	}
	srv, stopPacks, err := toolpacks.NewServer(&mcp.Implementation{Name: "plain-go-sdk"}, packs, opts)
	if err != nil {
		if eng != nil {
			eng.Shutdown()
		}
		return nil, nil, fmt.Errorf("baseline server: %w", err)
	}
	mux.Handle("/mcp", anonymousAdmin(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	return mux, func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		stopPacks()
		if eng != nil {
			eng.Shutdown()
		}
	}, nil
}

// anonymousAdmin gives the baseline's callers the role of mcpgrain's
// anonymous principal (--no-auth): the baseline authenticates nobody, and
// code mode lets no caller without a role decide in-band. User and
// organization stay empty, so its executions count against no per-user or
// per-organization cap (as before).
func anonymousAdmin(h http.Handler) http.Handler {
	identity := exchange.Caller{Role: auth.AnonymousRole}.Encode()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(exchange.HeaderIdentity, identity)
		h.ServeHTTP(w, r)
	})
}

// resumeHandler decides a paused execution of eng (the baseline's stand-in
// for the approval surfaces).
func resumeHandler(eng *engine.Engine) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Action string `json:"action"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if _, found := eng.Resume(r.Context(), r.PathValue("eid"), engine.System, engine.Response{Action: body.Action}); !found {
			http.Error(w, "execution not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decided":true}`)
	}
}

// plainRuntime is codemode.Runtime for the baseline: one engine, no
// approval surfaces to wait on, no other sessions to forward to.
type plainRuntime struct{ e *engine.Engine }

func (p plainRuntime) Engine() *engine.Engine { return p.e }

func (plainRuntime) WaitDecision(context.Context, string, engine.Access) (engine.Response, bool) {
	return engine.Response{}, false
}

func (p plainRuntime) DecidedOutcome(ctx context.Context, id string, a engine.Access) (engine.Outcome, bool) {
	return p.e.Outcome(ctx, id, a)
}

func (plainRuntime) Forward(context.Context, string, engine.Principal, engine.Response) (*mcp.CallToolResult, codemode.Miss) {
	return nil, codemode.NotFound
}
