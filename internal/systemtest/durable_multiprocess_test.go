package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Durable paused executions on real 3-node clusters. The to-do API runs
// in the test process, shared by every node, so side effects are counted
// across node deaths and restarts.

const durableCode = `
	const before = (await tools.todo.listTodos({})).length;
	const r = Math.random();
	emit({r});
	const t = await tools.todo.createTodo({title: "ship it"});
	return {title: t.title, before, r, after: (await tools.todo.listTodos({})).length};`

// quietClient connects as token through node via, to a session owned by
// node owner, without the standalone SSE stream (which would wake a
// passivated session at once).
func quietClient(t *testing.T, c *testcluster.Cluster, via, owner int, token string) *mcp.ClientSession {
	t.Helper()
	table := sessionTable(c, 0, 1, 2)
	for range 40 {
		cl := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
		cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{
			Endpoint: "http://" + c.Node(via).HTTP + "/mcp", DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: mcpclient.Bearer(token, http.DefaultTransport)},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		if o, _ := table.Owner(session.KindName, cs.ID()); o.ID == c.Node(owner).ID {
			t.Cleanup(func() { _ = cs.Close() })
			return cs
		}
		_ = cs.Close()
	}
	t.Fatal("could not get a session owned by the wanted node")
	return nil
}

// pauseDurable runs durableCode and returns the paused execution's id.
func pauseDurable(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, sc := callTool(t, cs, "execute", map[string]any{"code": durableCode})
	id, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "waiting_for_interaction" || !strings.HasPrefix(id, "exec_") {
		t.Fatalf("execute: %s / %v", mcpclient.Text(res), sc)
	}
	return id
}

// passivateSoon are the lifecycle flags of a test that waits for an idle
// session holding only a durable pause to passivate: a 1 s idle timeout,
// and running leases of 1 s. An execution still running when the idle
// alarm fires (the execute that pauses, slow on a loaded machine) then
// keeps the session 1 s longer instead of the default 4 min; once only
// the durable pause is left, the next alarm passivates it. A pause that
// pinned the runtime would still extend a paused lease (4 min).
var passivateSoon = []string{"--session-timeout", "1s", "--running-lease", "1s"}

// waitPassivated waits until node n disposed a runtime for being idle and
// holds none.
func waitPassivated(t *testing.T, n *testcluster.Node) {
	t.Helper()
	defer func() { // passed or not: the leases that kept the session (passivateSoon)
		for _, l := range n.LogLines("_lease_extension", 5) {
			t.Logf("%s: %s", n.ID, l)
		}
	}()
	waitMetric(t, n, `mcpgrain_runtime_disposals_total{node="`+n.ID+`",reason="idle"}`, 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v, ok := n.Metric("mcpgrain_resident_runtimes{"); ok && v == 0 {
			return
		}
		if time.Now().After(deadline) {
			v, _ := n.Metric("mcpgrain_resident_runtimes{")
			t.Fatalf("%s still holds %v runtimes", n.ID, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// completed checks a finished durableCode result.
func completed(t *testing.T, res *mcp.CallToolResult, sc map[string]any) map[string]any {
	t.Helper()
	r, _ := sc["result"].(map[string]any)
	if res.IsError || sc["status"] != "completed" || r["title"] != "ship it" || r["before"] != float64(0) || r["after"] != float64(1) {
		t.Fatalf("result: %s / %v", mcpclient.Text(res), sc)
	}
	em, _ := sc["emitted"].([]any)
	if len(em) != 1 || fmt.Sprint(em[0].(map[string]any)["r"]) != fmt.Sprint(r["r"]) {
		t.Fatalf("emits not reconstructed exactly once: %v (result r %v)", sc["emitted"], r["r"])
	}
	return r
}

// On a three-node cluster a durable pause outlives its session's
// passivation (its runtime is gone); an approval over gRPC restores the
// execution and runs the write once.
func TestDurablePauseSurvivesPassivationApprovedOverGRPC(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, GRPC: true, ExtraArgs: append([]string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t)}, passivateSoon...)})
	owner := c.Node(1)
	cs := quietClient(t, c, 0, 1, aliceToken)
	heapBefore, _ := owner.Metric("go_memstats_heap_inuse_bytes{")
	id := pauseDurable(t, cs)
	heapPaused, _ := owner.Metric("go_memstats_heap_inuse_bytes{")

	// Only a durable pause: the session passivates at its idle timeout and
	// the runtime (the parked goroutine and its JS runtime) is gone.
	waitPassivated(t, owner)
	heapAfter, _ := owner.Metric("go_memstats_heap_inuse_bytes{")
	t.Logf("owner heap in use: %.1f MiB before the execution, %.1f MiB paused, %.1f MiB after passivation",
		heapBefore/(1<<20), heapPaused/(1<<20), heapAfter/(1<<20))
	if n := len(api.Todos()); n != 0 {
		t.Fatalf("%d todos before approval", n)
	}

	// The approval reaches the passivated session, which restores the
	// execution by replay and applies it.
	client := approvalClient(t, c.Node(2).GRPC)
	got, err := client.GetPausedExecution(withToken(t, bobToken), &pb.GetPausedExecutionRequest{ExecutionId: id})
	if err != nil || got.GetExecution().GetAddress() != "todo.createTodo" {
		t.Fatalf("get a passivated pause: %v %v", got, err)
	}
	d, err := client.DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept"})
	if err != nil || d.GetStatus() != "accepted" {
		t.Fatalf("decide: %v %v", d, err)
	}
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id})
	completed(t, res, sc)
	if todos := api.Todos(); len(todos) != 1 || todos[0].Title != "ship it" {
		t.Fatalf("side effects %+v, want exactly one", todos)
	}
	// The journaled reads were answered from the journal, not re-sent:
	// the restore shows in the owner's log with its replay time.
	if !owner.LogContains("restored paused execution by replay") {
		t.Fatal("no restore logged")
	}

	// Divergence: a second pause whose journal no longer matches what the
	// code asks for (as if the code depended on something unrecorded).
	cs2 := quietClient(t, c, 0, 2, aliceToken)
	res, sc = callTool(t, cs2, "execute", map[string]any{"code": createTodoCode})
	id2, _ := sc["executionId"].(string)
	if res.IsError || id2 == "" {
		t.Fatalf("execute: %s", mcpclient.Text(res))
	}
	waitPassivated(t, c.Node(2))
	tamperFirstCall(t, c.DSN, id2)
	// The restored pause is dormant (nothing is replayed before a decision
	// comes), so the decision is taken; its replay then diverges, and the
	// execution ends with that error instead of sending anything.
	if _, err := client.DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id2, Action: "accept"}); err != nil &&
		status.Code(err) != codes.NotFound && status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("decide a diverged execution: %v", err)
	}
	res, sc = callTool(t, cs2, "resume", map[string]any{"executionId": id2, "action": "accept"})
	if !res.IsError || !strings.Contains(fmt.Sprint(sc["error"]), "execution_diverged") {
		t.Fatalf("diverged resume: %s / %v", mcpclient.Text(res), sc)
	}
	if n := len(api.Todos()); n != 1 {
		t.Fatalf("a diverged replay sent the call: %d todos", n)
	}
}

const createTodoCode = `return (await tools.todo.createTodo({title: "diverge"})).title`

// tamperFirstCall rewrites the journaled hash of the first call of the run
// that paused with execID.
func tamperFirstCall(t *testing.T, dsn, execID string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runID, err := runstore.New(st).RunByPause(ctx, execID)
	if err != nil {
		t.Fatal(err)
	}
	run, entries, err := runstore.New(st).GetRun(ctx, runID)
	if err != nil || len(entries) == 0 {
		t.Fatalf("run %v entries %v: %v", run, entries, err)
	}
	var c map[string]any
	_ = json.Unmarshal([]byte(entries[0].Data), &c)
	c["hash"] = engine.CallHash("todo.createTodo", map[string]any{"title": "something else"})
	b, _ := json.Marshal(c)
	entries[0].Data = string(b)
	own, err := st.Load(ctx, "session/"+run.Session)
	if err != nil {
		t.Fatal(err)
	}
	if err := runstore.New(st).PutJournalEntry(ctx, own.Grain, own.Epoch, runID, entries[0]); err != nil {
		t.Fatal(err)
	}
}

// decideHTTP approves execID through node n's HTTP approval route, retrying
// while the cluster moves the session (unavailable answers).
func decideHTTP(t *testing.T, n *testcluster.Node, execID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := api(t, "POST", "http://"+n.HTTP+"/api/executions/"+execID+"/resume", bobToken, `{"action":"accept"}`)
		if r.status == http.StatusOK {
			return
		}
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("decide via %s: %d %v", n.ID, r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The node holding a durable pause is killed; a decision over HTTP on
// another node restores the execution on the new owner, which runs the
// write once.
func TestDurablePauseSurvivesKillOfItsNode(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t)}})
	cs := quietClient(t, c, 0, 1, aliceToken)
	id := pauseDurable(t, cs)

	c.Kill(1) // kill -9: the parked goroutine dies with the process
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)
	decideHTTP(t, c.Node(2), id)
	// The new owner restored the execution and ran the approved call once.
	deadline := time.Now().Add(20 * time.Second)
	for len(api.Todos()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if todos := api.Todos(); len(todos) != 1 || todos[0].Title != "ship it" {
		t.Fatalf("side effects %+v, want exactly one", todos)
	}
	newOwner, _ := c.Placement(session.KindName, 0, 2).Owner(session.KindName, cs.ID())
	var restored bool
	for _, i := range []int{0, 2} {
		if c.Node(i).ID == newOwner.ID {
			restored = c.Node(i).LogContains("restored paused execution by replay")
		}
	}
	if !restored {
		t.Fatalf("new owner %s did not restore the execution", newOwner.ID)
	}

	// The resume forward: another session of alice finds the execution
	// through the directory and gets its result from the new owner.
	other := connect(t, c.Node(0).HTTP, aliceToken, "2025-11-25", nil)
	res, sc := callTool(t, other, "resume", map[string]any{"executionId": id, "action": "accept"})
	first := completed(t, res, sc)
	// And the original client gets the same result.
	res, sc = callTool(t, cs, "resume", map[string]any{"executionId": id})
	if again := completed(t, res, sc); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("results differ: %v vs %v", again, first)
	}
	if n := len(api.Todos()); n != 1 {
		t.Fatalf("%d todos after the resumes", n)
	}
}

// A resume from another session of the principal reaches a pause whose
// node was killed: it travels on the SDK's continuation route (an
// AskContinue to the session grain, docs/sdk.md §6 "One pause path"),
// which activates the session on a survivor and restores the execution by
// replay before resuming it. Another user is refused and another
// organization does not find it, before and through the move; the write
// runs once, and the original client replays the result.
func TestCrossSessionResumeAfterKillOfTheOwnersNode(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t)}})
	cs := quietClient(t, c, 0, 1, aliceToken)
	id := pauseDurable(t, cs)

	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)
	for _, h := range []struct{ who, token, status string }{
		{"bob", bobToken, "execution_forbidden"},
		{"carol", carolToken, "execution_not_found"},
	} {
		s := connect(t, c.Node(0).HTTP, h.token, "2025-11-25", nil)
		if res, sc := callTool(t, s, "resume", map[string]any{"executionId": id, "action": "accept"}); !res.IsError || sc["status"] != h.status {
			t.Fatalf("%s's resume: %v, want %s", h.who, sc, h.status)
		}
	}
	if n := len(api.Todos()); n != 0 {
		t.Fatalf("a refused resume ran the write: %d todos", n)
	}
	other := connect(t, c.Node(0).HTTP, aliceToken, "2025-11-25", nil)
	res, sc := callTool(t, other, "resume", map[string]any{"executionId": id, "action": "accept"})
	first := completed(t, res, sc)
	newOwner, _ := c.Placement(session.KindName, 0, 2).Owner(session.KindName, cs.ID())
	for _, i := range []int{0, 2} {
		if n := c.Node(i); n.ID == newOwner.ID {
			if !n.LogContains("resume from another session on the continuation route") || !n.LogContains("restored paused execution by replay") {
				t.Fatalf("new owner %s: no restore and continuation-route resume in its log", n.ID)
			}
		}
	}
	res, sc = callTool(t, cs, "resume", map[string]any{"executionId": id})
	if again := completed(t, res, sc); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("results differ: %v vs %v", again, first)
	}
	if n := len(api.Todos()); n != 1 {
		t.Fatalf("%d todos after the resumes", n)
	}
}

// Every node of the cluster stops and starts again; the durable pause is
// still listed, and approving it restores the execution and runs the write
// once.
func TestDurablePauseSurvivesWholeClusterRestart(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, GRPC: true, ExtraArgs: []string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t)}})
	cs := quietClient(t, c, 0, 1, aliceToken)
	id := pauseDurable(t, cs)

	for i := range 3 {
		c.Stop(i)
	}
	for i := range 3 {
		c.Start(i)
	}
	for i := range 3 {
		c.Node(i).WaitReady(30 * time.Second)
	}
	c.WaitMembers(3, 30*time.Second)

	client := approvalClient(t, c.Node(0).GRPC)
	list, err := client.ListPausedExecutions(withToken(t, bobToken), &pb.ListPausedExecutionsRequest{})
	if err != nil || len(list.GetExecutions()) != 1 || list.GetExecutions()[0].GetExecutionId() != id {
		t.Fatalf("list after restart: %v %v", list, err)
	}
	if d, err := client.DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept"}); err != nil || d.GetStatus() != "accepted" {
		t.Fatalf("decide: %v %v", d, err)
	}
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id})
	completed(t, res, sc)
	if todos := api.Todos(); len(todos) != 1 {
		t.Fatalf("side effects %+v, want exactly one", todos)
	}
	restored := false
	for _, n := range c.Nodes() {
		restored = restored || n.LogContains("restored paused execution by replay")
	}
	if !restored {
		t.Fatal("no node logged the restore")
	}
}

// The approval deadline of a passivated session's durable pause still
// fires: its reminder wakes the session, which restores the execution by
// replay and declines it; the code goes on exactly as after an in-memory
// decline.
func TestDurablePauseDeadlineWakesAPassivatedSession(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: append([]string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t), "--approval-window", "4s"}, passivateSoon...)})
	cs := quietClient(t, c, 0, 1, aliceToken)
	res, sc := callTool(t, cs, "execute", map[string]any{"code": `
		try { await tools.todo.createTodo({title: "late"}) } catch (e) { return "went on: " + e.message }`})
	id, _ := sc["executionId"].(string)
	if res.IsError || id == "" {
		t.Fatalf("execute: %s", mcpclient.Text(res))
	}
	waitPassivated(t, c.Node(1))
	waitMetric(t, c.Node(1), `mcpgrain_approvals_total{node="`+c.Node(1).ID+`",outcome="timeout"}`, 1)
	if !c.Node(1).LogContains("restored paused execution by replay") {
		t.Fatal("the deadline did not restore the execution")
	}
	res, sc = callTool(t, cs, "resume", map[string]any{"executionId": id})
	if res.IsError || sc["status"] != "completed" || !strings.Contains(fmt.Sprint(sc["result"]), "went on: The call to todo.createTodo was declined by the user (approval_timeout)") {
		t.Fatalf("after the deadline: %s / %v", mcpclient.Text(res), sc)
	}
	if n := len(api.Todos()); n != 0 {
		t.Fatalf("a declined call ran: %d todos", n)
	}
}

// A 2026-07-28 (sessionless) execution paused for approval is durable too:
// its continuation grain journals it, so the retry that brings the
// decision completes it after the grain's node was killed — on the
// continuation grain's new owner, which restores the execution from the
// journal on demand — with exactly one side effect.
func TestSessionlessDurablePauseSurvivesKillOfItsNode(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t)}})
	// Through node 1: a fresh sessionless request runs on a continuation
	// grain that node owns.
	viaB := mrtrClient(t, c.Node(1).HTTP, aliceToken)
	first, err := viaB.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": durableCode}})
	if err != nil || !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("execute: %+v %v, want input_required", first, err)
	}
	if len(api.Todos()) != 0 {
		t.Fatal("the write ran before its approval")
	}

	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)
	viaC := mrtrClient(t, c.Node(2).HTTP, aliceToken)
	retry := &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": durableCode},
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}},
		RequestState:   first.RequestState}
	res, err := viaC.CallTool(t.Context(), retry)
	if err != nil {
		t.Fatalf("retry after the kill: %v", err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	completed(t, res, sc)
	if todos := api.Todos(); len(todos) != 1 || todos[0].Title != "ship it" {
		t.Fatalf("side effects %+v, want exactly one", todos)
	}
	restored := c.Node(0).LogContains("restored a paused execution on demand") || c.Node(2).LogContains("restored a paused execution on demand")
	if !restored {
		t.Fatal("no survivor logged the on-demand restore")
	}
	// The same retry again (a client that lost the answer) replays the
	// settled outcome; the write is not repeated.
	res, err = viaC.CallTool(t.Context(), retry)
	if err != nil {
		t.Fatalf("repeated retry: %v", err)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["status"] != "completed" {
		t.Fatalf("repeated retry: %s", mcpclient.Text(res))
	}
	if n := len(api.Todos()); n != 1 {
		t.Fatalf("%d todos after the repeated retry", n)
	}
}
