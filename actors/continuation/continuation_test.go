package continuation

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func noTools(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
	return mcp.NewServer(&mcp.Implementation{Name: "t"}, opts), func() {}, nil
}

func testHost(t *testing.T, cfg Config) *Host {
	t.Helper()
	if cfg.NewServer == nil {
		cfg.NewServer = noTools
	}
	if cfg.Key == nil {
		cfg.Key = testKey
	}
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// A host refuses a configuration it cannot serve with: no server, a short
// state key, durable code mode without a store.
func TestNewHostRefusesAnIncompleteConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no server", Config{Key: testKey}},
		{"short key", Config{NewServer: noTools, Key: []byte("short")}},
		{"durable code mode without a store", Config{NewServer: noTools, Key: testKey, CodeMode: &mcpruntime.CodeMode{Durable: true}}},
	} {
		if _, err := NewHost(tc.cfg); err == nil {
			t.Errorf("%s: NewHost succeeded", tc.name)
		}
	}
}

// Continuation grains are ephemeral unless code mode is durable or they
// keep the SDK's durable tool calls; then they are written into existence
// by their first exchange.
func TestKindIsEphemeralUnlessCodeModeIsDurable(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, tc := range []struct {
		name                    string
		cfg                     Config
		ephemeral, createdWrite bool
	}{
		{"no code mode", Config{}, true, false},
		{"code mode in memory", Config{CodeMode: &mcpruntime.CodeMode{}}, true, false},
		{"durable code mode", Config{CodeMode: &mcpruntime.CodeMode{Durable: true}}, false, true},
		{"the SDK's durable tool calls", Config{Calls: st}, false, true},
	} {
		cfg := tc.cfg
		h := &Host{cfg: cfg}
		k := h.Kind()
		if k.Name != KindName || k.Ephemeral != tc.ephemeral || k.CreatedByWrite != tc.createdWrite || k.New == nil {
			t.Errorf("%s: kind %+v, want ephemeral %v, created by write %v", tc.name, k, tc.ephemeral, tc.createdWrite)
		}
	}
}

// A continuation grain answers what needs no exchange directly: an
// unknown decision action is rejected; a decision on a node without
// durable code mode finds nothing (its pauses are not published); a
// catalog change is applied when the node takes them and refused
// otherwise; an unknown cancel is acknowledged; any other message is
// rejected.
func TestGrainAnswersRequestsThatNeedNoExchange(t *testing.T) {
	var applied []string
	apply := func(name string) error {
		if name == "broken" {
			return errors.New("no such pack")
		}
		applied = append(applied, name)
		return nil
	}
	withCatalog := testHost(t, Config{ApplyCatalogChange: apply})
	plain := testHost(t, Config{CodeMode: &mcpruntime.CodeMode{}})
	for _, tc := range []struct {
		name   string
		h      *Host
		msg    proto.Message
		reject bool
		want   proto.Message
	}{
		{"unknown action", plain, &pb.ExecutionDecide{ExecutionId: "exec_1", Action: "approve"}, true, nil},
		{"decision without durable code mode", plain, &pb.ExecutionDecide{ExecutionId: "exec_1", Action: "accept"}, false,
			&pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_NOT_FOUND}},
		{"catalog change applied", withCatalog, &pb.CatalogChange{Name: "petstore"}, false, &pb.CatalogChanged{}},
		{"catalog change that fails", withCatalog, &pb.CatalogChange{Name: "broken"}, true, nil},
		{"catalog change on a node that takes none", plain, &pb.CatalogChange{Name: "petstore"}, true, nil},
		{"cancel of an unknown exchange", plain, &pb.ExchangeCancel{ExchangeId: "x"}, false, &pb.ExchangeCancelled{}},
		{"unsupported message", plain, &pb.ExchangeStarted{}, true, nil},
	} {
		c := tc.h.Kind().New("g1").(*cont)
		// These requests never reach the grain context: nil stands for it.
		reply, err := c.Receive(context.Background(), nil, tc.msg)
		if tc.reject {
			if ge, ok := grain.AsError(err); !ok || ge.Code != pb.GrainError_CODE_REJECTED || reply != nil {
				t.Errorf("%s: %v / %v, want a rejection", tc.name, reply, err)
			}
			continue
		}
		if err != nil || !proto.Equal(reply, tc.want) {
			t.Errorf("%s: %v / %v, want %v", tc.name, reply, err, tc.want)
		}
	}
	if fmt.Sprint(applied) != "[petstore]" {
		t.Errorf("catalog changes applied: %v, want [petstore]", applied)
	}
}

// A grain that cannot be prepared answers with what its caller can act
// on: a lost grain or an unreachable store as such (the activation then
// stops or the caller retries), anything else as unavailable.
func TestEnsureErrorKeepsFencedAndUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantIs  error // nil: a grain error with wantCode
		wantCod pb.GrainError_Code
	}{
		{"fenced", fmt.Errorf("own: %w", store.ErrFenced), store.ErrFenced, 0},
		{"store unavailable", fmt.Errorf("own: %w", store.ErrUnavailable), store.ErrUnavailable, 0},
		{"other", errors.New("engine: boom"), nil, pb.GrainError_CODE_UNAVAILABLE},
	} {
		got := ensureError(tc.err)
		if tc.wantIs != nil {
			if !errors.Is(got, tc.wantIs) {
				t.Errorf("%s: %v, want it to stay %v", tc.name, got, tc.wantIs)
			}
			continue
		}
		if ge, ok := grain.AsError(got); !ok || ge.Code != tc.wantCod {
			t.Errorf("%s: %v, want a grain error with code %v", tc.name, got, tc.wantCod)
		}
	}
}

// The continuation server's middleware hands a tool only its own state
// from a requestState sealed for this grain, principal and time, refuses
// every other one before the tool runs, and seals the state a tool
// returns with an input request (owner grain, principal, expiry).
func TestStateMiddlewareVerifiesAndSignsRequestState(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	h := testHost(t, Config{Now: func() time.Time { return now }, StateTTL: time.Minute})
	sign := func(owner, user, org string, expires time.Time) string {
		return requeststate.Sign(testKey, requeststate.Claims{Owner: owner, User: user, Org: org, Expires: expires, Inner: "tool-state"})
	}
	for _, tc := range []struct {
		name      string
		state     string
		wantInner string // what the tool sees
		refused   bool
	}{
		{"no state", "", "", false},
		{"state signed for this grain and caller", sign("g1", "alice", "acme", now.Add(time.Minute)), "tool-state", false},
		{"another grain's state", sign("g2", "alice", "acme", now.Add(time.Minute)), "", true},
		{"another user's state", sign("g1", "bob", "acme", now.Add(time.Minute)), "", true},
		{"another organization's state", sign("g1", "alice", "globex", now.Add(time.Minute)), "", true},
		{"expired state", sign("g1", "alice", "acme", now.Add(-time.Second)), "", true},
		{"forged state", "v2.not-a-token", "", true},
	} {
		var seen *string
		next := func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
			s := req.GetParams().(*mcp.CallToolParamsRaw).RequestState
			seen = &s
			return &mcp.CallToolResult{RequestState: "next-state", InputRequests: mcp.InputRequestMap{}}, nil
		}
		hdr := exchange.Identity(&pb.HttpExchange{Principal: &pb.Principal{User: "alice", Org: "acme"}}, "g1", true)
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", RequestState: tc.state}, Extra: &mcp.RequestExtra{Header: hdr}}
		res, err := h.stateMiddleware(next)(context.Background(), "tools/call", req)
		if tc.refused {
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || seen != nil {
				t.Errorf("%s: %v (tool ran: %v), want invalid params before the tool", tc.name, err, seen != nil)
			}
			continue
		}
		if err != nil || seen == nil || *seen != tc.wantInner {
			t.Errorf("%s: tool saw %v (err %v), want %q", tc.name, seen, err, tc.wantInner)
			continue
		}
		out := res.(*mcp.CallToolResult).RequestState
		claims, err := requeststate.Verify(testKey, out, now)
		if err != nil || claims.Owner != "g1" || claims.User != "alice" || claims.Org != "acme" ||
			claims.Inner != "next-state" || !claims.Expires.Equal(now.Add(time.Minute)) {
			t.Errorf("%s: returned state %q: %+v %v, want signed for g1, alice@acme, a minute, inner next-state", tc.name, out, claims, err)
		}
	}
}

// lostContext is a grain context of an activation whose grain moved to
// another node without its knowing: it still owns it by its own account,
// and its first fenced transaction is refused.
type lostContext struct {
	grain.Context // what the test does not reach: nil
	commits       int
}

func (*lostContext) Own(context.Context) error { return nil }
func (*lostContext) Kind() string              { return KindName }
func (*lostContext) Identity() string          { return "g1" }
func (*lostContext) Epoch() uint64             { return 1 }
func (l *lostContext) Commit(context.Context, store.Writes) error {
	l.commits++
	return fmt.Errorf("store: apply: %w", store.ErrFenced)
}

// A decision reaching an activation that lost its grain is not answered
// OK: the fence is checked before the decision is taken (answered with
// the fenced error, so the activation stops and the surface's retry
// reaches the owner). Before the check, such an activation answered OK for
// a decision its journal then refused, while the new owner applied
// another (two decisions of one execution, both acknowledged).
func TestDecisionOfALostGrainIsNotAcknowledged(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := testHost(t, Config{CodeMode: &mcpruntime.CodeMode{Durable: true}, Store: runstore.New(st)})
	c := h.Kind().New("g1").(*cont)
	g := &lostContext{}
	reply, err := c.Receive(context.Background(), g, &pb.ExecutionDecide{ExecutionId: "exec_1", Action: "decline",
		Principal: &pb.Principal{User: "bob", Org: "acme", Role: "admin"}})
	if !errors.Is(err, store.ErrFenced) || reply != nil || g.commits != 1 {
		t.Fatalf("decision on a lost grain: %v / %v after %d fence checks, want the fenced error after one", reply, err, g.commits)
	}
}
