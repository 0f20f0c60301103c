package mcpgrain_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// contWhere is a session's own state: the continuation reads it to show
// in which session it runs.
var contWhere = mcpgrain.NewState[string]("cont_test_where", mcpgrain.StateOptions[string]{})

// contRuns counts, per question, the runs of the continuations and of
// their steps (the test's process runs the node).
var contRuns = struct {
	sync.Mutex
	runs, steps map[string]int
}{runs: map[string]int{}, steps: map[string]int{}}

// contFail makes "flaky" fail (1) or panic (2) before it succeeds (0).
var contFail atomic.Int32

func contCount(m map[string]int, id string) int {
	contRuns.Lock()
	defer contRuns.Unlock()
	m[id]++
	return m[id]
}

// contServer: here marks the session; ship_later asks with AskLater and a
// continuation; finish continues it with ContinueAsk; status reads it.
// The continuations: "ship" (a Step, the owner's state, the decision and
// the input) and "flaky" (a Step, then fails or panics as contFail says).
func contServer() mcpgrain.Server {
	ship := func(ctx context.Context, c mcpgrain.Continuation) (*mcp.CallToolResult, error) {
		contCount(contRuns.runs, c.ID)
		if _, err := mcpgrain.Step(ctx, nil, "effect", func(context.Context) (int, error) { return contCount(contRuns.steps, c.ID), nil }); err != nil {
			return nil, err
		}
		where, err := contWhere.Get(ctx)
		if err != nil {
			return nil, err
		}
		return textResult(fmt.Sprintf("%s %v %s where=%s input=%s by=%s", c.State, c.Decision.Accepted, c.Decision.By, where, c.Input, c.Caller)), nil
	}
	flaky := func(ctx context.Context, c mcpgrain.Continuation) (*mcp.CallToolResult, error) {
		contCount(contRuns.runs, c.ID)
		if _, err := mcpgrain.Step(ctx, nil, "effect", func(context.Context) (int, error) { return contCount(contRuns.steps, c.ID), nil }); err != nil {
			return nil, err
		}
		switch contFail.Load() {
		case 1:
			return nil, errors.New("the deployer is down")
		case 2:
			panic("the deployer exploded")
		}
		return textResult("flaky done"), nil
	}
	register := func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "here"}, func(ctx context.Context, _ *mcp.CallToolRequest, args struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			_, err := contWhere.Update(ctx, func(v *string) error { *v = args.Name; return nil })
			return textResult("ok"), nil, err
		})
		mcp.AddTool(s, &mcp.Tool{Name: "ship_later"}, func(ctx context.Context, req *mcp.CallToolRequest, args struct {
			Continuation string `json:"continuation"`
		}) (*mcp.CallToolResult, any, error) {
			p, err := mcpgrain.AskLater(ctx, req, mcpgrain.Question{Summary: "Ship with " + args.Continuation + "?", Continuation: args.Continuation})
			if err != nil {
				return nil, nil, err
			}
			return textResult(p.ID), nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "finish"}, func(ctx context.Context, req *mcp.CallToolRequest, args struct {
			ID    string         `json:"id"`
			Input map[string]any `json:"input,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			var in any
			if args.Input != nil {
				in = args.Input
			}
			res, err := mcpgrain.ContinueAsk(ctx, req, args.ID, in)
			return res, nil, err
		})
	}
	return mcpgrain.Server{Name: "cont", Register: register,
		Continuations: map[string]mcpgrain.ContinueFunc{"ship": ship, "flaky": flaky}}
}

// ContinueAsk runs a decided question's continuation on the session that
// asked it — its state, not the caller's — once: three calls at once from
// two sessions get one run's result, and a later call with other input
// gets the recorded result. Undecided,
// it is ErrAskPending; another user of the organization (an admin, a
// viewer) is refused, another organization does not find it, and nothing
// ran for any of them.
func TestContinueAskRunsOnTheOwnerOnce(t *testing.T) {
	origin := runKeyedNode(t, contServer())
	meg, megToo := connectAs(t, origin, "meg", "cancel", nil), connectAs(t, origin, "meg", "cancel", nil)
	callText(t, meg, "here", map[string]any{"name": "asking"})
	callText(t, megToo, "here", map[string]any{"name": "other"})
	id := callText(t, meg, "ship_later", map[string]any{"continuation": "ship"})
	if got := callText(t, megToo, "finish", map[string]any{"id": id}); !strings.Contains(got, mcpgrain.ErrAskPending.Error()) {
		t.Fatalf("finish of an undecided question: %q, want ErrAskPending", got)
	}
	hostile := []struct{ who, want string }{
		{"ada", mcpgrain.ErrForeignAsk.Error()}, // another user of acme, an admin
		{"vic", mcpgrain.ErrForeignAsk.Error()}, // another user of acme, a viewer
		{"eve", mcpgrain.ErrUnknownAsk.Error()}, // globex's admin
	}
	if code := decideOverHTTP(t, origin, "ada", id, "accept"); code != http.StatusOK {
		t.Fatalf("ada's HTTP accept: %d", code)
	}
	for _, h := range hostile {
		cs := connectAs(t, origin, h.who, "cancel", nil)
		if got := callText(t, cs, "finish", map[string]any{"id": id}); !strings.Contains(got, h.want) {
			t.Fatalf("%s's finish of meg's question: %q, want %q", h.who, got, h.want)
		}
	}
	want := `decided true ada where=asking input={"n":1} by=meg`
	got := make(chan string, 3)
	for _, cs := range []*mcp.ClientSession{megToo, megToo, meg} { // at once, from both sessions
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "finish", Arguments: map[string]any{"id": id, "input": map[string]any{"n": 1}}})
			if err != nil {
				got <- err.Error()
				return
			}
			got <- mcpclient.Text(res)
		}()
	}
	for range 3 {
		if g := <-got; g != want {
			t.Fatalf("finish, three at once: %q, want %q", g, want)
		}
	}
	if got := callText(t, meg, "finish", map[string]any{"id": id, "input": map[string]any{"n": 2}}); got != want {
		t.Fatalf("finish again from the asking session: %q, want the recorded %q", got, want)
	}
	contRuns.Lock()
	runs, steps := contRuns.runs[id], contRuns.steps[id]
	contRuns.Unlock()
	if runs != 1 || steps != 1 {
		t.Fatalf("the continuation ran %d times, its step %d: want once each", runs, steps)
	}
}

// The hostile and failing cases of a continuation: a name the server does
// not register is refused when asking; a question without one is
// ErrNoContinuation; a continuation's error and panic are
// ErrContinuationFailed with nothing recorded — the next call runs it
// again, its completed step replayed, until one completes.
func TestContinueAskFailuresRecordNothing(t *testing.T) {
	origin := runKeyedNode(t, contServer())
	meg := connectAs(t, origin, "meg", "cancel", nil)
	if got := callText(t, meg, "ship_later", map[string]any{"continuation": "nope"}); !strings.Contains(got, mcpgrain.ErrUnknownContinuation.Error()) {
		t.Fatalf("AskLater with an unknown continuation: %q", got)
	}
	none := callText(t, meg, "ship_later", map[string]any{"continuation": ""})
	if code := decideOverHTTP(t, origin, "ada", none, "accept"); code != http.StatusOK {
		t.Fatalf("accept: %d", code)
	}
	if got := callText(t, meg, "finish", map[string]any{"id": none}); !strings.Contains(got, mcpgrain.ErrNoContinuation.Error()) {
		t.Fatalf("finish of a question without a continuation: %q", got)
	}

	id := callText(t, meg, "ship_later", map[string]any{"continuation": "flaky"})
	if code := decideOverHTTP(t, origin, "ada", id, "decline"); code != http.StatusOK {
		t.Fatalf("decline: %d", code)
	}
	contFail.Store(1)
	if got := callText(t, meg, "finish", map[string]any{"id": id}); !strings.Contains(got, mcpgrain.ErrContinuationFailed.Error()) || !strings.Contains(got, "the deployer is down") {
		t.Fatalf("a continuation's error: %q", got)
	}
	contFail.Store(2)
	if got := callText(t, meg, "finish", map[string]any{"id": id}); !strings.Contains(got, mcpgrain.ErrContinuationFailed.Error()) || !strings.Contains(got, "the deployer exploded") {
		t.Fatalf("a continuation's panic: %q", got)
	}
	contFail.Store(0)
	for range 2 {
		if got := callText(t, meg, "finish", map[string]any{"id": id}); got != "flaky done" {
			t.Fatalf("finish once it works: %q", got)
		}
	}
	contRuns.Lock()
	runs, steps := contRuns.runs[id], contRuns.steps[id]
	contRuns.Unlock()
	if runs != 3 || steps != 1 {
		t.Fatalf("flaky ran %d times, its step %d: want 3 runs (two failed) and the step once", runs, steps)
	}
}

// ContinueAsk outside a tool call of a session says so.
func TestContinueAskNeedsAToolCallOfASession(t *testing.T) {
	if _, err := mcpgrain.ContinueAsk(context.Background(), &mcp.CallToolRequest{}, "exec_x", nil); !errors.Is(err, mcpgrain.ErrNoSessionCall) {
		t.Fatalf("ContinueAsk: %v", err)
	}
	if _, err := mcpgrain.ContinueAsk(context.Background(), nil, "exec_x", nil); err == nil {
		t.Fatal("ContinueAsk without a request: no error")
	}
}
