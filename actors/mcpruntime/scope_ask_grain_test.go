package mcpruntime_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// grainCalls are the durable calls of continuation grain c-n1-0 in a real
// (SQLite) store, owned by the test.
func grainCalls(t *testing.T) (*mcpruntime.GrainCalls, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "calls.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	own, err := st.Acquire(context.Background(), "continuation/c-n1-0", "n1")
	if err != nil {
		t.Fatal(err)
	}
	gc, err := mcpruntime.NewGrainCalls(mcpruntime.GrainCallsConfig{Store: st, Grain: own.Grain, Owner: "c-n1-0", Epoch: own.Epoch,
		MayDecide: policy.Approvers("").MayDecide})
	if err != nil {
		t.Fatal(err)
	}
	return gc, st
}

// toolCall is a deploy call of user (role) with state and answer (a retry
// when state is not "").
func toolCall(user, role, state string, answer *mcp.ElicitResult) *mcp.CallToolRequest {
	h := exchange.Identity(&pb.HttpExchange{Principal: &pb.Principal{User: user, Org: "acme", Role: role}}, "c-n1-0", true)
	p := &mcp.CallToolParamsRaw{Name: "deploy", Arguments: json.RawMessage(`{"v":"1"}`), RequestState: state}
	if answer != nil {
		p.InputResponses = mcp.InputResponseMap{"approval": answer}
	}
	return &mcp.CallToolRequest{Params: p, Extra: &mcp.RequestExtra{Header: h}}
}

// run runs a handler that asks once for req, as the continuation server
// does (Bind, then finish).
func run(t *testing.T, gc *mcpruntime.GrainCalls, req *mcp.CallToolRequest) (app.Decision, error) {
	t.Helper()
	ctx, finish, err := gc.Bind(context.Background(), req)
	if err != nil {
		return app.Decision{}, err
	}
	defer finish(false)
	c, err := app.CallOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c.Ask(ctx, app.Question{Summary: "Deploy 1?"})
}

// A surface's decision and the client's answer to the same question, in
// either order or racing: exactly one of them is the decision — the surface's reply is OK exactly
// when the retry's handler gets the surface's accept, else the surface is
// told it was decided already and the client's decline stands.
func TestASessionlessQuestionIsDecidedOnce(t *testing.T) {
	gc, st0 := grainCalls(t)
	dir := directory.New(st0)
	surfaceWon := 0
	for i := range 20 {
		_, err := run(t, gc, toolCall("alice", "admin", "", nil))
		var ir *app.InputRequiredError
		if !errors.As(err, &ir) || ir.State == "" {
			t.Fatalf("round %d: the first run: %v, want input required", i, err)
		}
		pause := ir.State[len(ir.State)-len("exec_")-32:]
		var (
			wg    sync.WaitGroup
			st    pb.ExecutionReply_Status
			found bool
			d     app.Decision
			errs  [2]error
		)
		surface := func() {
			defer wg.Done()
			st, found, errs[0] = gc.Decide(context.Background(), &pb.ExecutionDecide{ExecutionId: pause, Action: "accept",
				Principal: &pb.Principal{User: "bob", Org: "acme", Role: "member"}})
		}
		client := func() {
			defer wg.Done()
			d, errs[1] = run(t, gc, toolCall("alice", "admin", ir.State, &mcp.ElicitResult{Action: "decline"}))
		}
		wg.Add(2)
		switch i % 3 { // in order (each side first), and racing
		case 0:
			surface()
			client()
		case 1:
			client()
			surface()
		default:
			go surface()
			go client()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v", i, errs)
		}
		switch {
		case st == pb.ExecutionReply_STATUS_OK && d.Accepted && d.By == "bob":
			surfaceWon++
		case (st == pb.ExecutionReply_STATUS_ALREADY_DECIDED || !found) && !d.Accepted && d.By == "alice":
			// Not found: the question no longer waits; its settled
			// directory row makes the surface answer "already decided".
			if row, err := dir.GetExecution(context.Background(), pause); err != nil || row.Settled.IsZero() {
				t.Fatalf("round %d: the client's decision left the row %+v %v unsettled", i, row, err)
			}
		default:
			t.Fatalf("round %d: the surface got %v and the handler %+v: not one decision", i, st, d)
		}
		// Either way the decision stands for a later retry and surface.
		again, err := run(t, gc, toolCall("alice", "admin", ir.State, &mcp.ElicitResult{Action: "accept"}))
		if err != nil || again.Accepted != d.Accepted || again.By != d.By {
			t.Fatalf("round %d: a later retry got %+v %v, want %+v", i, again, err, d)
		}
	}
	if surfaceWon < 7 || surfaceWon > 13 {
		t.Fatalf("the surface won %d of 20 rounds, want its 7 rounds first and at most the 6 races besides", surfaceWon)
	}
	t.Logf("the surface won %d of 20 rounds (7 of them first in order)", surfaceWon)
}

// Hostile retries: another user's state, the same user with other
// arguments, an unknown call: ErrForeignCall, and no handler runs.
func TestASessionlessCallIsOnlyItsCallers(t *testing.T) {
	gc, _ := grainCalls(t)
	_, err := run(t, gc, toolCall("alice", "admin", "", nil))
	var ir *app.InputRequiredError
	if !errors.As(err, &ir) {
		t.Fatalf("the first run: %v", err)
	}
	other := toolCall("alice", "admin", ir.State, nil)
	other.Params.Arguments = json.RawMessage(`{"v":"2"}`)
	for name, req := range map[string]*mcp.CallToolRequest{
		"another user":    toolCall("mallory", "admin", ir.State, &mcp.ElicitResult{Action: "accept"}),
		"other arguments": other,
		"an unknown call": toolCall("alice", "admin", "mcpgrain-call.v1.call_0.exec_0", nil),
	} {
		if _, _, err := gc.Bind(context.Background(), req); !errors.Is(err, mcpruntime.ErrForeignCall) {
			t.Errorf("%s: %v, want ErrForeignCall", name, err)
		}
	}
	// Another organization's surface finds nothing to decide.
	pause := ir.State[len(ir.State)-len("exec_")-32:]
	st, found, err := gc.Decide(context.Background(), &pb.ExecutionDecide{ExecutionId: pause, Action: "accept",
		Principal: &pb.Principal{User: "eve", Org: "evil", Role: "admin"}})
	if err != nil || !found || st != pb.ExecutionReply_STATUS_NOT_FOUND {
		t.Fatalf("another organization's decision: %v %v %v, want NOT_FOUND", st, found, err)
	}
	st, _, _ = gc.Decide(context.Background(), &pb.ExecutionDecide{ExecutionId: pause, Action: "accept",
		Principal: &pb.Principal{User: "vic", Org: "acme", Role: "viewer"}})
	if st != pb.ExecutionReply_STATUS_FORBIDDEN {
		t.Fatalf("a viewer's decision: %v, want FORBIDDEN", st)
	}
}

// A step of an activation that lost its grain (another node acquired it)
// never runs its function: the fenced write before it fails, retryable.
// An activation that owns its grain runs it with the step's key.
func TestAStepOfALostGrainDoesNotRun(t *testing.T) {
	gc, st := grainCalls(t)
	step := func() (ran bool, key string, err error) {
		ctx, finish, err := gc.Bind(context.Background(), toolCall("ann", "admin", "", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer finish(false)
		c, err := app.CallOf(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Step(ctx, "deploy", func(ctx context.Context) (json.RawMessage, error) {
			ran, key = true, app.StepKeyOf(ctx)
			return json.RawMessage(`"ok"`), nil
		})
		return ran, key, err
	}
	if ran, key, err := step(); err != nil || !ran || !strings.HasSuffix(key, "/0/deploy") || !strings.HasPrefix(key, "call_") {
		t.Fatalf("the owner's step: ran %v, key %q, %v; want it run with key call_…/0/deploy", ran, key, err)
	}
	if _, err := st.Acquire(context.Background(), "continuation/c-n1-0", "n2"); err != nil {
		t.Fatal(err)
	}
	ran, _, err := step()
	if ran || !errors.Is(err, app.ErrRetry) {
		t.Fatalf("the deposed activation's step: ran %v, %v; want not run, a retryable error", ran, err)
	}
}
