// Tests of the execute and resume tools against executor's tool-server
// checklist (executor packages/hosts/mcp/src/tool-server.test.ts) and the
// cross-session resume misses of agent-session-model-resume.test.ts, as far
// as they apply here. The tools are driven by a real go-sdk client over
// real HTTP (mcp.NewStreamableHTTPHandler behind httptest), with the
// identity header (X-Mcpgrain-Identity) set by a wrapping handler as a grain sets
// it (exchange.Identity), and a real engine over an in-test tool source.
//
// Seed cases skipped, and why:
//   - emitted image/audio/text-like/binary files as MCP image, audio, text
//     and resource blocks ("File output: ..."): the sandbox has no file
//     values; emitted values are JSON and rendered as text (covered).
//   - emitted MCP content blocks passed through unchanged: emit takes JSON
//     values only, there are no MCP content values in the sandbox.
//   - returned ToolFile values and upstream images not rendered as files:
//     no ToolFile type here.
//   - mixed output keeps its order: only text output exists; the order of
//     emitted values before the result is covered.
//   - an empty schema is wrapped in a minimal schema: every pause here is a
//     confirmation gate and always sends {type:object,properties:{}}
//     (asserted in the native and model cases).
//   - URL elicitation (mode:url, the form fallback with the URL, a URL
//     pause's interaction.kind "url"): the engine has no URL pauses.
//   - resume hidden in native mode / for native form-only clients: the tool
//     list is static per server here; resume is always registered.
//   - a directory entry pointing at the current session, wedged-owner
//     timeouts, lease/keepAlive release of the owner: they belong to the
//     runtime's Forward (actors/mcpruntime) and the multi-node tests; here
//     Forward is a fake fault-injection point.
//   - org write access header: no equivalent.
//   - skills tool: not implemented here.
//   - tracing markers and span attributes: no tracing here.
package codemode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/codemode"
	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/sandbox"
	"github.com/mcpgrain/mcpgrain/actors/tools"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// legacyProtocol is the last initialize-handshake protocol version: a
// stateful session that can receive elicitations (native mode).
const legacyProtocol = "2025-11-25"

var (
	alice = engine.Principal{User: "alice", Org: "acme", Role: "admin"}
	epoch = time.UnixMilli(2_000_000_000_000) // the fake clock's start
)

// shop is a small in-test tool source: a read (list), a write that needs
// approval (order, with a visible side effect) and a tool that fails.
type shop struct {
	mu     sync.Mutex
	orders []string
}

var shopTools = map[string]tools.Tool{
	"list":  {Path: "shop.list", Source: "shop", Name: "list", Description: "List the catalogue", Idempotent: true},
	"order": {Path: "shop.order", Source: "shop", Name: "order", Description: "Order an item", RequiresApproval: true, ApprovalText: "POST /orders"},
	"fail":  {Path: "shop.fail", Source: "shop", Name: "fail", Description: "Always fails"},
}

func (s *shop) Name() string { return "shop" }

func (s *shop) Lookup(_ context.Context, name string) (tools.Tool, bool) {
	t, ok := shopTools[name]
	return t, ok
}

func (s *shop) Call(_ context.Context, name string, args map[string]any) (any, error) {
	switch name {
	case "list":
		return []any{"apple", "pear"}, nil
	case "order":
		item, _ := args["item"].(string)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.orders = append(s.orders, item)
		return map[string]any{"id": len(s.orders), "item": item}, nil
	case "fail":
		return nil, errors.New("warehouse offline")
	}
	return nil, fmt.Errorf("%w: shop.%s", tools.ErrUnknownTool, name)
}

func (s *shop) Search(context.Context, string, int) []tools.Tool {
	return []tools.Tool{shopTools["fail"], shopTools["list"], shopTools["order"]}
}

func (s *shop) placed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.orders)
}

// hookLog records the engine's pause lifecycle in executor's notation.
type hookLog struct {
	mu     sync.Mutex
	events []string
}

func (h *hookLog) add(s string) {
	h.mu.Lock()
	h.events = append(h.events, s)
	h.mu.Unlock()
}
func (h *hookLog) Paused(id string, _ time.Time) { h.add("pause:" + id) }
func (h *hookLog) Resuming(id, _ string)         { h.add("resume-start:" + id) }
func (h *hookLog) Settled(id string)             { h.add("resume-settle:" + id) }
func (h *hookLog) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// decision is what the fake approval surface hands a waiting browser-mode
// resume: ok false means "no decision".
type decision struct {
	resp engine.Response
	ok   bool
}

type forwardCall struct {
	id   string
	who  engine.Principal
	resp engine.Response
}

// testRuntime is the codemode.Runtime of the tests. Engine is real.
// WaitDecision takes the decisions the test queues (a test that expects it
// to be called queues one first, so nothing waits on time). Forward is a
// fake and the fault-injection point for cross-session resumes: it records
// its calls and answers what the test set. The real forward path (directory
// lookup, owner session, identity check) is covered by the multi-node
// system tests (internal/systemtest).
type testRuntime struct {
	eng       *engine.Engine
	decisions chan decision

	mu       sync.Mutex
	waited   []string
	forwards []forwardCall
	fwdRes   *mcp.CallToolResult
	fwdMiss  codemode.Miss
}

func (r *testRuntime) Engine() *engine.Engine { return r.eng }

func (r *testRuntime) WaitDecision(ctx context.Context, execID string, _ engine.Access) (engine.Response, bool) {
	r.mu.Lock()
	r.waited = append(r.waited, execID)
	r.mu.Unlock()
	select {
	case d := <-r.decisions:
		return d.resp, d.ok
	case <-ctx.Done():
		return engine.Response{}, false
	}
}

// DecidedOutcome: the tests' approval surface (decisions) hands its
// decisions to WaitDecision; none is applied out of band.
func (r *testRuntime) DecidedOutcome(ctx context.Context, id string, a engine.Access) (engine.Outcome, bool) {
	return r.eng.Outcome(ctx, id, a)
}

func (r *testRuntime) Forward(_ context.Context, execID string, who engine.Principal, resp engine.Response) (*mcp.CallToolResult, codemode.Miss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forwards = append(r.forwards, forwardCall{id: execID, who: who, resp: resp})
	return r.fwdRes, r.fwdMiss
}

func (r *testRuntime) setForward(res *mcp.CallToolResult, miss codemode.Miss) {
	r.mu.Lock()
	r.fwdRes, r.fwdMiss = res, miss
	r.mu.Unlock()
}

func (r *testRuntime) forwarded() []forwardCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.forwards)
}

func (r *testRuntime) waitedFor() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.waited)
}

type harness struct {
	shop   *shop
	hooks  *hookLog
	eng    *engine.Engine
	rt     *testRuntime
	server *mcp.Server
	logs   *testenv.SyncBuffer
	window time.Duration
}

type harnessOptions struct {
	window    time.Duration // engine and tool approval window; default 4m
	publicURL string
	sources   []string
	journal   engine.Journal // makes executions durable
	limits    sandbox.Limits // the engine's; default a 20 s wall time
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	if o.window == 0 {
		o.window = 4 * time.Minute
	}
	if o.limits.WallTime == 0 {
		o.limits.WallTime = 20 * time.Second
	}
	h := &harness{shop: &shop{}, hooks: &hookLog{}, logs: &testenv.SyncBuffer{}, window: o.window}
	reg, err := tools.NewRegistry(h.shop)
	if err != nil {
		t.Fatal(err)
	}
	h.eng = engine.New(engine.Config{Tools: reg, Hooks: h.hooks, Clock: clock.NewFake(epoch), ApprovalWindow: o.window,
		Limits: o.limits, Journal: o.journal, Session: "s1"})
	t.Cleanup(h.eng.Shutdown)
	h.rt = &testRuntime{eng: h.eng, decisions: make(chan decision, 4)}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "codemode-test", Version: "v0.0.0"}, nil)
	codemode.Register(h.server, codemode.Options{Runtime: h.rt, Window: o.window, PublicURL: o.publicURL, Sources: o.sources,
		Logger: slog.New(slog.NewJSONHandler(h.logs, nil))})
	return h
}

// clientOptions say how a test client connects.
type clientOptions struct {
	mode        string // ?elicitation_mode= (""/model, browser, native)
	host        string // the public host (the identity's origin); default mcp.example.test
	sessionless bool   // a 2026-07-28 client through a stateless handler (the identity's sessionless flag)
	autoMRTR    bool   // sessionless: let go-sdk's client answer input requests itself
	role        string // the caller's role (default alice's)
	elicit      func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
}

// connect serves h's server over real HTTP behind a handler that sets the
// headers a grain sets (exchange.Identity) and connects a client to it.
func (h *harness) connect(t *testing.T, o clientOptions) *mcp.ClientSession {
	t.Helper()
	if o.host == "" {
		o.host = "mcp.example.test"
	}
	role := alice.Role
	if o.role != "" {
		role = o.role
	}
	ex := &pb.HttpExchange{Principal: &pb.Principal{User: alice.User, Org: alice.Org, Role: role}, Host: o.host}
	if o.mode != "" {
		ex.RawQuery = "elicitation_mode=" + o.mode
	}
	identity := exchange.Identity(ex, "grain-test", o.sessionless)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.server },
		&mcp.StreamableHTTPOptions{Stateless: o.sessionless})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range identity {
			r.Header[k] = v
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	copts := &mcp.ClientOptions{ElicitationHandler: o.elicit}
	version := legacyProtocol
	if o.sessionless {
		version = "" // go-sdk's default: 2026-07-28
		if !o.autoMRTR {
			copts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "codemode-test-client", Version: "v0.0.0"}, copts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool; a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return res, sc
}

func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func text(res *mcp.CallToolResult) string { return strings.Join(texts(res), "\n") }

// jsonEqual compares a decoded JSON value with want (marshalled and
// decoded the same way).
func jsonEqual(t *testing.T, got, want any) bool {
	t.Helper()
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var w any
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(got, w)
}

// pauseModel executes code in model mode and returns the paused execution id.
func pauseModel(t *testing.T, cs *mcp.ClientSession, code string) string {
	t.Helper()
	res, sc := call(t, cs, "execute", map[string]any{"code": code})
	id, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "waiting_for_interaction" || !strings.HasPrefix(id, "exec_") {
		t.Fatalf("execute: want a pause, got %s / %v", text(res), sc)
	}
	return id
}

const (
	orderTea     = `return (await tools.shop.order({item: "tea"})).item`
	orderTwo     = `const a = await tools.shop.order({item: "tea"}); const b = await tools.shop.order({item: "cake"}); return [a.id, b.id]`
	orderUnknown = "exec_00000000000000000000000000000000"
)

func TestToolsAreListed(t *testing.T) {
	h := newHarness(t, harnessOptions{sources: []string{"shop: a test shop"}})
	cs := h.connect(t, clientOptions{})
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tool := range list.Tools {
		got[tool.Name] = tool.Description
	}
	if len(got) != 2 || got["execute"] == "" || got["resume"] == "" {
		t.Fatalf("tools %v, want execute and resume", got)
	}
	if !strings.Contains(got["execute"], "## Available integrations\n- shop: a test shop") {
		t.Fatalf("execute description lacks the sources: %q", got["execute"])
	}
}

func TestCompletedExecutionIsReturnedWithLogs(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	for _, tc := range []struct {
		name, code string
		content    []string // every text block, in order
		structured map[string]any
	}{
		{"string result with logs", `console.log("hi"); console.warn("careful"); return "done"`,
			[]string{"done\nLogs:\nhi\nwarn: careful"},
			map[string]any{"status": "completed", "result": "done", "logs": []string{"hi", "warn: careful"}}},
		{"object result from a read tool, no logs", `return {count: (await tools.shop.list({})).length}`,
			[]string{"{\n  \"count\": 2\n}"},
			map[string]any{"status": "completed", "result": map[string]any{"count": 2}, "logs": []string{}}},
		{"no return value", `console.log("x")`,
			[]string{"(no return value)\nLogs:\nx"},
			map[string]any{"status": "completed", "result": nil, "logs": []string{"x"}}},
		{"emitted output first, result kept", `emit("first"); emit({n: 1}); return 3`,
			[]string{"first", "{\n  \"n\": 1\n}", "3"},
			map[string]any{"status": "completed", "result": 3, "logs": []string{}, "emitted": []any{"first", map[string]any{"n": 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, sc := call(t, cs, "execute", map[string]any{"code": tc.code})
			if res.IsError {
				t.Fatalf("isError: %s", text(res))
			}
			if got := texts(res); !slices.Equal(got, tc.content) {
				t.Fatalf("content %q, want %q", got, tc.content)
			}
			if !jsonEqual(t, sc, tc.structured) {
				t.Fatalf("structured %v, want %v", sc, tc.structured)
			}
		})
	}
	if len(h.hooks.list()) != 0 || len(h.shop.placed()) != 0 {
		t.Fatalf("hooks %v orders %v for runs without approval", h.hooks.list(), h.shop.placed())
	}
}

// Each sandbox limit that stops an execution names itself in the structured
// content (errorKind limit or timeout, limit: which one), so a client, and
// this test, tell a memory bomb stopped by the heap bound from one stopped
// by the wall time; disabling a limit fails its case here.
func TestEachLimitNamesItself(t *testing.T) {
	// The memory bomb gets a wall time it cannot reach (near the heap limit
	// the worker's GC runs hard: seconds on loaded cores); the others a short one.
	heap := newHarness(t, harnessOptions{limits: sandbox.Limits{WallTime: time.Minute, MaxHeapGrowth: 64 << 20}})
	res, sc := call(t, heap.connect(t, clientOptions{}), "execute", map[string]any{
		"code": `const a: any[] = []; while (true) a.push(new Array(1000).fill("x" + a.length));`})
	if !res.IsError || sc["errorKind"] != sandbox.KindLimit || sc["limit"] != sandbox.LimitHeap {
		t.Fatalf("memory bomb: errorKind %v limit %v (%.200s), want the heap limit", sc["errorKind"], sc["limit"], text(res))
	}
	h := newHarness(t, harnessOptions{limits: sandbox.Limits{WallTime: 3 * time.Second, MaxToolCalls: 3, MaxOutput: 1 << 10}})
	cs := h.connect(t, clientOptions{})
	for _, tc := range []struct{ name, code, kind, limit string }{
		{"output", `for (let i = 0; ; i++) console.log("line " + i)`, sandbox.KindLimit, sandbox.LimitOutput},
		{"tool calls", `for (let i = 0; i < 10; i++) await tools.shop.list({}); return "all"`, sandbox.KindLimit, sandbox.LimitToolCalls},
		{"wall time", `while (true) {}`, sandbox.KindTimeout, sandbox.LimitWallTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, sc := call(t, cs, "execute", map[string]any{"code": tc.code})
			if !res.IsError || sc["errorKind"] != tc.kind || sc["limit"] != tc.limit || sc["retryable"] != false {
				t.Fatalf("isError %v errorKind %v limit %v retryable %v (%.200s), want %s, %s, not retryable",
					res.IsError, sc["errorKind"], sc["limit"], sc["retryable"], text(res), tc.kind, tc.limit)
			}
		})
	}
}

// Code failures are the user's to see: isError with the message, never the
// opaque internal error.
func TestEngineErrorsAreDescribed(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	for _, tc := range []struct {
		name, code string
		want       []string // substrings of the text
		logs       []string
		kind       string // structured errorKind
	}{
		{"syntax error", `return 1 +`, []string{"1:11: Unexpected end of code", "return 1 +"}, []string{}, sandbox.KindSyntax},
		{"uncaught exception keeps the logs", `console.log("before"); throw new Error("kaboom")`, []string{"kaboom", "\nLogs:\nbefore"}, []string{"before"}, sandbox.KindRuntime},
		{"tool error", `await tools.shop.fail({})`, []string{"warehouse offline"}, []string{}, sandbox.KindRuntime},
		{"unknown tool", `await tools.nope.thing({})`, []string{`unknown tool "nope.thing"`}, []string{}, sandbox.KindRuntime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, sc := call(t, cs, "execute", map[string]any{"code": tc.code})
			txt := text(res)
			if !res.IsError || !strings.HasPrefix(txt, "Error: ") || strings.Contains(txt, "Internal tool error") {
				t.Fatalf("want a described isError, got %v %q", res.IsError, txt)
			}
			for _, w := range tc.want {
				if !strings.Contains(txt, w) {
					t.Fatalf("text %q lacks %q", txt, w)
				}
			}
			msg, _ := sc["error"].(string)
			if sc["status"] != "error" || msg == "" || !strings.HasPrefix(txt, "Error: "+msg) || !jsonEqual(t, sc["logs"], tc.logs) {
				t.Fatalf("structured %v", sc)
			}
			if sc["errorKind"] != tc.kind || sc["retryable"] != false || sc["limit"] != nil {
				t.Fatalf("errorKind %v retryable %v, want %s, false", sc["errorKind"], sc["retryable"], tc.kind)
			}
		})
	}
}

// A refusal because a running-executions cap was full says so in the
// structured content: errorKind busy, retryable (nothing ran).
func TestBusyIsRetryable(t *testing.T) {
	res := codemode.Failed(engine.Outcome{Status: engine.StatusError, Error: "org/a is already running its maximum of 2 executions at once; nothing ran", ErrorKind: sandbox.KindBusy})
	sc, _ := res.StructuredContent.(map[string]any)
	if !res.IsError || sc["errorKind"] != sandbox.KindBusy || sc["retryable"] != true {
		t.Fatalf("busy: %+v", sc)
	}
}

// An infrastructure failure (here: the session's engine was shut down, as
// when the runtime is disposed) is opaque to the user: a correlation id
// that the log carries with the cause.
func TestInternalFailureIsOpaque(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	h.eng.Shutdown()
	res, sc := call(t, cs, "execute", map[string]any{"code": "return 1"})
	txt := text(res)
	m := regexp.MustCompile(`^Error: Internal tool error \[([0-9a-f]{8})\]$`).FindStringSubmatch(txt)
	if !res.IsError || m == nil {
		t.Fatalf("want an opaque internal error, got %v %q", res.IsError, txt)
	}
	if !jsonEqual(t, sc, map[string]any{"status": "error", "error": "Internal tool error [" + m[1] + "]"}) {
		t.Fatalf("structured %v", sc)
	}
	logged := h.logs.String()
	if !strings.Contains(logged, `"correlation":"`+m[1]+`"`) || !strings.Contains(logged, engine.ErrClosed.Error()) {
		t.Fatalf("the log does not carry the correlation id and cause: %s", logged)
	}
}

// Regression (CI chaos, graceful stop): an execution whose journal write
// was fenced — its session had moved to another node mid-execution —
// answered "Internal tool error", which a client does not retry. The
// session lives on and nothing of the execution is durable, so the answer
// is the restart envelope's retryable JSON-RPC error. The fence is real:
// a SQLite store whose grain another activation has taken since.
func TestExecutionFencedByASessionMoveAnswersRestarting(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	stale, err := st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Acquire(context.Background(), "session/s1", "n2"); err != nil { // the session moved on
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{journal: engine.StoreJournal{Store: runstore.New(st), Grain: "session/s1", Epoch: stale.Epoch}})
	cs := h.connect(t, clientOptions{})
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{
		"code": `return await tools.shop.order({item: "pear"})`}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32001 || !strings.Contains(rpcErr.Message, "restarting") {
		t.Fatalf("execute on a moved session: %v, want the -32001 restart error", err)
	}
	if got := h.shop.placed(); len(got) != 0 {
		t.Fatalf("orders %v: the write ran", got)
	}

	// A fresh execute whose store stays unreachable past the journal's
	// deadline is retryable too. (The outage is injected: a unit test
	// cannot line a journal write up with a real database restart.)
	h = newHarness(t, harnessOptions{journal: engine.StoreJournal{Store: downStore{runstore.New(st)}, Grain: "session/s1", Epoch: stale.Epoch + 1}})
	cs = h.connect(t, clientOptions{})
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{
		"code": `return await tools.shop.order({item: "pear"})`}})
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32001 {
		t.Fatalf("execute with the store down: %v, want the -32001 restart error", err)
	}
}

// downStore is a store whose journal writes fail as an unreachable one's do.
type downStore struct{ engine.RunStore }

func (downStore) WriteRun(context.Context, string, uint64, runstore.RunWrite) error {
	return fmt.Errorf("%w: connection refused", store.ErrUnavailable)
}

func TestModelModePausePayload(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		ttl    string
	}{
		{4 * time.Minute, "4 minutes"},
		{time.Minute, "1 minute"},
		{90 * time.Second, "90 seconds"},
	} {
		t.Run(tc.ttl, func(t *testing.T) {
			h := newHarness(t, harnessOptions{window: tc.window})
			cs := h.connect(t, clientOptions{})
			res, sc := call(t, cs, "execute", map[string]any{"code": orderTea})
			id, _ := sc["executionId"].(string)
			if res.IsError || sc["status"] != "waiting_for_interaction" || !strings.HasPrefix(id, "exec_") {
				t.Fatalf("execute: %s / %v", text(res), sc)
			}
			expires := epoch.Add(tc.window).UTC().Format(time.RFC3339)
			if sc["expiresAt"] != expires || sc["ttlMs"] != float64(tc.window.Milliseconds()) {
				t.Fatalf("expiresAt %v ttlMs %v, want %s %d", sc["expiresAt"], sc["ttlMs"], expires, tc.window.Milliseconds())
			}
			in, _ := sc["interaction"].(map[string]any)
			instructions, _ := in["instructions"].(string)
			message, _ := in["message"].(string)
			if in["kind"] != "form" || in["address"] != "shop.order" ||
				!strings.HasPrefix(message, "Approve shop.order?") || !strings.Contains(message, `"tea"`) ||
				!jsonEqual(t, in["requestedSchema"], map[string]any{"type": "object", "properties": map[string]any{}}) ||
				!strings.HasSuffix(instructions, " Resume before "+expires+"; this approval window lasts "+tc.ttl+".") {
				t.Fatalf("interaction %v", in)
			}
			txt := text(res)
			for _, w := range []string{
				"Execution paused: Approve shop.order?",
				"model-side confirmation gate; no browser form is waiting",
				"\nexecutionId: " + id,
				"\nresumeDeadline: " + expires + " (" + tc.ttl + " approval window)",
				"\ninstructions: " + instructions,
			} {
				if !strings.Contains(txt, w) {
					t.Fatalf("text lacks %q:\n%s", w, txt)
				}
			}
			if _, live := h.eng.Paused(id, engine.System); !live || len(h.shop.placed()) != 0 {
				t.Fatalf("paused %v, orders %v: the call ran before approval", live, h.shop.placed())
			}
			if got := h.hooks.list(); !slices.Equal(got, []string{"pause:" + id}) {
				t.Fatalf("hooks %v", got)
			}
		})
	}
}

func TestModelResumeSettlesLocallyWithoutForward(t *testing.T) {
	for _, tc := range []struct {
		action  string
		isError bool
		want    string // text of the final result
		orders  int
	}{
		{engine.Accept, false, "tea", 1},
		{engine.Decline, true, "The call to shop.order was declined by the user", 0},
		{engine.Cancel, true, "The call to shop.order was cancelled", 0},
	} {
		t.Run(tc.action, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			cs := h.connect(t, clientOptions{})
			id := pauseModel(t, cs, orderTea)
			res, sc := call(t, cs, "resume", map[string]any{"executionId": id, "action": tc.action})
			if res.IsError != tc.isError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("resume: %v %q", res.IsError, text(res))
			}
			if !tc.isError && (sc["status"] != "completed" || sc["result"] != "tea") {
				t.Fatalf("structured %v", sc)
			}
			if n := len(h.shop.placed()); n != tc.orders {
				t.Fatalf("%d orders, want %d", n, tc.orders)
			}
			if f := h.rt.forwarded(); len(f) != 0 {
				t.Fatalf("a local resume was forwarded: %+v", f)
			}
			want := []string{"pause:" + id, "resume-start:" + id, "resume-settle:" + id}
			if got := h.hooks.list(); !slices.Equal(got, want) {
				t.Fatalf("hooks %v, want %v", got, want)
			}
		})
	}
}

func TestLifecycleOrderAcrossTwoApprovals(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	e1 := pauseModel(t, cs, orderTwo)
	res, sc := call(t, cs, "resume", map[string]any{"executionId": e1, "action": "accept"})
	e2, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "waiting_for_interaction" || e2 == "" || e2 == e1 {
		t.Fatalf("first resume: want a second pause, got %s / %v", text(res), sc)
	}
	want := []string{"pause:" + e1, "resume-start:" + e1, "resume-settle:" + e1, "pause:" + e2}
	if got := h.hooks.list(); !slices.Equal(got, want) {
		t.Fatalf("hooks %v\nwant %v", got, want)
	}
	res, sc = call(t, cs, "resume", map[string]any{"executionId": e2, "action": "accept"})
	if res.IsError || !jsonEqual(t, sc["result"], []int{1, 2}) {
		t.Fatalf("second resume: %s / %v", text(res), sc)
	}
	want = append(want, "resume-start:"+e2, "resume-settle:"+e2)
	if got := h.hooks.list(); !slices.Equal(got, want) {
		t.Fatalf("hooks %v\nwant %v", got, want)
	}
	if got := h.shop.placed(); !slices.Equal(got, []string{"tea", "cake"}) {
		t.Fatalf("orders %v", got)
	}
}

// The parsed content is observed where it leaves the tool: a resume of an
// id this session does not hold goes to Forward with the decision (the
// engine itself ignores content for confirmation gates).
func TestResumeContentParsing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	h.rt.setForward(nil, codemode.NotFound)
	for i, tc := range []struct {
		name, content string
		want          map[string]any
	}{
		{"omitted", "", nil},
		{"empty object", "{}", nil},
		{"object", `{"note": "hi", "n": 2}`, map[string]any{"note": "hi", "n": float64(2)}},
		{"array", `[1, 2]`, nil},
		{"invalid JSON", `{not json`, nil},
		{"string", `"text"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"executionId": orderUnknown, "action": "accept"}
			if tc.content != "" {
				args["content"] = tc.content
			}
			res, sc := call(t, cs, "resume", args)
			if !res.IsError || sc["status"] != "execution_not_found" {
				t.Fatalf("want the miss (content is never an error), got %s / %v", text(res), sc)
			}
			f := h.rt.forwarded()
			if len(f) != i+1 {
				t.Fatalf("%d forwards, want %d", len(f), i+1)
			}
			last := f[i]
			if last.id != orderUnknown || last.who != alice || last.resp.Action != engine.Accept || !reflect.DeepEqual(last.resp.Content, tc.want) {
				t.Fatalf("forwarded %+v, want content %v", last, tc.want)
			}
		})
	}
}

// A resume of an id this session does not hold asks Forward (executor's
// resumeFallback) and reports what it says.
func TestResumeMisses(t *testing.T) {
	owner := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "from the owner"}},
		StructuredContent: map[string]any{"status": "completed", "result": "owner", "logs": []any{}},
	}
	for _, tc := range []struct {
		name     string
		window   time.Duration
		res      *mcp.CallToolResult
		miss     codemode.Miss
		isError  bool
		status   string
		text     []string
		ttlMs    any // nil: absent
		recovery any // nil: absent
	}{
		{"not found", 0, nil, codemode.NotFound, true, "execution_not_found",
			[]string{"No paused execution " + orderUnknown + " was found.", "run the execute tool again with the original code"}, nil, "re_execute"},
		{"fallback failure", 0, nil, "", true, "execution_not_found",
			[]string{"No paused execution " + orderUnknown + " was found."}, nil, "re_execute"},
		{"expired", 0, nil, codemode.Expired, true, "execution_expired",
			[]string{"Approval windows last 4 minutes", "run the execute tool again with the original code"}, float64(240000), "re_execute"},
		{"expired, 1 minute window", time.Minute, nil, codemode.Expired, true, "execution_expired",
			[]string{"Approval windows last 1 minute;"}, float64(60000), "re_execute"},
		{"forbidden", 0, nil, codemode.Forbidden, true, "execution_forbidden",
			[]string{"Resume must be called by the same account and organization that owns the paused session."}, nil, nil},
		{"already settled at the owner", 0, nil, codemode.AlreadySettled, true, "execution_already_settled",
			[]string{"was already resumed and has settled", "Do not run the code again"}, nil, nil},
		{"owner's result passed through", 0, owner, "", false, "completed", []string{"from the owner"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{window: tc.window})
			cs := h.connect(t, clientOptions{})
			h.rt.setForward(tc.res, tc.miss)
			res, sc := call(t, cs, "resume", map[string]any{"executionId": orderUnknown, "action": "accept"})
			txt := text(res)
			if res.IsError != tc.isError || sc["status"] != tc.status {
				t.Fatalf("resume: %v %q / %v", res.IsError, txt, sc)
			}
			for _, w := range tc.text {
				if !strings.Contains(txt, w) {
					t.Fatalf("text %q lacks %q", txt, w)
				}
			}
			if tc.isError && (sc["executionId"] != orderUnknown || sc["ttlMs"] != tc.ttlMs || sc["recovery"] != tc.recovery) {
				t.Fatalf("structured %v, want ttlMs %v recovery %v", sc, tc.ttlMs, tc.recovery)
			}
			if f := h.rt.forwarded(); len(f) != 1 || f[0].id != orderUnknown || f[0].who != alice || f[0].resp.Action != engine.Accept {
				t.Fatalf("forwards %+v, want one for %s", f, orderUnknown)
			}
		})
	}
}

// A settled id replays its outcome while it is among the last 64 settled
// outcomes; after that it is execution_already_settled (from the last 1,024
// settled ids). Neither is forwarded.
func TestSettledIDsReplayThenReportAlreadySettled(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	id := pauseModel(t, cs, orderTea)
	first, _ := call(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	again, sc := call(t, cs, "resume", map[string]any{"executionId": id, "action": "decline"})
	if again.IsError || sc["status"] != "completed" || sc["result"] != "tea" || text(again) != text(first) {
		t.Fatalf("replay: %s / %v", text(again), sc)
	}
	// A browser-mode resume without a decision replays it too.
	browser := h.connect(t, clientOptions{mode: "browser"})
	h.rt.decisions <- decision{}
	res, sc := call(t, browser, "resume", map[string]any{"executionId": id})
	if res.IsError || sc["status"] != "completed" || text(res) != text(first) {
		t.Fatalf("browser replay: %s / %v", text(res), sc)
	}
	if n := len(h.shop.placed()); n != 1 {
		t.Fatalf("%d orders: the replay ran the call again", n)
	}
	// Settle 64 more, pushing id out of the replay cache.
	for i := range 64 {
		out := h.eng.ExecuteWithPause(t.Context(), fmt.Sprintf(`return (await tools.shop.order({item: "filler %d"})).id`, i), alice)
		if out.Status != engine.StatusPaused {
			t.Fatalf("filler %d: %+v", i, out)
		}
		if out, _ := h.eng.Resume(t.Context(), out.Pause.ID, engine.System, engine.Response{Action: engine.Accept}); out.Status != engine.StatusCompleted {
			t.Fatalf("filler %d: %+v", i, out)
		}
	}
	res, sc = call(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if !res.IsError || sc["status"] != "execution_already_settled" || sc["recovery"] != nil || sc["executionId"] != id ||
		!strings.Contains(text(res), "was already resumed and has settled") || strings.Contains(text(res), "run the execute tool again") {
		t.Fatalf("evicted settled id: %s / %v", text(res), sc)
	}
	// The same through a browser-mode resume without a decision.
	h.rt.decisions <- decision{}
	res, sc = call(t, browser, "resume", map[string]any{"executionId": id})
	if !res.IsError || sc["status"] != "execution_already_settled" {
		t.Fatalf("browser resume of an evicted settled id: %s / %v", text(res), sc)
	}
	if f := h.rt.forwarded(); len(f) != 0 {
		t.Fatalf("settled ids were forwarded: %+v", f)
	}
	if n := len(h.shop.placed()); n != 65 {
		t.Fatalf("%d orders, want 65", n)
	}
}

func TestInvalidInputs(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{})
	id := pauseModel(t, cs, orderTea)
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"empty code", "execute", map[string]any{"code": ""}, "Error: code must not be empty"},
		{"blank code", "execute", map[string]any{"code": " \n\t "}, "Error: code must not be empty"},
		{"resume without executionId", "resume", map[string]any{"executionId": "", "action": "accept"}, "Error: executionId is required"},
		{"resume with a blank executionId", "resume", map[string]any{"executionId": "  ", "action": "accept"}, "Error: executionId is required"},
		{"resume with a bad action", "resume", map[string]any{"executionId": id, "action": "approve"}, "Error: action must be accept, decline or cancel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := call(t, cs, tc.tool, tc.args)
			if !res.IsError || text(res) != tc.want {
				t.Fatalf("got %v %q, want isError %q", res.IsError, text(res), tc.want)
			}
		})
	}
	if _, live := h.eng.Paused(id, engine.System); !live || len(h.shop.placed()) != 0 || len(h.rt.forwarded()) != 0 {
		t.Fatalf("invalid calls changed state: paused %v orders %v forwards %v", live, h.shop.placed(), h.rt.forwarded())
	}
	if got := h.hooks.list(); !slices.Equal(got, []string{"pause:" + id}) {
		t.Fatalf("hooks %v", got)
	}
}

// elicitCounter is a client elicitation handler that records the prompts
// and answers with action.
type elicitCounter struct {
	mu       sync.Mutex
	messages []string
	schemas  []any
	action   string
}

func (e *elicitCounter) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.messages = append(e.messages, req.Params.Message)
	e.schemas = append(e.schemas, req.Params.RequestedSchema)
	return &mcp.ElicitResult{Action: e.action}, nil
}

func (e *elicitCounter) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.messages)
}

func TestBrowserModePausePayload(t *testing.T) {
	for _, tc := range []struct {
		name, publicURL, host, origin string
	}{
		{"origin from the request", "", "mcp.example.test", "http://mcp.example.test"},
		{"PublicURL overrides it", "https://approvals.example.com/", "mcp.example.test", "https://approvals.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{publicURL: tc.publicURL})
			// The client could answer an elicitation: browser mode must not use it.
			el := &elicitCounter{action: "accept"}
			cs := h.connect(t, clientOptions{mode: "browser", host: tc.host, elicit: el.handle})
			res, sc := call(t, cs, "execute", map[string]any{"code": orderTea})
			id, _ := sc["executionId"].(string)
			wantURL := tc.origin + "/approve/" + id
			if res.IsError || sc["status"] != "user_approval_required" || !strings.HasPrefix(id, "exec_") || sc["approvalUrl"] != wantURL {
				t.Fatalf("execute: %s / %v, want approvalUrl %s", text(res), sc, wantURL)
			}
			prompt, _ := sc["resumePrompt"].(string)
			if !strings.HasPrefix(prompt, "Return text to the user telling them to approve the action at this approvalUrl.") ||
				!strings.Contains(prompt, "call the `resume` tool with this executionId") {
				t.Fatalf("resumePrompt %q", prompt)
			}
			wantText := "User approval required.\n\nTell the user to open this URL while signed in and approve or decline the paused interaction:\n" +
				wantURL + "\n\nRequired next steps for this agent:\n" + prompt
			if text(res) != wantText {
				t.Fatalf("text %q\nwant %q", text(res), wantText)
			}
			if n := len(el.seen()); n != 0 {
				t.Fatalf("browser mode switched to native: %d elicitations", n)
			}
			if _, live := h.eng.Paused(id, engine.System); !live || len(h.shop.placed()) != 0 {
				t.Fatal("the pause is not live, or the call ran")
			}
		})
	}
}

func TestBrowserModeResume(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	el := &elicitCounter{action: "accept"}
	cs := h.connect(t, clientOptions{mode: "browser", elicit: el.handle})
	_, sc := call(t, cs, "execute", map[string]any{"code": orderTwo})
	e1, _ := sc["executionId"].(string)

	// No decision: user_approval_required again, and the engine is not resumed.
	h.rt.decisions <- decision{}
	res, sc := call(t, cs, "resume", map[string]any{"executionId": e1})
	if res.IsError || !strings.HasPrefix(text(res), "User approval required.") || sc["status"] != "user_approval_required" ||
		sc["executionId"] != e1 || sc["approvalUrl"] != "http://mcp.example.test/approve/"+e1 {
		t.Fatalf("resume without a decision: %s / %v", text(res), sc)
	}
	if got := h.hooks.list(); !slices.Equal(got, []string{"pause:" + e1}) {
		t.Fatalf("the engine was resumed: hooks %v", got)
	}

	// An approved decision: consumed, and the next pause is shown the browser way.
	h.rt.decisions <- decision{resp: engine.Response{Action: engine.Accept}, ok: true}
	res, sc = call(t, cs, "resume", map[string]any{"executionId": e1})
	e2, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "user_approval_required" || e2 == e1 || sc["approvalUrl"] != "http://mcp.example.test/approve/"+e2 {
		t.Fatalf("resume after approval: want the next browser pause, got %s / %v", text(res), sc)
	}
	h.rt.decisions <- decision{resp: engine.Response{Action: engine.Accept}, ok: true}
	res, sc = call(t, cs, "resume", map[string]any{"executionId": e2})
	if res.IsError || sc["status"] != "completed" || !jsonEqual(t, sc["result"], []int{1, 2}) {
		t.Fatalf("final resume: %s / %v", text(res), sc)
	}
	if got := h.rt.waitedFor(); !slices.Equal(got, []string{e1, e1, e2}) {
		t.Fatalf("WaitDecision asked for %v", got)
	}
	if len(el.seen()) != 0 || len(h.rt.forwarded()) != 0 || len(h.shop.placed()) != 2 {
		t.Fatalf("elicitations %v forwards %v orders %v", el.seen(), h.rt.forwarded(), h.shop.placed())
	}

	// A declined decision fails the call inside the code.
	id := pauseBrowser(t, cs, orderTea)
	h.rt.decisions <- decision{resp: engine.Response{Action: engine.Decline}, ok: true}
	res, _ = call(t, cs, "resume", map[string]any{"executionId": id})
	if !res.IsError || !strings.Contains(text(res), "The call to shop.order was declined by the user") {
		t.Fatalf("declined: %s", text(res))
	}
	if len(h.shop.placed()) != 2 {
		t.Fatalf("orders %v after a decline", h.shop.placed())
	}
}

func pauseBrowser(t *testing.T, cs *mcp.ClientSession, code string) string {
	t.Helper()
	res, sc := call(t, cs, "execute", map[string]any{"code": code})
	id, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "user_approval_required" || id == "" {
		t.Fatalf("execute: want a browser pause, got %s / %v", text(res), sc)
	}
	return id
}

// A browser-mode resume without a decision for an id that is not paused
// here must not decide it anywhere: forwarding it would send a cancel to the
// owning session and kill a live pause nobody decided.
func TestBrowserResumeWithoutDecisionNeverForwards(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{mode: "browser"})
	h.rt.setForward(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "owner cancelled"}}}, "")
	h.rt.decisions <- decision{}
	res, sc := call(t, cs, "resume", map[string]any{"executionId": orderUnknown})
	if f := h.rt.forwarded(); len(f) != 0 {
		t.Fatalf("a resume without a decision was forwarded: %+v", f)
	}
	if !res.IsError || sc["status"] != "execution_not_found" || sc["recovery"] != "re_execute" {
		t.Fatalf("resume: %s / %v", text(res), sc)
	}
	// With a decision, the owner is asked.
	h.rt.decisions <- decision{resp: engine.Response{Action: engine.Accept}, ok: true}
	res, _ = call(t, cs, "resume", map[string]any{"executionId": orderUnknown})
	if f := h.rt.forwarded(); len(f) != 1 || f[0].resp.Action != engine.Accept || text(res) != "owner cancelled" {
		t.Fatalf("forwards %+v, result %q", f, text(res))
	}
}

func TestNativeMode(t *testing.T) {
	for _, tc := range []struct {
		name, action, code string
		isError            bool
		want               string
		elicitations       int
		orders             []string
	}{
		{"accept", "accept", orderTea, false, "tea", 1, []string{"tea"}},
		{"client decline reaches the engine", "decline", orderTea, true, "The call to shop.order was declined by the user", 1, nil},
		{"client cancel", "cancel", orderTea, true, "The call to shop.order was cancelled", 1, nil},
		{"two approvals in one execute", "accept", orderTwo, false, "[\n  1,\n  2\n]", 2, []string{"tea", "cake"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			el := &elicitCounter{action: tc.action}
			cs := h.connect(t, clientOptions{mode: "native", elicit: el.handle})
			res, sc := call(t, cs, "execute", map[string]any{"code": tc.code})
			if res.IsError != tc.isError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("execute: %v %q", res.IsError, text(res))
			}
			if !tc.isError && sc["status"] != "completed" {
				t.Fatalf("structured %v", sc)
			}
			msgs := el.seen()
			if len(msgs) != tc.elicitations {
				t.Fatalf("%d elicitations, want %d", len(msgs), tc.elicitations)
			}
			for _, m := range msgs {
				if !strings.HasPrefix(m, "Approve shop.order?") {
					t.Fatalf("elicitation message %q", m)
				}
			}
			el.mu.Lock()
			schema := el.schemas[0]
			el.mu.Unlock()
			if !jsonEqual(t, schema, map[string]any{"type": "object", "properties": map[string]any{}}) {
				t.Fatalf("requested schema %v", schema)
			}
			if got := h.shop.placed(); !slices.Equal(got, tc.orders) {
				t.Fatalf("orders %v, want %v", got, tc.orders)
			}
			if h.eng.PausedCount() != 0 || len(h.rt.forwarded()) != 0 {
				t.Fatal("a pause was left behind, or a resume forwarded")
			}
			// Every pause was resumed and settled, in executor's order.
			ev := h.hooks.list()
			if len(ev) != 3*tc.elicitations {
				t.Fatalf("hooks %v", ev)
			}
			for i := 0; i < len(ev); i += 3 {
				id := strings.TrimPrefix(ev[i], "pause:")
				if !slices.Equal(ev[i:i+3], []string{"pause:" + id, "resume-start:" + id, "resume-settle:" + id}) {
					t.Fatalf("hooks %v", ev)
				}
			}
		})
	}
}

func TestNativeElicitationFailure(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, clientOptions{mode: "native"}) // no elicitation capability
	res, sc := call(t, cs, "execute", map[string]any{"code": orderTea})
	ev := h.hooks.list()
	if len(ev) == 0 || !strings.HasPrefix(ev[0], "pause:") {
		t.Fatalf("hooks %v: no pause", ev)
	}
	id := strings.TrimPrefix(ev[0], "pause:")
	want := "Error: Native elicitation transport failed [" + id[len(id)-8:] + "]. Reconnect the MCP client and try again."
	if !res.IsError || text(res) != want || !jsonEqual(t, sc, map[string]any{"status": "error", "errorCode": "native_elicitation_transport_failed"}) {
		t.Fatalf("got %v %q / %v\nwant %q", res.IsError, text(res), sc, want)
	}
	// The execution does not linger: it was ended, and the call never ran.
	if h.eng.PausedCount() != 0 || len(h.shop.placed()) != 0 {
		t.Fatalf("paused %d orders %v", h.eng.PausedCount(), h.shop.placed())
	}
	if got := ev; !slices.Equal(got, []string{"pause:" + id, "resume-start:" + id, "resume-settle:" + id}) {
		t.Fatalf("hooks %v", got)
	}
}

// The session's engine shuts down (the runtime is disposed) while the
// native elicitation is with the user: the accepted answer finds no
// execution, and the tool reports that instead of crashing.
func TestNativeAnswerAfterShutdown(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	asked := make(chan struct{})
	answer := make(chan struct{})
	cs := h.connect(t, clientOptions{mode: "native", elicit: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		close(asked)
		select {
		case <-answer:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	go func() {
		<-asked
		h.eng.Shutdown()
		close(answer)
	}()
	res, sc := call(t, cs, "execute", map[string]any{"code": orderTea})
	if !res.IsError || sc["status"] != "execution_not_found" || sc["recovery"] != "re_execute" {
		t.Fatalf("got %v %q / %v", res.IsError, text(res), sc)
	}
	if len(h.shop.placed()) != 0 {
		t.Fatalf("orders %v after shutdown", h.shop.placed())
	}
}

func TestSessionless(t *testing.T) {
	t.Run("pause, then a retry with the approval", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			response mcp.InputResponseMap
			isError  bool
			want     string
			orders   int
		}{
			{"accept", mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}, false, "tea", 1},
			{"decline", mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "decline"}}, true, "The call to shop.order was declined by the user", 0},
			{"no approval response cancels", mcp.InputResponseMap{"other": &mcp.ElicitResult{Action: "accept"}}, true, "The call to shop.order was cancelled", 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t, harnessOptions{})
				cs := h.connect(t, clientOptions{sessionless: true})
				if cs.ID() != "" {
					t.Fatalf("sessionless client has session %q", cs.ID())
				}
				first, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": orderTea}})
				if err != nil {
					t.Fatal(err)
				}
				ask, _ := first.InputRequests["approval"].(*mcp.ElicitParams)
				if !first.NeedsInput() || len(first.InputRequests) != 1 || ask == nil || !strings.HasPrefix(ask.Message, "Approve shop.order?") ||
					len(first.Content) != 0 {
					t.Fatalf("execute: want input_required with an approval request, got %+v", first)
				}
				id := first.RequestState
				if got := h.hooks.list(); !strings.HasPrefix(id, "exec_") || !slices.Equal(got, []string{"pause:" + id}) {
					t.Fatalf("requestState %q, hooks %v", id, got)
				}
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": orderTea},
					InputResponses: tc.response, RequestState: id})
				if err != nil {
					t.Fatal(err)
				}
				if res.NeedsInput() || res.IsError != tc.isError || !strings.Contains(text(res), tc.want) {
					t.Fatalf("retry: %v %q", res.IsError, text(res))
				}
				if n := len(h.shop.placed()); n != tc.orders {
					t.Fatalf("%d orders, want %d", n, tc.orders)
				}
			})
		}
	})
	t.Run("unknown requestState", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		cs := h.connect(t, clientOptions{sessionless: true})
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": orderTea},
			InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}, RequestState: orderUnknown})
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		if !res.IsError || sc["status"] != "execution_not_found" || len(h.shop.placed()) != 0 || len(h.hooks.list()) != 0 {
			t.Fatalf("got %q / %v, orders %v hooks %v", text(res), sc, h.shop.placed(), h.hooks.list())
		}
	})
	t.Run("go-sdk's client answers both approvals itself", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		el := &elicitCounter{action: "accept"}
		cs := h.connect(t, clientOptions{sessionless: true, autoMRTR: true, elicit: el.handle})
		res, sc := call(t, cs, "execute", map[string]any{"code": orderTwo})
		if res.IsError || sc["status"] != "completed" || !jsonEqual(t, sc["result"], []int{1, 2}) {
			t.Fatalf("execute: %s / %v", text(res), sc)
		}
		if n := len(el.seen()); n != 2 {
			t.Fatalf("%d elicitations, want 2", n)
		}
		if got := h.shop.placed(); !slices.Equal(got, []string{"tea", "cake"}) {
			t.Fatalf("orders %v", got)
		}
	})
}

// A role that may not decide (a viewer) cannot approve its own pause from
// inside its MCP session either: not with the model's resume, not through
// a native elicitation (it gets the approval link instead), not with a
// 2026-07-28 retry. Nothing is decided; an approver still can.
func TestViewersCannotDecideFromTheirSession(t *testing.T) {
	h := newHarness(t, harnessOptions{publicURL: "https://approve.example.test"})
	viewer := h.connect(t, clientOptions{role: "viewer"})
	_, sc := call(t, viewer, "execute", map[string]any{"code": orderTea})
	id, _ := sc["executionId"].(string)
	if sc["status"] != "waiting_for_interaction" || id == "" {
		t.Fatalf("execute: %v", sc)
	}
	for _, action := range []string{"accept", "decline", "cancel"} {
		res, sc := call(t, viewer, "resume", map[string]any{"executionId": id, "action": action})
		if !res.IsError || sc["status"] != "insufficient_role" || sc["approvalUrl"] != "https://approve.example.test/approve/"+id {
			t.Fatalf("viewer's %s: %v", action, sc)
		}
	}
	if _, live := h.eng.Paused(id, engine.System); !live || len(h.shop.placed()) != 0 {
		t.Fatalf("a viewer's resume decided: live %v, %d orders", live, len(h.shop.placed()))
	}

	asked := false
	native := h.connect(t, clientOptions{role: "viewer", mode: "native", elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = true
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	_, sc = call(t, native, "execute", map[string]any{"code": orderTea})
	if asked || sc["status"] != "user_approval_required" {
		t.Fatalf("native viewer: asked %v, %v", asked, sc)
	}

	sessionless := h.connect(t, clientOptions{role: "viewer", sessionless: true})
	first, err := sessionless.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": orderTea}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("sessionless execute: %+v %v", first, err)
	}
	retry, err := sessionless.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": orderTea},
		RequestState: first.RequestState, InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}})
	if sc, _ := retry.StructuredContent.(map[string]any); err != nil || !retry.IsError || sc["status"] != "insufficient_role" {
		t.Fatalf("sessionless viewer's retry: %+v %v", retry, err)
	}
	if len(h.shop.placed()) != 0 {
		t.Fatalf("%d orders after the viewer's attempts", len(h.shop.placed()))
	}
	// A member decides.
	member := h.connect(t, clientOptions{})
	if res, sc := call(t, member, "resume", map[string]any{"executionId": id, "action": "accept"}); res.IsError || sc["status"] != "completed" {
		t.Fatalf("member's accept: %v", sc)
	}
}
