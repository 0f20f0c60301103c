package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/actors/tasks"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/gateway"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// defaultPacks are the tool packs of dev and node: code mode, and the
// demo tools.
const defaultPacks = toolpacks.Code + "," + toolpacks.Demo

// mcpFlags are the flags of the MCP endpoint and session lifecycle.
type mcpFlags struct {
	extra                           []toolpacks.Pack    // the program's own packs
	impl                            *mcp.Implementation // nil: mcpgrain
	tools, keysFile, token, origins string
	stateKey                        string
	approvers                       string
	placement                       string
	noAuth                          bool
	rate                            float64
	burst, softCap                  int
	residentMemory                  string
	eventMax                        int
	failRate                        float64
	failBurst                       int
	eventSession                    int64
	eventPrincipal, eventStored     int64
	keepalive                       time.Duration
	bodyTimeout                     time.Duration
	maxInFlight                     int           // --max-in-flight (0: unbounded)
	queueWait                       time.Duration // --queue-wait (0: shed at once)
	policy                          alarm.Policy
	ttl                             time.Duration
	taskTTL                         time.Duration
	handleTTL                       time.Duration
	maxHandles                      int
	maxPendingAsks                  int
	code                            codeFlags
	oauth                           oauthFlags
	// fs is the flag set the flags were registered on: which were given.
	fs *flag.FlagSet
}

// codeFlags are the flags of code mode (the "code" pack).
type codeFlags struct {
	demoAPI                       bool
	openapi, upstream             listFlag
	exposeUpstream                listFlag
	sourcesFile, policyFile       string
	publicURL                     string
	window, execTimeout           time.Duration
	maxToolCalls, maxOutput       int
	apiBytes                      int
	maxRunning, maxRunningPerUser int
	maxRunningPerOrg              int
	slotWait                      time.Duration
}

// listFlag is a repeatable flag; one value may also hold several,
// comma-separated (for the environment variable).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

func (c *codeFlags) register(fs *flag.FlagSet, demoDefault bool) {
	fs.BoolVar(&c.demoAPI, "demo-api", demoDefault, "serve the built-in to-do API at /demo/ and register it as code-mode tool source \"demo\"")
	fs.Var(&c.openapi, "openapi", "OpenAPI tool source NAME=SPEC[@BASE_URL] (SPEC: file or URL; repeatable); code calls tools.NAME.<operationId>")
	fs.Var(&c.upstream, "upstream", "upstream MCP server tool source NAME=URL (streamable HTTP; repeatable); code calls tools.NAME.<tool>")
	fs.Var(&c.exposeUpstream, "expose-upstream", "also list upstream source NAME's tools as MCP tools NAME.<tool> of the node, each call under the approval policy (repeatable; in --sources: \"expose\":true)")
	fs.StringVar(&c.sourcesFile, "sources", "", `tool sources JSON file {"openapi":[{"name","spec","baseUrl","headers":{…}}],"mcp":[{"name","url","headers":{…},"expose"}]}; header values may use ${ENV}`)
	fs.IntVar(&c.apiBytes, "execute-api-bytes", tools.DefaultDeclarationBudget, "most bytes of TypeScript declarations of the sources' operations in the execute tool's description (past it, reads first, the rest named; 0: none, only the source names)")
	fs.StringVar(&c.policyFile, "policy", "", `approval policy JSON file {"rules":[{"pattern":"demo.*","action":"approve|require_approval|block","org":…,"user":…}]}`)
	fs.StringVar(&c.publicURL, "public-url", "", "origin of approval links, e.g. https://mcp.example.com (default: the host the request came to)")
	fs.DurationVar(&c.window, "approval-window", engine.DefaultApprovalWindow, "how long a paused execution waits for a decision before it is declined")
	fs.DurationVar(&c.execTimeout, "exec-timeout", sandbox.DefaultWallTime, "longest an execution may run (time waiting for approval excluded)")
	fs.IntVar(&c.maxToolCalls, "exec-max-tool-calls", sandbox.DefaultMaxToolCalls, "most tools.* calls one execution may make")
	fs.IntVar(&c.maxOutput, "exec-max-output", sandbox.DefaultMaxOutput, "most bytes of logs and emitted values one execution may produce")
	fs.IntVar(&c.maxRunning, "exec-max-running", sandbox.DefaultMaxRunning(), "most executions running at once on this node (more wait up to --exec-slot-wait, then are refused as busy; paused ones do not count)")
	fs.IntVar(&c.maxRunningPerUser, "exec-max-running-per-user", sandbox.DefaultMaxRunningPerTenant, "most executions one user runs at once on this node (more are refused as busy at once)")
	fs.IntVar(&c.maxRunningPerOrg, "exec-max-running-per-org", 0, "most executions one organization runs at once on this node (0: all but a quarter of --exec-max-running, which stays for the other organizations; --exec-max-running or more: no such cap)")
	fs.DurationVar(&c.slotWait, "exec-slot-wait", sandbox.DefaultSlotWait, "how long an execution over --exec-max-running or --exec-max-running-per-org waits for a slot before it is refused as busy (0: refused at once); freed slots go to the organization running the fewest first")
}

// config translates the code-mode flags: execution limits, the approval
// link origin, the tool sources and the approval policy.
func (c *codeFlags) config() (app.CodeConfig, error) {
	cc := app.CodeConfig{DemoAPI: c.demoAPI, Window: c.window, PublicURL: strings.TrimRight(c.publicURL, "/"),
		Limits: sandbox.Limits{WallTime: c.execTimeout, MaxToolCalls: c.maxToolCalls, MaxOutput: c.maxOutput},
		Pool: sandbox.PoolOptions{MaxRunning: c.maxRunning, MaxRunningPerTenant: c.maxRunningPerUser,
			MaxRunningPerOrg: c.maxRunningPerOrg, SlotWait: c.slotWait}}
	if c.slotWait == 0 {
		cc.Pool.SlotWait = -1 // the flag's 0 is "do not wait"; the option's is the default
	}
	if cc.APIBudget = c.apiBytes; c.apiBytes == 0 {
		cc.APIBudget = -1 // the flag's 0 is "none"; the option's is the default
	}
	if err := c.checkLimits(); err != nil {
		return cc, err
	}
	if err := checkOrigin(cc.PublicURL, c.publicURL); err != nil {
		return cc, err
	}
	var err error
	if cc.OpenAPI, cc.Upstreams, err = c.sources(); err != nil {
		return cc, err
	}
	// What the command line says about the sources is checked here (exit
	// 2); loading them, when the node starts, checks the rest (exit 1).
	if err := app.CheckSources(cc); err != nil {
		return cc, fmt.Errorf("%w: %v", errUsage, err)
	}
	if c.policyFile != "" {
		if cc.Policy, err = policy.Load(c.policyFile); err != nil {
			return cc, fmt.Errorf("%w: --policy: %v", errUsage, err)
		}
	}
	return cc, nil
}

// checkLimits checks the execution limits and the pool's caps.
func (c *codeFlags) checkLimits() error {
	switch {
	case c.window < time.Second || c.execTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: --approval-window must be at least 1s and --exec-timeout at least 100ms", errUsage)
	case c.maxRunning < 1 || c.maxRunningPerUser < 1:
		return fmt.Errorf("%w: --exec-max-running and --exec-max-running-per-user must be at least 1", errUsage)
	case c.maxRunningPerOrg < 0 || c.slotWait < 0 || c.apiBytes < 0:
		return fmt.Errorf("%w: --exec-max-running-per-org, --exec-slot-wait and --execute-api-bytes must not be negative", errUsage)
	case c.maxToolCalls < 1 || c.maxOutput < 1024:
		return fmt.Errorf("%w: --exec-max-tool-calls must be at least 1 and --exec-max-output at least 1024", errUsage)
	}
	return nil
}

// checkOrigin checks --public-url (given as flag, trimmed as origin): an
// http(s) origin without a path, or empty.
func checkOrigin(origin, flag string) error {
	if origin == "" {
		return nil
	}
	if u, err := url.Parse(origin); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return fmt.Errorf("%w: --public-url %q: want an origin like https://mcp.example.com", errUsage, flag)
	}
	return nil
}

// sources are the tool sources of --sources, then of --openapi and
// --upstream, each marked with where it came from.
func (c *codeFlags) sources() ([]app.OpenAPISource, []app.UpstreamSource, error) {
	var specs []app.OpenAPISource
	var ups []app.UpstreamSource
	if c.sourcesFile != "" {
		f, err := app.LoadSourcesFile(c.sourcesFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --sources: %v", errUsage, err)
		}
		for i := range f.OpenAPI {
			f.OpenAPI[i].From = "--sources " + c.sourcesFile
		}
		for i := range f.MCP {
			f.MCP[i].From = "--sources " + c.sourcesFile
		}
		specs, ups = f.OpenAPI, f.MCP
	}
	for _, v := range c.openapi {
		src, err := parseOpenAPIFlag(v)
		if err != nil {
			return nil, nil, err
		}
		specs = append(specs, src)
	}
	for _, v := range c.upstream {
		name, u, ok := strings.Cut(v, "=")
		if !ok || name == "" || u == "" {
			return nil, nil, fmt.Errorf("%w: --upstream %q: want NAME=URL", errUsage, v)
		}
		ups = append(ups, app.UpstreamSource{Name: name, URL: u, From: "--upstream"})
	}
	if err := c.expose(ups); err != nil {
		return nil, nil, err
	}
	return specs, ups, nil
}

// expose marks the upstream sources --expose-upstream names; a name no
// upstream source has is a usage error.
func (c *codeFlags) expose(ups []app.UpstreamSource) error {
	for _, name := range c.exposeUpstream {
		i := slices.IndexFunc(ups, func(u app.UpstreamSource) bool { return u.Name == name })
		if i < 0 {
			return fmt.Errorf("%w: --expose-upstream %q: no upstream source has that name (see --upstream, --sources)", errUsage, name)
		}
		ups[i].Expose = true
	}
	return nil
}

// parseOpenAPIFlag parses one --openapi NAME=SPEC[@BASE_URL].
func parseOpenAPIFlag(v string) (app.OpenAPISource, error) {
	name, spec, ok := strings.Cut(v, "=")
	if !ok || name == "" || spec == "" {
		return app.OpenAPISource{}, fmt.Errorf("%w: --openapi %q: want NAME=SPEC[@BASE_URL]", errUsage, v)
	}
	src := app.OpenAPISource{Name: name, Spec: spec, From: "--openapi"}
	if i := strings.LastIndex(spec, "@http"); i > 0 {
		src.Spec, src.BaseURL = spec[:i], spec[i+1:]
	}
	return src, nil
}

func (m *mcpFlags) register(fs *flag.FlagSet, toolsDefault string, demoDefault bool) {
	d := alarm.DefaultPolicy()
	m.fs = fs
	m.code.register(fs, demoDefault)
	m.oauth.register(fs)
	fs.StringVar(&m.tools, "tools", toolsDefault, "comma-separated tool packs every MCP session gets (known: "+strings.Join(toolpacks.NamesWith(m.extra), ", ")+")")
	fs.StringVar(&m.keysFile, "keys-file", "", `bearer tokens: JSON file {"keys":[{"token":"…","user":"…","org":"…","role":"admin|member|viewer"}]} (chmod 600); MCPGRAIN_KEYS="token=user:org:role;…" adds more`)
	fs.StringVar(&m.approvers, "approvers", string(policy.ApproversMember), "who of an execution's organization may decide it: member (admins and members) or admin (admins only); viewers only ever see")
	fs.StringVar(&m.token, "token", "", "a bearer token for user dev in org local (admin); outside dev prefer --token-file or MCPGRAIN_TOKEN (a command line is readable by every local user)")
	fs.BoolVar(&m.noAuth, "no-auth", false, "accept requests without a token as user anonymous (only on a loopback --http)")
	fs.Float64Var(&m.rate, "rate-limit", 50, "MCP requests per second per principal (0: unlimited)")
	fs.IntVar(&m.burst, "rate-burst", 100, "burst size of the per-principal rate limit")
	fs.Float64Var(&m.failRate, "auth-failure-rate", auth.DefaultFailureRate, "failed sign-ins (unknown or malformed tokens, on every surface) per second a client address earns back; out of them, it gets 429 with Retry-After (0: not limited; behind a proxy every client shares its address)")
	fs.IntVar(&m.failBurst, "auth-failure-burst", auth.DefaultFailureBurst, "failed sign-ins a client address may make in a row")
	fs.DurationVar(&m.bodyTimeout, "body-timeout", gateway.DefaultBodyTimeout, "longest a client may take to send a request body (slow clients get 408)")
	fs.DurationVar(&m.keepalive, "stream-keepalive", exchange.DefaultStreamKeepalive, "longest an MCP SSE stream stays quiet before the gateway writes a keepalive comment on it, so proxies that cut idle streams keep long calls and listen streams open (0: none)")
	fs.IntVar(&m.maxInFlight, "max-in-flight", gateway.DefaultMaxInFlight(), "most /mcp requests this node serves at once (default: "+strconv.Itoa(gateway.DefaultInFlightPerCPU)+" per CPU); more wait up to --queue-wait, then get 503 with Retry-After. Requests that continue existing work (answers, resume, tasks/result and tasks/cancel, DELETE, GET streams) are never refused (0: unbounded)")
	fs.DurationVar(&m.queueWait, "queue-wait", gateway.DefaultQueueWait, "how long a request over --max-in-flight waits for a slot before it gets 503 with Retry-After (0: at once)")
	fs.StringVar(&m.origins, "trusted-origins", "", "comma-separated browser origins allowed to call the node's routes (/mcp, /api/…) cross-origin (e.g. https://app.example.com)")
	fs.DurationVar(&m.policy.SessionTimeout, "session-timeout", d.SessionTimeout, "idle time after which a session's runtime is passivated (record kept)")
	fs.DurationVar(&m.policy.PausedLease, "paused-lease", d.PausedLease, "longest single extension while an execution waits for approval")
	fs.DurationVar(&m.policy.MaxPausedIdle, "max-paused-idle", d.MaxPausedIdle, "idle time after which a session with paused executions is passivated anyway; at least --session-timeout and --approval-window (when not given, raised to the longer of them)")
	fs.DurationVar(&m.policy.RunningLease, "running-lease", d.RunningLease, "longest single extension while work runs or a response streams")
	fs.DurationVar(&m.policy.MaxRunningIdle, "max-running-idle", d.MaxRunningIdle, "idle time after which a session with running work is passivated anyway")
	fs.DurationVar(&m.ttl, "session-ttl", session.DefaultSessionTTL, "idle time after which a session ends for good (404 afterwards)")
	fs.DurationVar(&m.taskTTL, "task-ttl", tasks.DefaultTTL, "how long a task (MCP tasks extension) is kept after its creation (ttlMs); tasks/* find it no more afterwards")
	fs.DurationVar(&m.handleTTL, "handle-ttl", handle.DefaultIdleTTL, "idle time (not opened or saved) after which a server-minted handle (the SDK's NewHandle) is deleted with its state")
	fs.IntVar(&m.maxHandles, "max-handles-per-principal", handle.DefaultMaxPerPrincipal, "live server-minted handles (the SDK's NewHandle) one principal may hold; a mint past it is refused until one is dropped or expires (0: unlimited)")
	fs.IntVar(&m.maxPendingAsks, "max-pending-asks-per-principal", mcpruntime.DefaultMaxPendingAsks, "undecided questions asked without waiting (the SDK's AskLater) one principal may hold; one past it is refused until one is decided or its approval window lapses (0: unlimited)")
	fs.IntVar(&m.softCap, "resident-soft-cap", 0, "resident session runtimes per node before the least recently active idle one is evicted (0: derived from --resident-memory)")
	fs.StringVar(&m.residentMemory, "resident-memory", "auto", "memory budget of resident session runtimes, e.g. 4GiB, from which the node derives how many it keeps (auto: half of the cgroup's or the machine's memory; 0: a fixed --resident-soft-cap, default "+strconv.Itoa(residency.DefaultSoftCap)+")")
	fs.StringVar(&m.placement, "session-placement", "local", "local: mint a new session's id among the ids the receiving node owns (a client that keeps its connection to one gateway reaches its session without a network hop; sessions spread as the load balancer spreads initialize requests); hash: any id (sessions spread evenly whatever the balancer does)")
	fs.IntVar(&m.eventMax, "event-max-bytes", mcpruntime.DefaultMaxEventBytes, "largest SSE event kept for resumability (a larger one is delivered, not kept: its stream cannot be resumed from before it)")
	fs.Int64Var(&m.eventSession, "event-session-bytes", mcpruntime.DefaultSessionEventBytes, "SSE event bytes stored per session for resumability (an hour at most); the oldest are dropped first")
	fs.Int64Var(&m.eventPrincipal, "event-principal-bytes", mcpruntime.DefaultPrincipalEventBytes, "SSE event bytes stored for all the sessions of one principal together; the oldest are dropped first, whichever session they belong to")
	fs.Int64Var(&m.eventStored, "event-store-bytes", mcpruntime.DefaultStoredEventBytes, "SSE event bytes the store keeps in all, every session of every node that shares it (give every node the same); the oldest are dropped first, whoever owns them")
	fs.StringVar(&m.stateKey, "state-key", "", "hex key (at least "+strconv.Itoa(requeststate.MinKeyLen)+" bytes) that signs 2026-07-28 requestState tokens and approval forms; every node of a cluster needs the same. Prefer --state-key-file or MCPGRAIN_STATE_KEY: whoever has it can forge requestState for any principal")
}

// config translates the MCP flags into the app's configuration: each
// concern (lifetimes, limits, tokens, choices, the state key, code mode,
// OAuth) is checked by its own step, then the parts are put together.
func (m *mcpFlags) config() (app.MCPConfig, error) {
	packs := splitList(m.tools)
	if err := toolpacks.ValidateWith(packs, m.extra); err != nil {
		return app.MCPConfig{}, fmt.Errorf("%w: --tools: %v", errUsage, err)
	}
	if err := m.checkLifetimes(); err != nil {
		return app.MCPConfig{}, err
	}
	budget, err := m.checkLimits()
	if err != nil {
		return app.MCPConfig{}, err
	}
	keys, err := m.keys()
	if err != nil {
		return app.MCPConfig{}, err
	}
	if err := m.checkChoices(); err != nil {
		return app.MCPConfig{}, err
	}
	stateKey, err := m.stateKeyBytes()
	if err != nil {
		return app.MCPConfig{}, err
	}
	code, err := m.code.config()
	if err != nil {
		return app.MCPConfig{}, err
	}
	if err := m.checkLifecycle(code.Window); err != nil {
		return app.MCPConfig{}, err
	}
	oauth, err := m.oauth.config(code.PublicURL)
	if err != nil {
		return app.MCPConfig{}, err
	}
	return app.MCPConfig{
		OAuth:    oauth,
		Code:     code,
		StateKey: stateKey,
		Packs:    packs, Keys: keys, NoAuth: m.noAuth, RateLimit: m.rate, RateBurst: m.burst, BodyTimeout: m.bodyTimeout,
		StreamKeepalive: keepalive(m.keepalive),
		MaxInFlight:     orNegative(m.maxInFlight), QueueWait: orNegative(m.queueWait),
		TrustedOrigins: splitList(m.origins), Policy: m.policy, SessionTTL: m.ttl, TaskTTL: m.taskTTL, HandleTTL: m.handleTTL, MaxHandlesPerPrincipal: principalCap(m.maxHandles), MaxPendingAsksPerPrincipal: principalCap(m.maxPendingAsks), SoftCap: m.softCap, ResidentMemory: budget,
		LocalSessionIDs: m.placement == "local",
		MaxEventBytes:   m.eventMax, SessionEventBytes: m.eventSession,
		PrincipalEventBytes: m.eventPrincipal, StoredEventBytes: m.eventStored,
		AuthFailureRate: failureRate(m.failRate), AuthFailureBurst: m.failBurst,
		Approvers: policy.Approvers(m.approvers),
		// The program's own packs (an SDK user's server) and its name.
		ExtraPacks: m.extra, Implementation: m.impl,
	}, nil
}

// checkLifetimes checks that the idle policy's thresholds and the
// session and task lifetimes are positive.
func (m *mcpFlags) checkLifetimes() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--session-timeout", m.policy.SessionTimeout},
		{"--paused-lease", m.policy.PausedLease},
		{"--max-paused-idle", m.policy.MaxPausedIdle},
		{"--running-lease", m.policy.RunningLease},
		{"--max-running-idle", m.policy.MaxRunningIdle},
		{"--session-ttl", m.ttl},
		{"--task-ttl", m.taskTTL},
		{"--handle-ttl", m.handleTTL},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%w: %s must be positive", errUsage, d.flag)
		}
	}
	return nil
}

// checkLifecycle checks the idle policy against itself and the approval
// window (app.CheckLifecycle). --max-paused-idle, when not given, is
// raised to --session-timeout and --approval-window if they are longer: a
// paused session passivated at the session timeout behaves the same, and
// a pause keeps its session until its deadline, as the relation asks.
func (m *mcpFlags) checkLifecycle(window time.Duration) error {
	if !m.given("max-paused-idle") {
		m.policy.MaxPausedIdle = max(m.policy.MaxPausedIdle, m.policy.SessionTimeout, window)
	}
	if err := app.CheckLifecycle(m.policy, window); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// given reports whether the flag name was set, on the command line or
// through its environment variable.
func (m *mcpFlags) given(name string) bool {
	if _, ok := os.LookupEnv(envName(name)); ok {
		return true
	}
	set := false
	if m.fs != nil {
		m.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}

// principalCap is a per-principal cap flag (--max-handles-per-principal,
// --max-pending-asks-per-principal) as app.MCPConfig takes it
// (0, unlimited, is negative there: its zero is the default).
func principalCap(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// checkLimits checks the residency, body, event and rate limits, and
// returns the resident memory budget in bytes.
func (m *mcpFlags) checkLimits() (uint64, error) {
	if m.softCap < 0 || m.maxHandles < 0 || m.maxPendingAsks < 0 {
		return 0, fmt.Errorf("%w: --resident-soft-cap, --max-handles-per-principal and --max-pending-asks-per-principal must not be negative", errUsage)
	}
	budget, err := m.memoryBudget()
	if err != nil {
		return 0, err
	}
	switch {
	case m.bodyTimeout <= 0:
		return 0, fmt.Errorf("%w: --body-timeout must be positive", errUsage)
	case m.keepalive < 0:
		return 0, fmt.Errorf("%w: --stream-keepalive must not be negative (0: none)", errUsage)
	case m.eventMax < 1024 || m.eventSession < int64(m.eventMax) || m.eventPrincipal < m.eventSession || m.eventStored < m.eventPrincipal:
		return 0, fmt.Errorf("%w: --event-max-bytes must be at least 1024, --event-session-bytes at least --event-max-bytes, --event-principal-bytes at least --event-session-bytes, and --event-store-bytes at least --event-principal-bytes", errUsage)
	case m.failRate < 0 || m.failBurst < 1:
		return 0, fmt.Errorf("%w: --auth-failure-rate must not be negative and --auth-failure-burst must be at least 1", errUsage)
	case m.rate < 0 || m.burst < 1:
		return 0, fmt.Errorf("%w: --rate-limit must not be negative and --rate-burst must be at least 1", errUsage)
	case m.maxInFlight < 0 || m.queueWait < 0:
		return 0, fmt.Errorf("%w: --max-in-flight and --queue-wait must not be negative", errUsage)
	}
	return budget, nil
}

// keys are the static bearer tokens: --keys-file, then MCPGRAIN_KEYS,
// then --token, merged (a token given twice is refused).
func (m *mcpFlags) keys() (*auth.Keys, error) {
	keys, err := auth.NewKeys()
	if err != nil {
		return nil, err
	}
	for _, src := range []struct {
		name string
		load func() (*auth.Keys, error)
	}{
		{"--keys-file", m.fileKeys},
		{auth.EnvVar, envKeys},
		{"--token", m.tokenKeys},
	} {
		k, err := src.load()
		if err != nil {
			return nil, err
		}
		if k == nil {
			continue
		}
		if keys, err = keys.Merge(k); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errUsage, src.name, err)
		}
	}
	return keys, nil
}

// fileKeys are the keys of --keys-file (nil without it).
func (m *mcpFlags) fileKeys() (*auth.Keys, error) {
	if m.keysFile == "" {
		return nil, nil
	}
	k, err := auth.LoadKeysFile(m.keysFile)
	if err != nil {
		return nil, fmt.Errorf("%w: --keys-file: %v", errUsage, err)
	}
	return k, nil
}

// envKeys are the keys of MCPGRAIN_KEYS (nil when it is unset).
func envKeys() (*auth.Keys, error) {
	v := os.Getenv(auth.EnvVar)
	if v == "" {
		return nil, nil
	}
	k, err := auth.ParseKeysEnv(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return k, nil
}

// tokenKeys is --token as user dev of org local, an admin (nil without
// it).
func (m *mcpFlags) tokenKeys() (*auth.Keys, error) {
	if m.token == "" {
		return nil, nil
	}
	k, err := auth.NewKeys(auth.Entry{Token: m.token, User: "dev", Org: "local", Role: auth.RoleAdmin})
	if err != nil {
		return nil, fmt.Errorf("%w: --token: %v", errUsage, err)
	}
	return k, nil
}

// checkChoices checks the flags that name one of a few choices.
func (m *mcpFlags) checkChoices() error {
	if a := policy.Approvers(m.approvers); a != policy.ApproversMember && a != policy.ApproversAdmin {
		return fmt.Errorf("%w: --approvers must be member or admin", errUsage)
	}
	if m.placement != "local" && m.placement != "hash" {
		return fmt.Errorf("%w: --session-placement must be local or hash", errUsage)
	}
	return nil
}

// stateKeyBytes decodes --state-key (nil without it).
func (m *mcpFlags) stateKeyBytes() ([]byte, error) {
	if m.stateKey == "" {
		return nil, nil
	}
	k, err := hex.DecodeString(m.stateKey)
	if err != nil || requeststate.CheckKey(k) != nil {
		return nil, fmt.Errorf("%w: --state-key must be hex for at least %d bytes (e.g. openssl rand -hex 32)", errUsage, requeststate.MinKeyLen)
	}
	return k, nil
}

// memoryBudget is --resident-memory in bytes (0: a fixed soft cap). An
// explicit --resident-soft-cap overrides it.
func (m *mcpFlags) memoryBudget() (uint64, error) {
	if m.softCap > 0 {
		return 0, nil
	}
	n, err := app.ParseResidentMemory(m.residentMemory)
	if err != nil {
		return 0, fmt.Errorf("%w: --resident-memory %v", errUsage, err)
	}
	return n, nil
}

// keepalive maps --stream-keepalive (0: none) to app.MCPConfig's
// StreamKeepalive (negative: none).
func keepalive(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}

// failureRate maps --auth-failure-rate (0: off) to app.MCPConfig's
// AuthFailureRate (negative: off).
func failureRate(flag float64) float64 {
	if flag == 0 {
		return -1
	}
	return flag
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// devStateKey reads the dev node's requestState key from dir, creating it
// on first use, so restarts keep accepting the tokens it issued.
func devStateKey(dir string) (string, error) {
	path := filepath.Join(dir, "state.key")
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	key := hex.EncodeToString(k)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return key, nil
}

// orNegative maps a flag's 0 ("none": unbounded, at once) to the
// option's negative value (an option's zero is its default).
func orNegative[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
