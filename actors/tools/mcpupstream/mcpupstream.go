// Package mcpupstream is a tool source that proxies an upstream MCP server
// over the streamable HTTP transport (go-sdk client, the SDK's default
// protocol version).
//
// The source keeps the upstream's tool list in memory and answers Lookup
// from it with one map lookup. The list is fetched when the source is
// created, again on the first use after Options.RefreshEvery, after the
// upstream announces notifications/tools/list_changed, and on a Lookup miss
// (at most once per Options.MissRefreshEvery, so code probing names cannot
// flood the upstream).
//
// Approval defaults fail closed, as MCP presumes: a tool requires approval,
// with text "Call upstream tool <name>", unless the upstream marks it
// readOnlyHint true (MCP's destructiveHint defaults to true for a tool that
// is not read-only, and a tool without annotations is such a tool). An
// explicit destructiveHint true requires approval even beside readOnlyHint
// (contradictory hints count as the riskier one). readOnlyHint or
// idempotentHint true makes a tool Idempotent. Upstream annotations are
// hints from the upstream server: policies (package policy) decide
// otherwise, e.g. approve an unannotated tool known to be harmless.
//
// Connecting: New connects and lists the tools within
// Options.ConnectTimeout. A failure is a *ConnectError that says whether the
// upstream is unavailable (no answer, a timeout, HTTP 5xx or 429: retrying
// may help) or refused or misunderstood the request (HTTP 401, 403, 404 and
// other 4xx, an unknown host, a TLS certificate it does not trust, an answer
// that is not MCP: a configuration to fix). With Options.RetryUnavailable,
// New returns a source for an unavailable upstream anyway: it has no tools
// (Unavailable says why) and keeps connecting in the background, with
// backoff from Options.RetryMin doubling to Options.RetryMax, until it
// connects or is closed; its tools appear from then on.
//
// Results: Call returns structuredContent when the upstream sends it, else
// the text contents joined by newlines, else the raw content list (as JSON
// values). A result with isError is returned as a *ToolError carrying the
// text.
//
// If the upstream session ends (the server restarted, or forgot the
// session), the next use reconnects. A call the upstream refused because it
// no longer knows the session (HTTP 404, before running anything) is sent
// again once on a new session; a call whose connection closed mid-way is
// sent again only if the tool is Idempotent.
package mcpupstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

// Defaults of Options.
const (
	// DefaultRefreshEvery is how old the cached tool list may get.
	DefaultRefreshEvery = time.Minute
	// DefaultMissRefreshEvery is the least time between refreshes that
	// Lookup misses trigger.
	DefaultMissRefreshEvery = 5 * time.Second
	// ErrorTextBytes is how much upstream error text an error keeps.
	ErrorTextBytes = 2048
	// DefaultConnectTimeout bounds one attempt to connect and list tools.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultRetryMin is the wait before the first background retry.
	DefaultRetryMin = time.Second
	// DefaultRetryMax is the longest wait between background retries.
	DefaultRetryMax = 30 * time.Second
)

// Options configures New.
type Options struct {
	// Name is the source name (^[a-zA-Z][a-zA-Z0-9_]*$). Required.
	Name string
	// Endpoint is the upstream's streamable HTTP URL. Required.
	Endpoint string
	// Headers are sent with every request to the upstream, e.g.
	// Authorization.
	Headers http.Header
	// Client sends the requests. Nil means http.DefaultClient's transport.
	// Its Timeout, if any, also bounds the upstream's long-lived streams.
	Client *http.Client
	// RefreshEvery is how old the cached tool list may get before a use
	// refetches it. Zero means DefaultRefreshEvery.
	RefreshEvery time.Duration
	// MissRefreshEvery is the least time between refetches that Lookup
	// misses trigger. Zero means DefaultMissRefreshEvery; negative refetches
	// on every miss.
	MissRefreshEvery time.Duration
	// ProtocolVersion asks for an MCP protocol version; empty means the
	// SDK's default.
	ProtocolVersion string
	// ConnectTimeout bounds each attempt to connect and list the tools, at
	// New and in the background. Zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// RetryUnavailable makes New return a source even when the upstream is
	// unavailable (see ConnectError.Unavailable); the source connects in
	// the background. False: New fails.
	RetryUnavailable bool
	// RetryMin is the wait before the first background retry, doubled
	// after each failed one up to RetryMax. Zero means DefaultRetryMin and
	// DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// Clock times the background retries. Nil means the system clock.
	Clock clock.Clock
	// Logger reports background connection attempts. Nil discards them.
	Logger *slog.Logger
}

// ToolError is the error Call returns when the upstream tool reports
// isError. Its message is "<source>.<tool>: <text>".
type ToolError struct {
	// Tool is the tool path, e.g. "files.delete_file".
	Tool string
	// Text is the error text the upstream returned, truncated to
	// ErrorTextBytes.
	Text string
}

// Error returns "<tool>: <text>".
func (e *ToolError) Error() string { return e.Tool + ": " + e.Text }

// Source is a tool source backed by an upstream MCP server. It is safe for
// concurrent use.
type Source struct {
	name     string
	endpoint string
	opts     Options
	client   *mcp.Client
	http     *http.Client
	log      *slog.Logger

	snap atomic.Pointer[snapshot] // current tool list; never nil after New

	listChanged atomic.Bool              // the upstream announced a new tool list
	onChangeMu  sync.Mutex               // serializes OnChange
	onChange    atomic.Pointer[[]func()] // OnChange's functions
	closed      atomic.Bool

	// Until the first connection (RetryUnavailable): why it failed last.
	// Nil once connected.
	unavailable atomic.Pointer[ConnectError]
	life        context.Context // canceled by Close: ends background attempts
	endLife     context.CancelFunc
	retryMu     sync.Mutex  // guards retry
	retry       clock.Timer // the next background attempt, if armed

	refreshMu sync.Mutex // one refresh at a time
	lastMiss  time.Time  // last miss-triggered refresh; guarded by refreshMu

	sessMu  sync.Mutex
	session *mcp.ClientSession

	watchMu   sync.Mutex
	watchers  map[int]func() // Watch's callbacks, by subscription
	nextWatch int
}

// snapshot is one fetched tool list.
type snapshot struct {
	byName    map[string]*entry
	list      []*entry // by name
	fetchedAt time.Time
	sig       string // the raw tool list as JSON: equal lists have equal ones
}

type entry struct {
	tool   tools.Tool
	search tools.SearchText
	raw    *mcp.Tool // as the upstream listed it
}

// New connects to the upstream and fetches its tool list. A failure to
// connect is a *ConnectError; with Options.RetryUnavailable, an unavailable
// upstream instead gives a source that connects in the background.
func New(ctx context.Context, opts Options) (*Source, error) {
	if !tools.ValidSourceName(opts.Name) {
		return nil, fmt.Errorf("mcpupstream: invalid source name %q (want ^[a-zA-Z][a-zA-Z0-9_]*$)", opts.Name)
	}
	if opts.Endpoint == "" {
		return nil, fmt.Errorf("mcpupstream %s: Endpoint is required", opts.Name)
	}
	s := newSource(withDefaults(opts))
	snap, err := s.connect(ctx)
	if err == nil {
		s.snap.Store(snap)
		return s, nil
	}
	var ce *ConnectError
	if !opts.RetryUnavailable || !errors.As(err, &ce) || !ce.Unavailable {
		s.Close()
		return nil, err
	}
	s.snap.Store(&snapshot{byName: map[string]*entry{}})
	s.unavailable.Store(ce)
	s.log.Warn("upstream MCP server unavailable; connecting in the background", "source", s.name, "retry_in", s.opts.RetryMin, "error", ce)
	s.armRetry(s.opts.RetryMin)
	return s, nil
}

// withDefaults fills the zero fields of opts with their defaults.
func withDefaults(opts Options) Options {
	if opts.RefreshEvery <= 0 {
		opts.RefreshEvery = DefaultRefreshEvery
	}
	if opts.MissRefreshEvery == 0 {
		opts.MissRefreshEvery = DefaultMissRefreshEvery
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryMin)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return opts
}

// newSource builds a source that has not connected yet.
func newSource(opts Options) *Source {
	s := &Source{name: opts.Name, endpoint: opts.Endpoint, opts: opts, log: opts.Logger}
	s.life, s.endLife = context.WithCancel(context.Background())
	base := http.DefaultClient
	if opts.Client != nil {
		base = opts.Client
	}
	hc := *base
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = &headerTransport{next: rt, headers: opts.Headers.Clone()}
	s.http = &hc
	s.client = mcp.NewClient(&mcp.Implementation{Name: "mcpgrain", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{}, // no roots
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.listChanged.Store(true)
			if s.watched() || s.onChange.Load() != nil {
				go s.refetchForWatchers()
			}
		},
	})
	return s
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	next    http.RoundTripper
	headers http.Header
}

// RoundTrip sends r with the configured headers added, and notes the
// error status of a message sent during a connection attempt.
func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header[k] = slices.Clone(v)
		}
	}
	resp, err := t.next.RoundTrip(r)
	if resp != nil && resp.StatusCode >= 400 && r.Method == http.MethodPost { // not the optional GET stream
		noteStatus(r.Context(), resp.StatusCode)
	}
	return resp, err
}

// Name returns the source name.
func (s *Source) Name() string { return s.name }

// Close ends the upstream session and any background connecting. Later
// calls fail.
func (s *Source) Close() error {
	s.closed.Store(true)
	s.endLife()
	s.retryMu.Lock()
	if s.retry != nil {
		s.retry.Stop()
	}
	s.retryMu.Unlock()
	s.sessMu.Lock()
	cs := s.session
	s.session = nil
	s.sessMu.Unlock()
	if cs != nil {
		return cs.Close()
	}
	return nil
}

// getSession returns the live session, connecting when there is none.
func (s *Source) getSession(ctx context.Context) (*mcp.ClientSession, error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.closed.Load() { // under sessMu: Close then finds any session made here
		return nil, errors.New("source is closed")
	}
	if s.session != nil {
		return s.session, nil
	}
	cs, err := s.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.endpoint, HTTPClient: s.http},
		&mcp.ClientSessionOptions{ProtocolVersion: s.opts.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	s.session = cs
	// Forget the session once the connection ends, so the next use
	// reconnects.
	go func() {
		_ = cs.Wait()
		s.dropSession(cs)
	}()
	return cs, nil
}

// dropSession forgets cs if it is still the current session, and closes it.
func (s *Source) dropSession(cs *mcp.ClientSession) {
	s.sessMu.Lock()
	if s.session == cs {
		s.session = nil
	}
	s.sessMu.Unlock()
	_ = cs.Close()
}

// fetch lists the upstream's tools, reconnecting once if the session has
// ended.
func (s *Source) fetch(ctx context.Context) (*snapshot, error) {
	var err error
	for range 2 {
		var cs *mcp.ClientSession
		if cs, err = s.getSession(ctx); err != nil {
			return nil, err
		}
		// Cleared before listing: an announcement that arrives meanwhile
		// sets it again and triggers another refresh.
		s.listChanged.Store(false)
		var list []*mcp.Tool
		if list, err = listTools(ctx, cs); err == nil {
			return s.newSnapshot(list), nil
		}
		if !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) {
			break
		}
		s.dropSession(cs)
	}
	return nil, fmt.Errorf("tools/list: %w", err)
}

func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var list []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		list = append(list, t)
	}
	return list, nil
}

func (s *Source) newSnapshot(list []*mcp.Tool) *snapshot {
	snap := &snapshot{byName: make(map[string]*entry, len(list)), fetchedAt: time.Now()}
	for _, t := range list {
		if t == nil || t.Name == "" {
			continue
		}
		e := &entry{tool: toTool(s.name, t), raw: t}
		title := t.Title
		if title == "" && t.Annotations != nil {
			title = t.Annotations.Title
		}
		e.search = tools.NewSearchText(t.Name, title, e.tool.Path, t.Description)
		snap.byName[t.Name] = e
		snap.list = append(snap.list, e)
	}
	slices.SortFunc(snap.list, func(a, b *entry) int { return strings.Compare(a.tool.Name, b.tool.Name) })
	raw := make([]*mcp.Tool, 0, len(snap.list))
	for _, e := range snap.list {
		raw = append(raw, e.raw)
	}
	if b, err := json.Marshal(raw); err == nil {
		snap.sig = string(b)
	}
	return snap
}

// toTool maps an upstream tool to a Tool.
func toTool(source string, t *mcp.Tool) tools.Tool {
	out := tools.Tool{
		Path:         source + "." + t.Name,
		Source:       source,
		Name:         t.Name,
		Description:  t.Description,
		ApprovalText: "Call upstream tool " + t.Name,
	}
	if out.Description == "" {
		out.Description = t.Title
	}
	if t.InputSchema != nil {
		if raw, err := json.Marshal(t.InputSchema); err == nil {
			out.InputSchema = raw
		}
	}
	out.RequiresApproval, out.Idempotent = approvalDefaults(t.Annotations)
	return out
}

// approvalDefaults is what a tool's annotations (nil: none) make of its
// defaults. It fails closed: only readOnlyHint true, without an explicit
// destructiveHint true beside it, runs without approval (MCP presumes a tool
// that is not read-only destructive). readOnlyHint or idempotentHint true
// makes it safe to send again.
func approvalDefaults(a *mcp.ToolAnnotations) (requiresApproval, idempotent bool) {
	if a == nil {
		return true, false
	}
	destructive := a.DestructiveHint != nil && *a.DestructiveHint
	return !a.ReadOnlyHint || destructive, a.ReadOnlyHint || a.IdempotentHint
}

// current returns the tool list, refetching it first when it is older than
// RefreshEvery or the upstream announced a change. A failed refetch keeps
// the old list.
func (s *Source) current(ctx context.Context) *snapshot {
	snap := s.snap.Load()
	if s.unavailable.Load() != nil { // the background attempts connect
		return snap
	}
	if time.Since(snap.fetchedAt) < s.opts.RefreshEvery && !s.listChanged.Load() {
		return snap
	}
	return s.refresh(ctx, snap, false)
}

// refresh refetches the tool list unless another refresh replaced old while
// this one waited. A miss refresh is skipped (returning the current list)
// when the last one was less than MissRefreshEvery ago.
func (s *Source) refresh(ctx context.Context, old *snapshot, miss bool) *snapshot {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if cur := s.snap.Load(); cur != old {
		return cur
	}
	if miss {
		if s.opts.MissRefreshEvery > 0 && time.Since(s.lastMiss) < s.opts.MissRefreshEvery {
			return old
		}
		s.lastMiss = time.Now()
	}
	snap, err := s.fetch(ctx)
	if err != nil {
		return old
	}
	s.store(snap)
	if snap.sig != old.sig || snap.sig == "" {
		s.notifyWatchers()
	}
	return snap
}

// OnChange adds f to the functions called, each in a goroutine of its
// own, after the tool list changed: refetched with a difference (on use, or at once after the
// upstream announced a change while f is set), or fetched at last by a
// background connection. It implements tools.ChangeNotifier.
func (s *Source) OnChange(f func()) {
	s.onChangeMu.Lock()
	defer s.onChangeMu.Unlock()
	var fs []func()
	if old := s.onChange.Load(); old != nil {
		fs = slices.Clone(*old)
	}
	fs = append(fs, f)
	s.onChange.Store(&fs)
}

// store makes snap the current tool list and tells OnChange's f when it
// differs from the one it replaces.
func (s *Source) store(snap *snapshot) {
	old := s.snap.Swap(snap)
	if fs := s.onChange.Load(); fs != nil && (old == nil || !sameTools(old, snap)) {
		for _, f := range *fs {
			go f()
		}
	}
}

// sameTools reports whether two tool lists declare the same tools.
func sameTools(a, b *snapshot) bool {
	return slices.EqualFunc(a.list, b.list, func(x, y *entry) bool {
		return x.tool.Name == y.tool.Name && x.tool.Description == y.tool.Description &&
			x.tool.RequiresApproval == y.tool.RequiresApproval && string(x.tool.InputSchema) == string(y.tool.InputSchema)
	})
}

// Lookup finds an upstream tool by name in the cached list; a miss may
// refetch the list once (see Options.MissRefreshEvery).
func (s *Source) Lookup(ctx context.Context, name string) (tools.Tool, bool) {
	e, ok := s.lookup(ctx, name)
	if !ok {
		return tools.Tool{}, false
	}
	return e.tool, true
}

func (s *Source) lookup(ctx context.Context, name string) (*entry, bool) {
	snap := s.current(ctx)
	if e, ok := snap.byName[name]; ok {
		return e, true
	}
	if s.closed.Load() || s.unavailable.Load() != nil {
		return nil, false
	}
	snap = s.refresh(ctx, snap, true)
	e, ok := snap.byName[name]
	return e, ok
}

// Call calls the upstream tool. See the package documentation for the
// result; an isError result is a *ToolError and an unknown name an error
// wrapping tools.ErrUnknownTool.
func (s *Source) Call(ctx context.Context, name string, args map[string]any) (any, error) {
	e, ok := s.lookup(ctx, name)
	if !ok {
		if err := s.Unavailable(); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", s.name, name, err)
		}
		return nil, fmt.Errorf("%w: %s.%s: the upstream MCP server has no tool %q (use search to find tools)", tools.ErrUnknownTool, s.name, name, name)
	}
	if args == nil {
		args = map[string]any{}
	}
	for attempt := 0; ; attempt++ {
		cs, err := s.getSession(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: upstream: %w", e.tool.Path, err)
		}
		res, err := s.callTool(ctx, cs, name, args)
		if err != nil {
			// The upstream answers 404 to a session it no longer has
			// before running anything, so that call can always be sent
			// again on a new session. A connection that closed mid-call
			// may have run it: only an idempotent tool is sent again.
			missing := errors.Is(err, mcp.ErrSessionMissing)
			if missing || errors.Is(err, mcp.ErrConnectionClosed) {
				s.dropSession(cs)
				if attempt == 0 && (missing || e.tool.Idempotent) {
					continue
				}
			}
			return nil, fmt.Errorf("%s: upstream: %s", e.tool.Path, tools.TruncateText(err.Error(), ErrorTextBytes))
		}
		return s.result(e.tool.Path, res)
	}
}

// result maps a CallToolResult to a JSON-able value or a *ToolError.
func (s *Source) result(path string, res *mcp.CallToolResult) (any, error) {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	if res.IsError {
		text := strings.Join(texts, "\n")
		if text == "" {
			text = "the upstream tool reported an error"
		}
		return nil, &ToolError{Tool: path, Text: tools.TruncateText(text, ErrorTextBytes)}
	}
	if res.StructuredContent != nil {
		return jsonValue(res.StructuredContent), nil
	}
	if len(texts) > 0 {
		return strings.Join(texts, "\n"), nil
	}
	list := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		list = append(list, jsonValue(c))
	}
	return list, nil
}

// jsonValue round-trips v through JSON, so the result holds only maps,
// slices, strings, float64s, bools and nils.
func jsonValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil
	}
	return out
}

// Search returns at most limit upstream tools ranked by tools.SearchText
// score over name, title, path and description; an empty query returns
// the first tools by name.
func (s *Source) Search(ctx context.Context, query string, limit int) []tools.Tool {
	return tools.HitTools(s.SearchScored(ctx, query, limit))
}

// SearchScored is Search with scores; it implements tools.ScoredSearcher.
func (s *Source) SearchScored(ctx context.Context, query string, limit int) []tools.Hit {
	limit = tools.ClampSearchLimit(limit)
	snap := s.current(ctx)
	terms := tools.SearchTerms(query)
	var hits []tools.Hit
	for _, e := range snap.list {
		if len(terms) == 0 {
			if len(hits) == limit {
				break
			}
			hits = append(hits, tools.Hit{Tool: e.tool})
			continue
		}
		if sc := e.search.Score(terms); sc > 0 {
			hits = append(hits, tools.Hit{Tool: e.tool, Score: sc})
		}
	}
	tools.SortHits(hits)
	return hits[:min(limit, len(hits))]
}

// MCPTools returns the upstream's tools as it last listed them (name,
// schema, description, annotations), by name, without asking the upstream
// (ctx is unused): [Source.Watch] tells when the list changes. The tools
// are copies: changing them does not change the source. An upstream not
// connected yet has none.
func (s *Source) MCPTools(_ context.Context) []*mcp.Tool {
	snap := s.snap.Load()
	out := make([]*mcp.Tool, 0, len(snap.list))
	for _, e := range snap.list {
		t := *e.raw
		out = append(out, &t)
	}
	return out
}
