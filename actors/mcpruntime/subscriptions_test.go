package mcpruntime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// subscriber records the subscribe handler's calls: the URI and the go-sdk
// session of each.
type subscriber struct {
	mu    sync.Mutex
	calls []string
	by    []*mcp.ServerSession
}

func (s *subscriber) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if strings.HasPrefix(req.Params.URI, "test://refused") {
		return fmt.Errorf("no such resource %s", req.Params.URI)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.by = append(s.calls, req.Params.URI), append(s.by, req.Session)
	return nil
}

func (s *subscriber) seen() ([]string, []*mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls), slices.Clone(s.by)
}

// subscribingBuilder is a node's runtime builder whose shared server
// accepts resource subscriptions (any URI but test://refused…).
func subscribingBuilder(t *testing.T) (*mcpruntime.Builder, *mcp.Server, *subscriber) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sub := &subscriber{}
	var srv *mcp.Server
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st,
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			o := *opts
			o.SubscribeHandler = sub.subscribe
			o.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
			srv = mcp.NewServer(&mcp.Implementation{Name: "t"}, &o)
			return srv, func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, srv, sub
}

func subscribeReq(id int, method, uri string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"uri":%q}}`, id, method, uri)
}

// recordedSubscriptions decodes the subscriptions of a session record.
func recordedSubscriptions(t *testing.T, state []byte) []string {
	t.Helper()
	var rec struct {
		Subscriptions []string `json:"mcpgrainResourceSubscriptions"`
	}
	if err := json.Unmarshal(state, &rec); err != nil {
		t.Fatalf("record %s: %v", state, err)
	}
	return rec.Subscriptions
}

// A session's resource subscriptions are recorded with its handshake
// (subscribe adds, unsubscribe removes, a refused one is not kept), and a
// runtime restored from the record subscribes its new go-sdk session
// again: the server's subscribe handler sees the restored session
// subscribe to what it had, so go-sdk's table of subscribers has it and a
// pack (the conformance fixture's watched resource) re-arms its work.
// Before, a restored session (a move, the loss of its node) silently had
// no subscriptions.
func TestRestoredRuntimeKeepsItsSubscriptions(t *testing.T) {
	b, srv, sub := subscribingBuilder(t)
	var state []byte
	rt, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", StateChanged: func(s []byte) error { state = s; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range []string{
		initialize, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		subscribeReq(2, "resources/subscribe", "test://a"), subscribeReq(3, "resources/subscribe", "test://b"),
		subscribeReq(4, "resources/subscribe", "test://a"), subscribeReq(5, "resources/subscribe", "test://refused"),
		subscribeReq(6, "resources/unsubscribe", "test://b"), subscribeReq(7, "resources/subscribe", "test://c"),
	} {
		if w := post(t, rt.(exchanger), req); w.Code/100 != 2 {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
	}
	if got := recordedSubscriptions(t, state); !slices.Equal(got, []string{"test://a", "test://c"}) {
		t.Fatalf("recorded subscriptions %q, want [test://a test://c]", got)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, _ := sub.seen()
	var next []byte
	restored, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", State: state, StateChanged: func(s []byte) error { next = s; return nil }})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() { _ = restored.Close(context.Background()) })
	live := sessions(srv)
	if len(live) != 1 {
		t.Fatalf("%d server sessions after the restore, want 1", len(live))
	}
	calls, by := sub.seen()
	if got := calls[len(before):]; !slices.Equal(got, []string{"test://a", "test://c"}) {
		t.Fatalf("the restore subscribed to %q, want [test://a test://c]", got)
	}
	for _, ss := range by[len(before):] {
		if ss != live[0] {
			t.Fatal("a replayed subscribe came from another session than the restored one")
		}
	}
	// The restored runtime keeps recording: an unsubscribe after the
	// restore is in its next record.
	if w := post(t, restored.(exchanger), subscribeReq(8, "resources/unsubscribe", "test://a")); w.Code != http.StatusOK {
		t.Fatalf("unsubscribe on the restored runtime: %d %s", w.Code, w.Body)
	}
	if got := recordedSubscriptions(t, next); !slices.Equal(got, []string{"test://c"}) {
		t.Fatalf("after an unsubscribe on the restored runtime: %q, want [test://c]", got)
	}
}

// What one session's record keeps of its subscriptions is bounded: a URI
// over 2 KiB, and a 65th resource, are refused (invalid params) and not
// subscribed; subscribing again to a recorded one still works.
func TestSubscriptionsAreBounded(t *testing.T) {
	b, _, sub := subscribingBuilder(t)
	var state []byte
	rt, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", StateChanged: func(s []byte) error { state = s; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	post(t, rt.(exchanger), initialize)
	post(t, rt.(exchanger), `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	for i := range 64 {
		if w := post(t, rt.(exchanger), subscribeReq(10+i, "resources/subscribe", fmt.Sprintf("test://r%d", i))); w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"error"`) {
			t.Fatalf("subscribe %d: %d %s", i, w.Code, w.Body)
		}
	}
	for name, uri := range map[string]string{"a 65th resource": "test://r64", "a long URI": "test://" + strings.Repeat("x", 2048)} {
		w := post(t, rt.(exchanger), subscribeReq(100, "resources/subscribe", uri))
		if !strings.Contains(w.Body.String(), `"code":-32602`) {
			t.Errorf("%s: %d %s, want invalid params", name, w.Code, w.Body)
		}
	}
	if w := post(t, rt.(exchanger), subscribeReq(101, "resources/subscribe", "test://r0")); strings.Contains(w.Body.String(), `"error"`) {
		t.Errorf("subscribing again to a recorded resource: %s", w.Body)
	}
	if n := len(recordedSubscriptions(t, state)); n != 64 {
		t.Errorf("%d subscriptions recorded, want 64", n)
	}
	if calls, _ := sub.seen(); len(calls) != 65 { // 64 and test://r0 again: the refused never reached the handler
		t.Errorf("the subscribe handler ran %d times, want 65", len(calls))
	}
}
