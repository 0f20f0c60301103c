package systemtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// openStandaloneStream opens a raw standalone GET stream on session sid and
// returns the response once its head arrived.
func openStandaloneStream(t *testing.T, addr, sid string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// awaitStreamEnd waits (10 s) for a stream's body to end cleanly.
func awaitStreamEnd(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: the stream broke instead of ending: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the stream is still open after 10s", what)
	}
}

// TestHibernatedSessionsParkTheirStandaloneStreams: a client that keeps
// only its standalone GET stream open is not active. Over the soft cap,
// evicting it closes that stream and go-sdk's client reconnects a second
// later; the reconnect must not restore the runtime (which would evict
// the next session, whose client reconnects, and so on forever). It is
// parked instead, and ended when a real request restores the session or
// the session ends.
func TestHibernatedSessionsParkTheirStandaloneStreams(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.NodeID = "p1"
		c.MCP.SoftCap = 2
	})
	p := metricsProbe{t, info.HTTPAddr}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"node": "p1"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	clients := map[string]*mcp.ClientSession{}
	gets := map[string]<-chan string{}
	open := func(name string) {
		cs, g := connectRecordingStreams(t, info.HTTPAddr)
		clients[name], gets[name] = cs, g
		<-g // its first standalone stream is open
	}
	// reconnected waits for one of the named clients to reopen its
	// standalone stream (the one whose session was just evicted).
	reconnected := func(what string, names ...string) string {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			for _, n := range names {
				select {
				case <-gets[n]:
					return n
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("%s: no stream reconnect within 15s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	// Three go-sdk clients, each holding its standalone stream; the third
	// evicts one of the first two.
	open("a")
	open("b")
	p.waitFor("two sessions", "mcpgrain_resident_runtimes", with(), exactly(2))
	p.handshakesEnded(with(), 2)
	open("c")
	p.waitFor("cap eviction", "mcpgrain_runtime_disposals_total", with("reason", "cap"), exactly(1))

	// Its client reconnects its stream (go-sdk waits about a second): the
	// stream parks, nothing is restored, nobody else is evicted.
	first := reconnected("first eviction", "a", "b")
	p.waitFor("parked", "mcpgrain_parked_streams", with(), exactly(1))
	if v := p.get("mcpgrain_session_activations_total", with()); v != 3 {
		t.Fatalf("the reconnect restored the session: %v activations, want 3", v)
	}
	if v := p.get("mcpgrain_runtime_disposals_total", with("reason", "cap")); v != 1 {
		t.Fatalf("%v cap evictions after the reconnect, want 1", v)
	}

	// A second stream on the hibernated session parks too, and ends
	// cleanly when a real request restores the session.
	extra := openStandaloneStream(t, info.HTTPAddr, clients[first].ID())
	p.waitFor("second parked stream", "mcpgrain_parked_streams", with(), exactly(2))
	if _, err := clients[first].ListTools(context.Background(), nil); err != nil {
		t.Fatalf("restore: %v", err)
	}
	awaitStreamEnd(t, "restore", extra)
	p.waitFor("restore", "mcpgrain_session_activations_total", with(), exactly(4))
	p.waitFor("restore evicts another", "mcpgrain_runtime_disposals_total", with("reason", "cap"), exactly(2))

	// The restored client reconnects to its live runtime; the newly
	// evicted one parks. DELETE ends that session's parked streams, and a
	// new GET then finds no session.
	var others []string
	for _, n := range []string{"a", "b", "c"} {
		if n != first {
			others = append(others, n)
		}
	}
	if n := reconnected("restored client", first); n != first {
		t.Fatal("unreachable")
	}
	second := reconnected("second eviction", others...)
	p.waitFor("second parked", "mcpgrain_parked_streams", with(), exactly(1))
	onSecond := openStandaloneStream(t, info.HTTPAddr, clients[second].ID())
	p.waitFor("a stream on the second", "mcpgrain_parked_streams", with(), exactly(2))
	if err := clients[second].Close(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	awaitStreamEnd(t, "delete", onSecond)
	p.waitFor("delete", "mcpgrain_parked_streams", with(), exactly(0))
	if r := raw(t, "GET", info.HTTPAddr, map[string]string{"Authorization": "Bearer " + aliceToken, "Accept": "text/event-stream",
		"Mcp-Session-Id": clients[second].ID(), "Mcp-Protocol-Version": "2025-11-25"}, ""); r.status != http.StatusNotFound {
		t.Fatalf("GET on the deleted session: %d, want 404", r.status)
	}

	// Parking was never activity: nothing else was built, and the two
	// live sessions are the resident ones.
	if v := p.get("mcpgrain_session_activations_total", with()); v != 4 {
		t.Fatalf("%v activations, want 4", v)
	}
	for _, n := range []string{"a", "b", "c"} {
		if n == second {
			continue
		}
		if _, err := clients[n].ListTools(context.Background(), nil); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if v := p.get("mcpgrain_session_activations_total", with()); v != 4 {
		t.Fatalf("%v activations after using the live sessions, want 4", v)
	}
}

// streamOpens records the Last-Event-ID of every GET a client sends, once
// its response head arrived (the stream is open, parked or live).
type streamOpens struct {
	rt   http.RoundTripper
	gets chan string
}

func (s streamOpens) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if r.Method == http.MethodGet && err == nil {
		s.gets <- r.Header.Get("Last-Event-ID")
	}
	return resp, err
}

// connectRecordingStreams connects a go-sdk client whose standalone
// stream (re)connects are reported on the returned channel.
func connectRecordingStreams(t *testing.T, addr string) (*mcp.ClientSession, <-chan string) {
	t.Helper()
	gets := make(chan string, 64)
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: streamOpens{mcpclient.Bearer(aliceToken, http.DefaultTransport), gets}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, gets
}

// TestStandaloneStreamsSurviveManyHibernations: every passivation and
// every restore ends the client's standalone stream. go-sdk's client gives
// the whole session up after five reconnects "without progress" (no new
// event id), so each stream we open starts with a priming event carrying a
// fresh id. Two clients over a soft cap of one take turns evicting each
// other more often than that; both must keep working, and every reconnect
// must carry a new id.
func TestStandaloneStreamsSurviveManyHibernations(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.NodeID = "h1"
		c.MCP.SoftCap = 1
	})
	next := func(who string, gets <-chan string) string {
		t.Helper()
		select {
		case id := <-gets:
			return id
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: no stream reconnect within 15s", who)
			return ""
		}
	}
	p, node := metricsProbe{t, info.HTTPAddr}, map[string]string{"node": "h1"}
	a, aGets := connectRecordingStreams(t, info.HTTPAddr)
	if first := next("a", aGets); first != "" {
		t.Fatalf("a's first stream carried Last-Event-ID %q", first)
	}
	p.handshakesEnded(node, 1)
	b, bGets := connectRecordingStreams(t, info.HTTPAddr)
	next("b", bGets)
	last := map[string]string{"a": next("a", aGets)} // b's build evicted a; a reconnected
	if !strings.HasPrefix(last["a"], "_") {
		t.Fatalf("a reconnected with Last-Event-ID %q, want a priming id", last["a"])
	}
	clients := map[string]*mcp.ClientSession{"a": a, "b": b}
	gets := map[string]<-chan string{"a": aGets, "b": bGets}
	for round := range 7 {
		x, y := "a", "b" // a is hibernated first
		if round%2 == 1 {
			x, y = y, x
		}
		// x restores (its parked stream ends) and evicts y (its live stream
		// ends) once y's last call has left its runtime.
		p.handshakesEnded(node, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, err := clients[x].ListTools(ctx, nil)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, x, err)
		}
		for _, who := range []string{x, y} {
			id := next(who, gets[who])
			if !strings.HasPrefix(id, "_") || id == last[who] {
				t.Fatalf("round %d: %s reconnected with Last-Event-ID %q after %q: no progress", round, who, id, last[who])
			}
			last[who] = id
		}
	}
}

// TestParkedStreamsPerSessionAreBounded: a client that opens stream after
// stream on a hibernated session cannot pile them up; past four, the
// oldest ends (cleanly: the newest is never refused).
func TestParkedStreamsPerSessionAreBounded(t *testing.T) {
	info := startCodeNode(t, func(c *app.Config) {
		c.NodeID = "b1"
		c.MCP.SoftCap = 1
	})
	p := metricsProbe{t, info.HTTPAddr}
	node := map[string]string{"node": "b1"}
	quiet := func() *mcp.ClientSession { // no standalone stream of its own
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{
			Endpoint: "http://" + info.HTTPAddr + "/mcp", HTTPClient: &http.Client{Transport: mcpclient.Bearer(aliceToken, http.DefaultTransport)},
			DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	a := quiet()
	// Connect returns once the client read initialize's answer, which can
	// be before go-sdk's handler returned: until then the runtime is pinned,
	// and a build over the cap would overflow instead of evicting it.
	p.handshakesEnded(node, 1)
	quiet() // evicts a (soft cap 1)
	p.waitFor("eviction", "mcpgrain_runtime_disposals_total", map[string]string{"node": "b1", "reason": "cap"}, exactly(1))

	var streams []*http.Response
	for i := range 6 {
		streams = append(streams, openStandaloneStream(t, info.HTTPAddr, a.ID()))
		p.waitFor("parked", "mcpgrain_parked_streams", node, exactly(float64(min(i+1, 4))))
	}
	awaitStreamEnd(t, "first", streams[0])
	awaitStreamEnd(t, "second", streams[1])
	if v := p.get("mcpgrain_session_activations_total", node); v != 2 {
		t.Fatalf("%v activations: parking restored the session", v)
	}
	// The four newest are still open: a real request restores the session
	// and ends them all.
	if _, err := a.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams[2:] {
		awaitStreamEnd(t, fmt.Sprintf("stream %d after the restore", i+3), s)
	}
	p.waitFor("restore", "mcpgrain_parked_streams", node, exactly(0))
}
