package mcpruntime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// leaseLog is the session's side of a runtime's pauses, as far as these
// tests need it: nothing (the session grain is not under test).
type leaseLog struct{}

func (leaseLog) Paused(string, time.Time) {}
func (leaseLog) Resuming(string, string)  {}
func (leaseLog) Settled(string)           {}

// answerHold is the outermost receiving middleware of the test's server:
// once armed, a tools/call's result (the handler returned and the runtime
// saw it return) is held until release is closed.
type answerHold struct {
	armed    atomic.Bool
	returned chan struct{}
	release  chan struct{}
}

func (h *answerHold) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method == "tools/call" && h.armed.CompareAndSwap(true, false) {
			close(h.returned)
			<-h.release
		}
		return res, err
	}
}

// callPost is one tools/call POST served by rt with ctx as its request's
// context; done is closed when the exchange is over, w holds its answer.
type callPost struct {
	w    *httptest.ResponseRecorder
	done chan struct{}
}

func startCall(ctx context.Context, rt exchanger, id int) *callPost {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ship","arguments":{"what":"v1"}}}`, id)
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set(exchange.HeaderIdentity, exchange.Caller{Session: "s1"}.Encode())
	req.Header.Set("Mcp-Session-Id", "s1")
	p := &callPost{w: httptest.NewRecorder(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		rt.ServeExchange(p.w, req)
	}()
	return p
}

// pausedOne waits for rt's one listed question and returns its id; "" if
// the POST p ended first.
func pausedOne(t *testing.T, rt session.Runtime, p *callPost) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if l := rt.PausedExecutionList(); len(l) == 1 {
			return l[0].GetExecutionId()
		}
		select {
		case <-p.done:
			return ""
		case <-time.After(5 * time.Millisecond): // poll interval
		}
	}
	t.Fatal("no question listed within 30s")
	return ""
}

// The chaos run's freeze-round finding (a question asked again after an
// acknowledged decision, and in a later run the deployment done twice):
// a durable call's handler returned — decided, its step run — and the
// runtime completed the call, but the exchange that carried it ended (the
// session's grain disposed its runtime as the session moved: a node came
// back and the session's owner changed) before go-sdk wrote the answer.
// The client was told to retry; the completed call was forgotten, so the
// retry was a new call: asked again, and its step run again. A call is now
// completed only once its answer went out on the exchange that carried
// it; here the retry gets the journaled decision and step, and the step
// ran once. After an answered call the same arguments are a new call.
func TestACallWhoseAnswerWasNotWrittenStaysOpenForTheRetry(t *testing.T) {
	var shipped atomic.Int32
	hold := &answerHold{}
	var srv *mcp.Server
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := mcpruntime.NewBuilder(mcpruntime.Config{Store: st,
		NewServer: func(opts *mcp.ServerOptions, _ func(*mcp.Server)) (*mcp.Server, func(), error) {
			srv = mcp.NewServer(&mcp.Implementation{Name: "t"}, opts)
			mcp.AddTool(srv, &mcp.Tool{Name: "ship"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct {
				What string `json:"what"`
			}) (*mcp.CallToolResult, any, error) {
				c, err := app.CallOf(ctx)
				if err != nil {
					return nil, nil, err
				}
				d, err := c.Ask(ctx, app.Question{Summary: "Ship it?"})
				if err != nil {
					return nil, nil, err
				}
				n, err := c.Step(ctx, "ship", func(context.Context) (json.RawMessage, error) {
					return json.Marshal(shipped.Add(1))
				})
				if err != nil {
					return nil, nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("shipped %s %v", n, d.Accepted)}}}, nil, nil
			})
			return srv, func() {}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddReceivingMiddleware(hold.middleware) // outermost: sees the result after the runtime did
	own, err := st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	built, err := b.Build(context.Background(), session.BuildInput{SessionID: "s1", Grain: own.Grain,
		Epoch: func() uint64 { return own.Epoch }, Leases: leaseLog{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = built.Close(context.Background()) })
	rt := built.(exchanger)
	if w := post(t, rt, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`); w.Code != http.StatusOK {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	if w := post(t, rt, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); w.Code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", w.Code, w.Body)
	}

	// The first run: paused, decided, its step run; its exchange ends
	// after the handler returned and before the answer is written.
	hold.returned, hold.release = make(chan struct{}), make(chan struct{})
	hold.armed.Store(true)
	ctx, cut := context.WithCancel(t.Context())
	first := startCall(ctx, rt, 5)
	id := pausedOne(t, built, first)
	if id == "" {
		t.Fatalf("the call answered before it was decided: %s", first.w.Body)
	}
	if j, ok := built.(session.PauseJournal); !ok || !j.JournaledPause(id) {
		t.Fatal("the question a handler waits for is not reported journaled: a disposal would unpublish it")
	}
	built.ResolveApproval(id, &pb.ApprovalDecision{Action: "accept", DecidedBy: "bob"})
	select {
	case <-hold.returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the decided run did not return within 30s")
	}
	cut()
	<-first.done // the exchange is over: nothing more is written to it
	close(hold.release)
	if strings.Contains(first.w.Body.String(), "shipped") {
		t.Fatalf("the cut exchange carried the answer: %s", first.w.Body)
	}
	if n := shipped.Load(); n != 1 {
		t.Fatalf("the first run shipped %d times, want once", n)
	}

	// The client's retry: the same call, answered from the journal.
	retry := startCall(t.Context(), rt, 6)
	if asked := pausedOne(t, built, retry); asked != "" {
		t.Fatalf("the retry asked again (%s after %s was decided): its call was completed with the answer lost", asked, id)
	}
	if body := retry.w.Body.String(); !strings.Contains(body, "shipped 1 true") {
		t.Fatalf("the retry's answer: %s, want the journaled %q", body, "shipped 1 true")
	}
	if n := shipped.Load(); n != 1 {
		t.Fatalf("shipped %d times, want once", n)
	}

	// The retry's answer went out: the call is complete, and the same
	// arguments again are a new call, which asks.
	again := startCall(t.Context(), rt, 7)
	next := pausedOne(t, built, again)
	if next == "" || next == id {
		t.Fatalf("the same arguments after the answered call: question %q (first %q), answer %s; want a new question", next, id, again.w.Body)
	}
	built.ResolveApproval(next, &pb.ApprovalDecision{Action: "decline", DecidedBy: "bob"})
	<-again.done
	if body := again.w.Body.String(); !strings.Contains(body, "shipped 2 false") {
		t.Fatalf("the new call's answer: %s, want %q", body, "shipped 2 false")
	}
}
