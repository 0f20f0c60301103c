package systemtest

// MCP across real processes: Consul, Postgres, three `mcpgrain node`
// processes (internal/testcluster), the official go-sdk client.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/placement"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

func sessionTable(c *testcluster.Cluster, running ...int) *placement.Table {
	return c.Placement(session.KindName, running...)
}

// A client talks to one node while its session lives on another: tool
// calls, progress, elicitation, resource subscriptions and DELETE all work
// through the remote hop.
func TestStatefulSessionAcrossNodes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "demo,conformance"}})
	var progress, updates atomic.Int32
	updated := make(chan struct{}, 1)
	cs := connectOwnedBy(t, c, 0, 1, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
			if updates.Add(1) == 1 {
				updated <- struct{}{}
			}
		},
	})
	ctx := t.Context()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 30 {
		t.Fatalf("tools/list: %d tools", len(tools.Tools))
	}
	p := &mcp.CallToolParams{Name: "count_to", Arguments: map[string]any{"n": 5}}
	p.SetProgressToken("count")
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("count_to: %+v %v", res, err)
	}
	awaitCount(t, "progress notifications", &progress, 5)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_confirmation", Arguments: map[string]any{"question": "ok?"}})
	if err != nil || res.IsError {
		t.Fatalf("elicitation round trip: %+v %v", res, err)
	}
	if !strings.Contains(fmt.Sprint(res.StructuredContent), "true") {
		t.Fatalf("elicitation answer not reported: %+v", res.StructuredContent)
	}
	// Notifications outside any request travel on the standalone GET stream.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	case <-time.After(15 * time.Second):
		t.Fatal("no resource update on the GET stream")
	}
	sid := cs.ID()
	if err := cs.Close(); err != nil { // DELETE
		t.Fatal(err)
	}
	r := raw(t, "POST", c.Node(2).HTTP, map[string]string{"Authorization": "Bearer " + testcluster.Token, "Mcp-Session-Id": sid,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.status != http.StatusNotFound {
		t.Fatalf("after DELETE via another gateway: %d %q", r.status, r.body)
	}
}

func waitMetric(t *testing.T, n *testcluster.Node, prefix string, min float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v, _ := n.Metric(prefix); v >= min {
			return
		}
		if time.Now().After(deadline) {
			v, _ := n.Metric(prefix)
			t.Fatalf("%s on %s is %v, want >= %v", prefix, n.ID, v, min)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The same session (same id, no re-initialize) survives idle passivation
// and the SIGKILL of the node that owns it.
func TestSessionSurvivesPassivationAndOwnerKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: 2 * time.Second,
		ExtraArgs: []string{"--session-timeout", "1s", "--reminder-poll", "200ms"}})
	cs := connectOwnedBy(t, c, 0, 1, &mcp.ClientOptions{})
	sid := cs.ID()
	echo(t, cs, "before")
	waitMetric(t, c.Node(1), `mcpgrain_runtime_disposals_total{node="n2",reason="idle"}`, 1)
	echo(t, cs, "after passivation")
	if cs.ID() != sid {
		t.Fatal("session id changed")
	}
	c.Kill(1)
	// A call racing the kill may have reached the dying node: its outcome is
	// unknown and the client gets the restart envelope (503, tested
	// elsewhere). Once the gateway's view has dropped the node, calls go to
	// a survivor.
	c.WaitMembersOn([]int{0}, 2, 15*time.Second)
	echo(t, cs, "after the owner was killed")
	if cs.ID() != sid {
		t.Fatal("session id changed")
	}
	// The survivors restored it (a cold build on one of them).
	var built float64
	for _, i := range []int{0, 2} {
		v, _ := c.Node(i).Metric("mcpgrain_session_activations_total")
		built += v
	}
	if built < 1 {
		t.Fatal("no survivor built the session runtime")
	}
}

type sseEvent struct{ id, data string }

func readSSE(t *testing.T, resp *http.Response, want int) []sseEvent {
	t.Helper()
	var (
		out []sseEvent
		cur sseEvent
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			cur.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			cur.data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		case line == "":
			if cur.id != "" || cur.data != "" {
				out = append(out, cur)
				cur = sseEvent{}
				if len(out) == want {
					return out
				}
			}
		}
	}
	return out
}

func post(t *testing.T, addr, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testcluster.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A client that lost a response stream resumes it with Last-Event-ID on
// another gateway after the node that served it died: the events come from
// the store-backed event log.
func TestDroppedStreamResumesOnAnotherNodeAfterOwnerDied(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: 2 * time.Second})
	sid := rawSessionOwnedBy(t, c, 0, 1, `{}`)
	resp := post(t, c.Node(0).HTTP, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"replay me"}}}`)
	evs := readSSE(t, resp, 2) // priming event, then the response
	resp.Body.Close()
	if len(evs) != 2 || !strings.Contains(evs[1].data, "replay me") {
		t.Fatalf("tools/call stream: %+v", evs)
	}
	prime := evs[0].id
	awaitEventStored(t, c.DSN, sid, evs[1].id) // the event log writes behind
	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 20*time.Second)
	resp = resumeStream(t, c.Node(2).HTTP, sid, prime)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: status %d", resp.StatusCode)
	}
	replayed := readSSE(t, resp, 1)
	if len(replayed) != 1 || replayed[0].id != evs[1].id || !strings.Contains(replayed[0].data, "replay me") {
		t.Fatalf("replayed %+v, want %+v", replayed, evs[1])
	}
}

// awaitEventStored waits (10 s) until the session's event with the
// (gateway-tagged) id is in the store's event log.
func awaitEventStored(t *testing.T, dsn, sid, eventID string) {
	t.Helper()
	base, _, _ := strings.Cut(eventID, "~")
	i := strings.LastIndex(base, "_")
	idx, err := strconv.Atoi(base[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("event id %q", eventID)
	}
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, last, err := eventstore.New(st).Events(t.Context(), sid, base[:i], idx-1); err == nil && last >= idx {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s of session %s not stored after 10s", eventID, sid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawSessionOwnedBy initializes (with capabilities) a 2025-11-25 session
// through gateway via, over plain HTTP, until one is owned by node owner.
func rawSessionOwnedBy(t *testing.T, c *testcluster.Cluster, via, owner int, capabilities string) string {
	t.Helper()
	table := sessionTable(c, 0, 1, 2)
	for range 40 {
		resp := post(t, c.Node(via).HTTP, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+capabilities+`,"clientInfo":{"name":"raw","version":"1"}}}`)
		readSSE(t, resp, 2)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if o, _ := table.Owner(session.KindName, sid); o.ID != c.Node(owner).ID {
			continue
		}
		resp = post(t, c.Node(via).HTTP, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("initialized: %d", resp.StatusCode)
		}
		return sid
	}
	t.Fatalf("no session owned by node %d", owner+1)
	return ""
}

// resumeStream resumes a response stream with Last-Event-ID through addr.
func resumeStream(t *testing.T, addr, sid, lastEventID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.Token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastEventID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Regression (chaos kill rounds): the owner dies while a request's
// response stream is open and its response not yet produced; the stream's
// newest events die with it (the event log writes behind). The client
// resumes on another gateway: instead of go-sdk's 400 "failed to replay
// events" — which makes go-sdk's client close the whole session — the
// resumed stream answers the request with the retryable restart error, and
// the session goes on.
func TestResumeOfAStreamWhoseResponseDiedAnswersItsRequest(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: 2 * time.Second, ExtraArgs: []string{"--tools", "demo,conformance"}})
	sid := rawSessionOwnedBy(t, c, 0, 1, `{"elicitation":{}}`)
	// The tool asks the client a question (on the response stream) and
	// waits for the answer, which never comes: the response cannot exist
	// before the kill.
	resp := post(t, c.Node(0).HTTP, sid, `{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"ok?"}}}`)
	evs := readSSE(t, resp, 2) // priming event, the elicitation request
	if len(evs) != 2 || !strings.Contains(evs[1].data, "elicitation/create") {
		t.Fatalf("tools/call stream: %+v", evs)
	}
	for _, e := range evs {
		if !strings.HasSuffix(e.id, eventIDSuffix(`"call-7"`)) {
			t.Fatalf("event id %q is not tagged with the request id", e.id)
		}
	}
	c.Kill(1)
	resp.Body.Close()
	c.WaitMembersOn([]int{0, 2}, 2, 20*time.Second)

	resp = resumeStream(t, c.Node(2).HTTP, sid, evs[1].id)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: status %d, want 200 (any other status ends the client's session)", resp.StatusCode)
	}
	replayed := readSSE(t, resp, 10)
	if len(replayed) == 0 {
		t.Fatal("resumed stream ended without answering call-7")
	}
	last := replayed[len(replayed)-1]
	var answer struct {
		ID    string `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last.data), &answer); err != nil || answer.ID != "call-7" || answer.Error.Code != -32001 || !strings.Contains(answer.Error.Message, "restarting") {
		t.Fatalf("resumed stream ended with %+v (%v), want the retryable restart error for call-7", last, err)
	}
	// The session goes on, restored on a survivor.
	resp = post(t, c.Node(2).HTTP, sid, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	defer resp.Body.Close()
	if evs := readSSE(t, resp, 2); resp.StatusCode != http.StatusOK || len(evs) != 2 || !strings.Contains(evs[1].data, "still here") {
		t.Fatalf("after the lost response: %d %+v", resp.StatusCode, evs)
	}
}

// eventIDSuffix mirrors the gateway's tag: "~" + base64url(request id).
func eventIDSuffix(reqID string) string {
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(reqID))
}

func continuationExchanges(n *testcluster.Node) float64 {
	v, _ := n.Metric("mcpgrain_continuation_exchanges_total")
	return v
}

// A 2026-07-28 input_required retry sent through another gateway reaches
// the continuation grain that issued its requestState.
func TestSessionlessRetryThroughAnotherGatewayReachesTheOwner(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "demo,conformance"}})
	viaA := mrtrClient(t, c.Node(0).HTTP, testcluster.Token)
	first, err := viaA.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_input_required_result_request_state"})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first call: %+v %v", first, err)
	}
	viaC := mrtrClient(t, c.Node(2).HTTP, testcluster.Token)
	before := []float64{continuationExchanges(c.Node(0)), continuationExchanges(c.Node(1)), continuationExchanges(c.Node(2))}
	res, err := viaC.CallTool(t.Context(), confirmRetry(first.RequestState))
	if err != nil || res.IsError {
		t.Fatalf("retry through another gateway: %+v %v", res, err)
	}
	if tc := res.Content[0].(*mcp.TextContent); !strings.HasPrefix(tc.Text, "state-ok") {
		t.Fatalf("retry answered %q", tc.Text)
	}
	// The first request ran on a continuation grain of the gateway that
	// took it (node 1), and so did the retry.
	after := []float64{continuationExchanges(c.Node(0)), continuationExchanges(c.Node(1)), continuationExchanges(c.Node(2))}
	if after[0] != before[0]+1 || after[1] != before[1] || after[2] != before[2] {
		t.Fatalf("continuation exchanges before %v after %v: the retry did not run on the owner (node 1)", before, after)
	}
	if _, err := viaC.CallTool(t.Context(), confirmRetry(first.RequestState+"x")); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("tampered state through another gateway: %v", err)
	}
}

// A session whose node stops answering (frozen) gets executor's restart
// envelope in bounded time, never a hang, and works again once it moved.
func TestFrozenOwnerYieldsRestartEnvelopeNotAHang(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: 2 * time.Second})
	cs := connectOwnedBy(t, c, 0, 1, &mcp.ClientOptions{})
	sid := cs.ID()
	echo(t, cs, "before")
	c.Freeze(1)
	defer c.Thaw(1)
	began := time.Now()
	r := raw(t, "POST", c.Node(0).HTTP, map[string]string{"Authorization": "Bearer " + testcluster.Token, "Mcp-Session-Id": sid,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	took := time.Since(began)
	if r.status != http.StatusServiceUnavailable || rpcCode(t, r.body) != -32001 || !strings.Contains(string(r.body), "MCP session is restarting, please retry") || r.header.Get("Retry-After") == "" {
		t.Fatalf("frozen owner: %d %q Retry-After %q", r.status, r.body, r.header.Get("Retry-After"))
	}
	if took > 11*time.Second {
		t.Fatalf("restart envelope after %s, want bounded by the 10s start timeout", took)
	}
	// After the cluster dropped the frozen node, the session is restored
	// on a survivor.
	c.WaitMembersOn([]int{0, 2}, 2, 20*time.Second)
	echo(t, cs, "after the move")
	t.Logf("restart envelope after %s", took.Round(time.Millisecond))
}

// With --session-placement local (the production default) a gateway mints
// session ids its own node owns, so a client that keeps its connection
// reaches its session in process; the session is still placed by the
// hash, so any other gateway finds it too.
func TestLocalSessionPlacementMintsIDsTheGatewayOwns(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--session-placement", "local"}})
	table := sessionTable(c, 0, 1, 2)
	for via := range 3 {
		for range 5 {
			cs := connect(t, c.Node(via).HTTP, testcluster.Token, "2025-11-25", nil)
			if o, _ := table.Owner(session.KindName, cs.ID()); o.ID != c.Node(via).ID {
				t.Fatalf("a session minted by %s is owned by %s", c.Node(via).ID, o.ID)
			}
			echo(t, cs, "local")
			// Another gateway reaches it (one hop away).
			other := raw(t, "POST", c.Node((via+1)%3).HTTP, map[string]string{"Authorization": "Bearer " + testcluster.Token,
				"Mcp-Session-Id": cs.ID(), "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"Mcp-Protocol-Version": "2025-11-25"},
				`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"via another"}}}`)
			if other.status != http.StatusOK || !strings.Contains(string(other.body), "via another") {
				t.Fatalf("through another gateway: %d %s", other.status, other.body)
			}
		}
	}
}

// A change of the tool list made on one node reaches clients on the other
// nodes: a 2026-07-28 listen stream (on a continuation grain of node 0)
// and a 2025-11-25 session (on node 2) both hear of a change triggered by
// a sessionless call served on node 1 (toolpacks.Catalog, CatalogChange).
func TestListChangesReachClientsOnEveryNode(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "conformance"}})
	changed := make(chan string, 16)
	heard := func(who string) *mcp.ClientOptions {
		return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- who }}
	}
	connect(t, c.Node(0).HTTP, testcluster.Token, "", heard("listen stream on node 0")) // opens its listen stream before it returns
	connectOwnedBy(t, c, 0, 2, heard("session on node 2"))
	trigger := connect(t, c.Node(1).HTTP, testcluster.Token, "", nil)
	res, err := trigger.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_trigger_tool_change"})
	if err != nil || res.IsError {
		t.Fatalf("test_trigger_tool_change: %+v %v", res, err)
	}
	want := map[string]bool{"listen stream on node 0": true, "session on node 2": true}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case who := <-changed:
			delete(want, who)
		case <-deadline:
			t.Fatalf("no notifications/tools/list_changed within 10 s for: %v", want)
		}
	}
}
