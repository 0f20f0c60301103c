package systemtest

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// taskExt is the tasks extension's identifier.
const taskExt = "io.modelcontextprotocol/tasks"

// rpcAnswer is a JSON-RPC answer to a raw 2026-07-28 request.
type rpcAnswer struct {
	status int
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// modernCall posts one 2026-07-28 request as token, declaring the tasks
// extension when withTasks, with the routing headers a client sends
// (Mcp-Name: name, unless name is empty).
func modernCall(t *testing.T, addr, token, method, name string, params map[string]any, withTasks bool) rpcAnswer {
	t.Helper()
	caps := map[string]any{}
	if withTasks {
		caps["extensions"] = map[string]any{taskExt: map[string]any{}}
	}
	hc := &http.Client{Transport: mcpclient.Bearer(token, nil)}
	status, raw, err := mcpclient.PostModern(t.Context(), hc, "http://"+addr+"/mcp", 7, method, name, "test", caps, params)
	if err != nil {
		t.Fatal(err)
	}
	a := rpcAnswer{status: status}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: answer %q: %v", method, raw, err)
	}
	return a
}

// startTask calls slow_compute as a task and returns its id.
func startTask(t *testing.T, addr, token string, seconds int) string {
	t.Helper()
	a := modernCall(t, addr, token, "tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": seconds}}, true)
	id, _ := a.Result["taskId"].(string)
	if a.Error != nil || a.Result["resultType"] != "task" || id == "" {
		t.Fatalf("slow_compute: %+v, want a CreateTaskResult", a)
	}
	return id
}

func taskCall(t *testing.T, addr, token, method, id string) rpcAnswer {
	t.Helper()
	return modernCall(t, addr, token, method, id, map[string]any{"taskId": id, "inputResponses": map[string]any{}}, true)
}

// A task is its creator's: another principal's tasks/get, tasks/update
// and tasks/cancel find nothing (the same -32602 as an unknown id), and
// leave the task as it was.
func TestTasksOfAnotherPrincipalAreNotFound(t *testing.T) {
	addr := startNode(t, nil)
	id := startTask(t, addr, aliceToken, 60)
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if a := taskCall(t, addr, bobToken, method, id); a.Error == nil || a.Error.Code != -32602 || a.Error.Message != "task not found" {
			t.Errorf("bob's %s of alice's task: %+v, want -32602 task not found", method, a)
		}
	}
	for _, bad := range []string{"task-0123", "../" + id, id + "/x", strings.Repeat("a", 200), "task-\u00e9"} {
		unknown := taskCall(t, addr, aliceToken, "tasks/get", bad)
		if unknown.Error == nil || unknown.Error.Code != -32602 || unknown.Error.Message != "task not found" {
			t.Errorf("task id %q: %+v, want the same -32602", bad, unknown)
		}
	}
	if a := taskCall(t, addr, aliceToken, "tasks/get", id); a.Error != nil || a.Result["status"] != "working" {
		t.Fatalf("alice's tasks/get after bob's attempts: %+v, want working", a)
	}
	if a := taskCall(t, addr, aliceToken, "tasks/cancel", id); a.Error != nil || len(a.Result) != 1 || a.Result["resultType"] != "complete" {
		t.Fatalf("alice's cancel: %+v, want the empty ack", a)
	}
	if a := taskCall(t, addr, aliceToken, "tasks/get", id); a.Result["status"] != "cancelled" {
		t.Fatalf("after cancel: %+v, want cancelled", a)
	}
}

// The gates every tasks/* request passes: the extension declared (-32021
// naming it), Mcp-Name naming the task (400, -32020), a string taskId.
func TestTaskMethodsCheckCapabilityHeaderAndParams(t *testing.T) {
	addr := startNode(t, nil)
	id := startTask(t, addr, aliceToken, 60)
	a := modernCall(t, addr, aliceToken, "tasks/get", id, map[string]any{"taskId": id}, false)
	if a.Error == nil || a.Error.Code != -32021 || !strings.Contains(string(a.Error.Data), taskExt) {
		t.Errorf("undeclared: %+v, want -32021 naming the extension", a)
	}
	a = modernCall(t, addr, aliceToken, "tasks/get", "task-other", map[string]any{"taskId": id}, true)
	if a.status != http.StatusBadRequest || a.Error == nil || a.Error.Code != -32020 {
		t.Errorf("mismatched Mcp-Name: HTTP %d %+v, want 400 -32020", a.status, a)
	}
	a = modernCall(t, addr, aliceToken, "tasks/get", "", map[string]any{"taskId": 42}, true)
	if a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("numeric taskId: %+v, want -32602", a)
	}
	// A tool that requires tasks, called without the extension.
	a = modernCall(t, addr, aliceToken, "tools/call", "failing_job", map[string]any{"name": "failing_job"}, false)
	if a.Error == nil || a.Error.Code != -32021 {
		t.Errorf("failing_job without the extension: %+v, want -32021", a)
	}
	taskCall(t, addr, aliceToken, "tasks/cancel", id)
}

// Code mode's execute is task-supporting: with the extension declared, an
// execution is a task; its pause for approval is the task's
// input_required (the approval request), and tasks/update with the
// decision resumes it to completed — the write runs once, after it.
func TestExecuteAsATaskPausesAsInputRequiredAndUpdateSettlesIt(t *testing.T) {
	info := startCodeNode(t, nil)
	addr := info.HTTPAddr
	a := modernCall(t, addr, aliceToken, "tools/call", "execute", map[string]any{"name": "execute", "arguments": map[string]any{"code": createCode}}, true)
	id, _ := a.Result["taskId"].(string)
	if a.Error != nil || a.Result["resultType"] != "task" || id == "" {
		t.Fatalf("execute: %+v, want a CreateTaskResult", a)
	}
	got := waitStatus(t, addr, id, "input_required")
	requests, _ := got.Result["inputRequests"].(map[string]any)
	if got.Result["status"] != "input_required" || len(requests) != 1 {
		t.Fatalf("paused execution: %+v, want input_required with the approval request", got)
	}
	if n := len(todos(t, addr, aliceToken)); n != 0 {
		t.Fatalf("%d todos before the approval", n)
	}
	for key := range requests {
		u := modernCall(t, addr, aliceToken, "tasks/update", id, map[string]any{"taskId": id,
			"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}}, true)
		if u.Error != nil || u.Result["resultType"] != "complete" {
			t.Fatalf("tasks/update: %+v", u)
		}
	}
	got = waitStatus(t, addr, id, "completed")
	res, _ := got.Result["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if got.Result["status"] != "completed" || sc["status"] != "completed" {
		t.Fatalf("after the approval: %+v, want the completed execution", got)
	}
	if n := len(todos(t, addr, aliceToken)); n != 1 {
		t.Fatalf("%d todos after the approval, want 1", n)
	}
}

// Any approval surface settles an execution paused in a task: the pause is
// in the execution directory (owned by the task), another member of the
// organization approves it over HTTP, and the task completes; another
// organization finds nothing.
func TestExecuteTaskPauseIsSettledByAnApprovalSurface(t *testing.T) {
	info := startCodeNode(t, nil)
	addr, base := info.HTTPAddr, "http://"+info.HTTPAddr
	a := modernCall(t, addr, aliceToken, "tools/call", "execute", map[string]any{"name": "execute", "arguments": map[string]any{"code": createCode}}, true)
	id, _ := a.Result["taskId"].(string)
	if got := waitStatus(t, addr, id, "input_required"); got.Result["status"] != "input_required" {
		t.Fatalf("execute task: %+v, want input_required", got)
	}
	r := api(t, "GET", base+"/api/executions", bobToken, "")
	list, _ := r.body["executions"].([]any)
	if r.status != 200 || len(list) != 1 {
		t.Fatalf("list: %d %v, want the task's pause", r.status, r.body)
	}
	exec := list[0].(map[string]any)
	execID, _ := exec["executionId"].(string)
	if exec["sessionId"] != id {
		t.Fatalf("listed pause %v, want it owned by task %s", exec, id)
	}
	url := base + "/api/executions/" + execID
	if r := api(t, "POST", url+"/resume", carolToken, `{"action":"accept"}`); r.status != 404 {
		t.Fatalf("other org decided: %d", r.status)
	}
	if r := api(t, "POST", url+"/resume", bobToken, `{"action":"accept"}`); r.status != 200 || r.body["status"] != "accepted" {
		t.Fatalf("accept: %d %v", r.status, r.body)
	}
	if got := waitStatus(t, addr, id, "completed"); got.Result["status"] != "completed" {
		t.Fatalf("after the HTTP approval: %+v, want completed", got)
	}
	if n := len(todos(t, addr, aliceToken)); n != 1 {
		t.Fatalf("%d todos, want 1", n)
	}
	if r := api(t, "POST", url+"/resume", aliceToken, `{"action":"decline"}`); r.status != 409 {
		t.Fatalf("second decision: %d %v, want 409", r.status, r.body)
	}
}

// Cancelling an execute task that waits for approval ends the paused
// execution too: it leaves the approval surfaces, and nothing runs.
func TestCancelledExecuteTaskLeavesTheApprovalSurfaces(t *testing.T) {
	info := startCodeNode(t, nil)
	addr, base := info.HTTPAddr, "http://"+info.HTTPAddr
	a := modernCall(t, addr, aliceToken, "tools/call", "execute", map[string]any{"name": "execute", "arguments": map[string]any{"code": createCode}}, true)
	id, _ := a.Result["taskId"].(string)
	if got := waitStatus(t, addr, id, "input_required"); got.Result["status"] != "input_required" {
		t.Fatalf("execute task: %+v, want input_required", got)
	}
	if r := api(t, "GET", base+"/api/executions", aliceToken, ""); len(r.body["executions"].([]any)) != 1 {
		t.Fatalf("list before the cancel: %v", r.body)
	}
	if c := taskCall(t, addr, aliceToken, "tasks/cancel", id); c.Error != nil || c.Result["resultType"] != "complete" {
		t.Fatalf("cancel: %+v", c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := api(t, "GET", base+"/api/executions", aliceToken, "")
		if len(r.body["executions"].([]any)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled task's pause is still listed: %v", r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := taskCall(t, addr, aliceToken, "tasks/get", id); got.Result["status"] != "cancelled" {
		t.Fatalf("after the cancel: %+v", got)
	}
	if n := len(todos(t, addr, aliceToken)); n != 0 {
		t.Fatalf("%d todos after the cancel, want 0", n)
	}
}

// A task lives for its TTL (ttlMs), no longer: then tasks/get finds it no
// more, and its grain is deleted from the store (ownership row and
// reminders), so tasks leave nothing behind.
func TestTaskExpiresAfterItsTTLAndLeavesNoGrain(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ttl.db")
	addr := startNode(t, func(c *app.Config) {
		c.Store = dsn
		c.MCP.TaskTTL = 2 * time.Second
		c.ReminderPoll = 100 * time.Millisecond
	})
	a := modernCall(t, addr, aliceToken, "tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}}, true)
	id, _ := a.Result["taskId"].(string)
	if a.Result["ttlMs"] != float64(2000) || id == "" {
		t.Fatalf("slow_compute: %+v, want a task with ttlMs 2000", a)
	}
	if got := taskCall(t, addr, aliceToken, "tasks/get", id); got.Error != nil {
		t.Fatalf("tasks/get within the TTL: %+v", got)
	}
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := st.Load(t.Context(), "task/"+id)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task's grain is still in the store 15 s after its 2 s TTL (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := taskCall(t, addr, aliceToken, "tasks/get", id); got.Error == nil || got.Error.Code != -32602 {
		t.Fatalf("tasks/get after the TTL: %+v, want -32602", got)
	}
}

// The task metrics count what happens to tasks: created, settled by
// status.
func TestTaskMetricsCountCreatedAndSettled(t *testing.T) {
	addr := startNode(t, func(c *app.Config) { c.NodeID = "tm" })
	p := metricsProbe{t, addr}
	done := startTask(t, addr, aliceToken, 0)
	if got := waitStatus(t, addr, done, "completed"); got.Result["status"] != "completed" {
		t.Fatalf("slow_compute 0: %+v", got)
	}
	running := startTask(t, addr, aliceToken, 60)
	if c := taskCall(t, addr, aliceToken, "tasks/cancel", running); c.Error != nil {
		t.Fatalf("cancel: %+v", c)
	}
	node := map[string]string{"node": "tm"}
	p.waitFor("two tasks", "mcpgrain_tasks_created_total", node, exactly(2))
	p.waitFor("completed", "mcpgrain_tasks_settled_total", map[string]string{"node": "tm", "status": "completed"}, exactly(1))
	p.waitFor("cancelled", "mcpgrain_tasks_settled_total", map[string]string{"node": "tm", "status": "cancelled"}, exactly(1))
	p.waitFor("none failed", "mcpgrain_tasks_settled_total", map[string]string{"node": "tm", "status": "failed"}, exactly(0))
	p.waitFor("none lost", "mcpgrain_tasks_lost_total", node, exactly(0))
}

// A node that stops gracefully lets the work of its tasks that is about
// to end finish and record its outcome, rather than losing it.
func TestGracefulStopLetsRunningTaskWorkFinish(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "drain.db")
	info, stop := startNodeStoppable(t, func(c *app.Config) { c.Store = dsn })
	// failing_job works about a second and is not safe to re-run (no
	// annotations): without the drain it would be lost.
	a := modernCall(t, info.HTTPAddr, aliceToken, "tools/call", "failing_job", map[string]any{"name": "failing_job"}, true)
	id, _ := a.Result["taskId"].(string)
	if id == "" {
		t.Fatalf("failing_job: %+v, want a task", a)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	task, err := taskstore.New(st).GetTask(t.Context(), id, time.Now())
	if err != nil || task.Status != "completed" || !strings.Contains(task.Result, `"isError":true`) {
		t.Fatalf("after the graceful stop: %+v %v, want completed with the tool error", task, err)
	}
}
