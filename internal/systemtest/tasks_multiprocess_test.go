package systemtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// taskOwnedBy creates tasks through node via with call until one's task
// grain is owned by node owner, and returns its id.
func taskOwnedBy(t *testing.T, c *testcluster.Cluster, via, owner int, call func(addr string) string) string {
	t.Helper()
	table := c.Placement(exchange.KindTask, 0, 1, 2)
	for range 40 {
		id := call(c.Node(via).HTTP)
		if o, _ := table.Owner(exchange.KindTask, id); o.ID == c.Node(owner).ID {
			return id
		}
	}
	t.Fatal("could not get a task owned by the wanted node")
	return ""
}

// waitStatus polls tasks/get through addr until the task reaches want (or
// a terminal status), within 20 s.
func waitStatus(t *testing.T, addr, id, want string) rpcAnswer {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := taskCall(t, addr, aliceToken, "tasks/get", id)
		st, _ := a.Result["status"].(string)
		if st == want || st == "completed" || st == "failed" || st == "cancelled" || time.Now().After(deadline) {
			return a
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A task outlives the node that ran it: after kill -9 of the task grain's
// node, a survivor answers tasks/get; work that was running runs again
// there — slow_compute is read-only, so re-running it is safe — whether
// someone asks (tasks/get) or not (the lease reminder), and finishes; a
// task that waited for input resumes when tasks/update brings it, through
// any node. (A tool that is not safe to re-run ends failed instead:
// actors/tasks TestAfterLossRerunsOnlySafeToolsAFewTimes.)
func TestTaskOutlivesKillOfItsNode(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--tools", "conformance", "--keys-file", testcluster.KeysFile(t)}})
	asked := taskOwnedBy(t, c, 0, 1, func(addr string) string { return startTask(t, addr, aliceToken, 600) })
	waiting := taskOwnedBy(t, c, 0, 1, func(addr string) string {
		a := modernCall(t, addr, aliceToken, "tools/call", "confirm_delete",
			map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "a.txt"}}, true)
		id, _ := a.Result["taskId"].(string)
		if id == "" {
			t.Fatalf("confirm_delete: %+v, want a task", a)
		}
		return id
	})
	a := waitStatus(t, c.Node(2).HTTP, waiting, "input_required")
	requests, _ := a.Result["inputRequests"].(map[string]any)
	if a.Result["status"] != "input_required" || len(requests) != 1 {
		t.Fatalf("confirm_delete task: %+v, want input_required with one request", a)
	}
	// Last, so that it is still running at the kill (6 s of work).
	unasked := taskOwnedBy(t, c, 0, 1, func(addr string) string { return startTask(t, addr, aliceToken, 6) })

	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)

	a = taskCall(t, c.Node(2).HTTP, aliceToken, "tasks/get", asked)
	if msg, _ := a.Result["statusMessage"].(string); a.Result["status"] != "working" || !strings.Contains(msg, "resumed") {
		t.Fatalf("running task after the kill: %+v, want working again (resumed)", a)
	}
	if cancelled := taskCall(t, c.Node(0).HTTP, aliceToken, "tasks/cancel", asked); cancelled.Error != nil {
		t.Fatalf("cancel of the resumed task: %+v", cancelled)
	}
	for key := range requests {
		u := modernCall(t, c.Node(0).HTTP, aliceToken, "tasks/update", waiting, map[string]any{"taskId": waiting,
			"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}, true)
		if u.Error != nil || u.Result["resultType"] != "complete" {
			t.Fatalf("tasks/update through a survivor: %+v", u)
		}
	}
	a = waitStatus(t, c.Node(2).HTTP, waiting, "completed")
	res, _ := a.Result["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if a.Result["status"] != "completed" || len(content) != 1 || content[0].(map[string]any)["text"] != "Deleted a.txt" {
		t.Fatalf("confirm_delete after the kill: %+v, want completed", a)
	}

	// Nobody asks about the other running task: its lease reminder fires
	// on a survivor, which runs it again; it completes in the store.
	st, err := store.Open(t.Context(), c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(45 * time.Second)
	for {
		task, err := taskstore.New(st).GetTask(context.Background(), unasked, time.Now())
		if err == nil && task.Status == "completed" {
			if task.Attempts != 2 || !strings.Contains(task.StatusMessage, "resumed") {
				t.Fatalf("unasked task completed after %d runs (%q), want 2 (resumed once)", task.Attempts, task.StatusMessage)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unasked task %q (%v) 45 s after its node died, want completed", task.Status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The survivors counted both lost tasks as re-run, none as failed.
	var rerun, failed float64
	for _, i := range []int{0, 2} {
		v, _ := c.Node(i).Metric(`mcpgrain_tasks_lost_total{node="` + c.Node(i).ID + `",outcome="rerun"}`)
		f, _ := c.Node(i).Metric(`mcpgrain_tasks_lost_total{node="` + c.Node(i).ID + `",outcome="failed"}`)
		rerun, failed = rerun+v, failed+f
	}
	if rerun != 2 || failed != 0 {
		t.Fatalf("survivors counted %v re-run and %v failed lost tasks, want 2 and 0", rerun, failed)
	}
}

// Code mode's execute as a task, paused for approval on a node that is
// then killed: the approval (tasks/update through a survivor) resumes the
// execution from its journal, and the write runs exactly once.
func TestExecuteTaskPauseSurvivesKillOfItsNode(t *testing.T) {
	api, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{
		"--tools", "code", "--openapi", todoFlag, "--keys-file", testcluster.KeysFile(t)}})
	id := taskOwnedBy(t, c, 0, 1, func(addr string) string {
		a := modernCall(t, addr, aliceToken, "tools/call", "execute", map[string]any{"name": "execute", "arguments": map[string]any{"code": durableCode}}, true)
		id, _ := a.Result["taskId"].(string)
		if id == "" {
			t.Fatalf("execute: %+v, want a task", a)
		}
		return id
	})
	a := waitStatus(t, c.Node(0).HTTP, id, "input_required")
	requests, _ := a.Result["inputRequests"].(map[string]any)
	if a.Result["status"] != "input_required" || len(requests) != 1 || len(api.Todos()) != 0 {
		t.Fatalf("execute task: %+v (%d todos), want input_required before any write", a, len(api.Todos()))
	}

	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)
	for key := range requests {
		u := modernCall(t, c.Node(2).HTTP, aliceToken, "tasks/update", id, map[string]any{"taskId": id,
			"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}}, true)
		if u.Error != nil || u.Result["resultType"] != "complete" {
			t.Fatalf("tasks/update through a survivor: %+v", u)
		}
	}
	a = waitStatus(t, c.Node(0).HTTP, id, "completed")
	res, _ := a.Result["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if a.Result["status"] != "completed" || sc["status"] != "completed" {
		t.Fatalf("after the kill and the approval: %+v, want the completed execution", a)
	}
	if todos := api.Todos(); len(todos) != 1 || todos[0].Title != "ship it" {
		t.Fatalf("side effects %+v, want exactly one", todos)
	}
}
