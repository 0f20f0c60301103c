package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// taskExt is the MCP tasks extension's identifier.
const taskExt = "io.modelcontextprotocol/tasks"

// rpcAnswer is the JSON-RPC answer to a raw 2026-07-28 request.
type rpcAnswer struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// modern posts one 2026-07-28 request to endpoint as token's user,
// declaring the tasks extension (go-sdk v1.8.0's client has no tasks:
// the requests are written by hand, as a client that has them sends
// them). name is the Mcp-Name header.
func modern(t *testing.T, endpoint, token, method, name string, params map[string]any) rpcAnswer {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    sessionless,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "deploy-task-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{taskExt: map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", sessionless)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	raw := b.Bytes()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(d) != "" {
				raw = []byte(d)
			}
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: HTTP %d %q: %v", method, resp.StatusCode, raw, err)
	}
	return a
}

// deployTask calls deploy as a task at endpoint and returns the task id.
func deployTask(t *testing.T, endpoint, token, service, version string) string {
	t.Helper()
	a := modern(t, endpoint, token, "tools/call", "deploy", map[string]any{"name": "deploy", "arguments": map[string]any{"service": service, "version": version}})
	id, _ := a.Result["taskId"].(string)
	if a.Error != nil || a.Result["resultType"] != "task" || id == "" {
		t.Fatalf("deploy %s %s as a task: %+v, want a CreateTaskResult", service, version, a)
	}
	return id
}

// awaitStatus polls tasks/get as token's user until task id is in status
// want, and returns the task.
func awaitStatus(t *testing.T, endpoint, token, id, want string) map[string]any {
	t.Helper()
	var last rpcAnswer
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		last = modern(t, endpoint, token, "tasks/get", id, map[string]any{"taskId": id})
		if last.Error == nil && last.Result["status"] == want {
			return last.Result
		}
		if st, _ := last.Result["status"].(string); st == "completed" || st == "failed" || st == "cancelled" {
			break // settled otherwise: it will not change
		}
	}
	t.Fatalf("task %s not %s within 60s: %+v", id, want, last)
	return nil
}

// taskText is the text of a completed task's tool result.
func taskText(t *testing.T, task map[string]any) string {
	t.Helper()
	res, _ := task["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) != 1 || res["isError"] == true {
		t.Fatalf("task result %+v, want one text", res)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}

// update answers the task's approval request with tasks/update.
func update(t *testing.T, endpoint, token, id, action string) rpcAnswer {
	t.Helper()
	return modern(t, endpoint, token, "tasks/update", id, map[string]any{"taskId": id,
		"inputResponses": map[string]any{"approval": map[string]any{"action": action, "content": map[string]any{}}}})
}

// approveCLI runs `deploy approve ACTION ID` as token's user and returns
// its error and output.
func (s *server) approveCLI(token string, args ...string) (string, error) {
	cmd := exec.Command(binary(s.t), append([]string{"approve"}, append(args, "--grpc", s.grpc)...)...)
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// deploy run as an MCP task: its Ask makes the task input_required with
// the approval request while the question is listed on the approval
// surfaces, owned by the task; a member's accept over HTTP resumes the
// task, which completes with the one deployment and says who approved; a
// second decision is 409. A second task is declined with the CLI: it
// completes with the decline, nothing deployed.
func TestTaskDeployApprovedOverHTTPDeclinedWithTheCLI(t *testing.T) {
	s := newServer(t)
	s.start()
	id := deployTask(t, s.endpoint, aliceToken, "api", "1.2.3")
	task := awaitStatus(t, s.endpoint, aliceToken, id, "input_required")
	requests, _ := task["inputRequests"].(map[string]any)
	q, _ := requests["approval"].(map[string]any)
	qp, _ := q["params"].(map[string]any)
	if q["method"] != "elicitation/create" || qp["message"] != "Deploy api 1.2.3?" {
		t.Fatalf("input requests %+v, want the approval of deploy api 1.2.3", requests)
	}
	p := s.awaitPause("Deploy api 1.2.3?")
	if p.SessionID != id || p.Tool != "deploy" {
		t.Fatalf("listed %+v, want the deploy question owned by task %s", p, id)
	}
	if n := s.lines("deployed api 1.2.3"); n != 0 {
		t.Fatalf("%d deployments before the decision", n)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	task = awaitStatus(t, s.endpoint, aliceToken, id, "completed")
	if got, want := taskText(t, task), "deployed api 1.2.3, approved by bob"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed api 1.2.3"); n != 1 {
		t.Fatalf("%d deployments, want 1", n)
	}
	if n := s.lines("requested api 1.2.3"); n != 2 {
		t.Fatalf("the work before Ask ran %d times, want 2 (the round that asked, the round the decision resumed)", n)
	}
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusConflict {
		t.Fatalf("a second decision: %d, want 409", code)
	}

	id = deployTask(t, s.endpoint, aliceToken, "api", "9.9.9")
	awaitStatus(t, s.endpoint, aliceToken, id, "input_required")
	p = s.awaitPause("Deploy api 9.9.9?")
	if out, err := s.approveCLI(bobToken, "decline", p.ID, "--reason", "not on a friday"); err != nil {
		t.Fatalf("deploy approve decline: %v\n%s", err, out)
	}
	task = awaitStatus(t, s.endpoint, aliceToken, id, "completed")
	if got, want := taskText(t, task), `deploy of api 9.9.9 declined by "bob": not on a friday`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed api 9.9.9"); n != 0 {
		t.Fatalf("%d deployments of a declined version", n)
	}
}

// A viewer's task waits for an approver: the viewer's own decision is
// refused on every surface it reaches — tasks/update (-32003,
// insufficient_role), the HTTP API (403), the CLI over gRPC — and the
// task still waits, nothing deployed; an admin's accept over HTTP then
// completes it. The task's owner, an admin, may decide with tasks/update.
func TestTaskDeployRefusesAViewerOnEverySurface(t *testing.T) {
	s := newServer(t)
	s.start()
	id := deployTask(t, s.endpoint, vicToken, "web", "4.0.0")
	awaitStatus(t, s.endpoint, vicToken, id, "input_required")
	p := s.awaitPause("Deploy web 4.0.0?")
	if a := update(t, s.endpoint, vicToken, id, "accept"); a.Error == nil || a.Error.Code != -32003 || !strings.Contains(string(a.Error.Data), "insufficient_role") ||
		!strings.Contains(string(a.Error.Data), p.ID) {
		t.Fatalf("the viewer's tasks/update: %+v, want -32003 insufficient_role naming %s", a, p.ID)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", vicToken, `{"action":"accept"}`); code != http.StatusForbidden {
		t.Fatalf("the viewer's accept over HTTP: %d %s, want 403", code, body)
	}
	if out, err := s.approveCLI(vicToken, "accept", p.ID); err == nil {
		t.Fatalf("the viewer's accept with the CLI succeeded:\n%s", out)
	}
	if task := awaitStatus(t, s.endpoint, vicToken, id, "input_required"); task["status"] != "input_required" {
		t.Fatalf("after the refusals: %+v", task)
	}
	if n := s.lines("deployed web 4.0.0"); n != 0 {
		t.Fatalf("%d deployments after a viewer's decisions", n)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", aliceToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("alice's accept: %d %s", code, body)
	}
	task := awaitStatus(t, s.endpoint, vicToken, id, "completed")
	if got, want := taskText(t, task), "deployed web 4.0.0, approved by alice"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}

	id = deployTask(t, s.endpoint, aliceToken, "web", "4.0.1")
	awaitStatus(t, s.endpoint, aliceToken, id, "input_required")
	if a := update(t, s.endpoint, aliceToken, id, "accept"); a.Error != nil {
		t.Fatalf("alice's tasks/update: %+v", a)
	}
	task = awaitStatus(t, s.endpoint, aliceToken, id, "completed")
	if got, want := taskText(t, task), "deployed web 4.0.1, approved by alice"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed web 4.0.0") + s.lines("deployed web 4.0.1"); n != 2 {
		t.Fatalf("%d deployments, want 2", n)
	}
}

// Nobody decides a task's question within the approval window: the
// task's approval reminder declines it (approval_timeout, by nobody) and
// resumes the task, which completes without deploying.
func TestTaskDeployDeclinedWhenTheApprovalWindowLapses(t *testing.T) {
	s := newServer(t)
	s.start("--approval-window", "2s")
	id := deployTask(t, s.endpoint, aliceToken, "db", "3.0.0")
	s.awaitPause("Deploy db 3.0.0?")
	task := awaitStatus(t, s.endpoint, aliceToken, id, "completed")
	if got, want := taskText(t, task), `deploy of db 3.0.0 declined by "": approval_timeout`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed db 3.0.0"); n != 0 {
		t.Fatalf("%d deployments after the window lapsed", n)
	}
}

// kill -9 of the node while the task waits for its decision: started
// again on the same store, the same question is listed, a member's accept
// on the new process resumes the task from its journal, and it deploys
// exactly once.
func TestTaskDeployDecisionSurvivesKillOfTheNode(t *testing.T) {
	s := newServer(t)
	s.start()
	id := deployTask(t, s.endpoint, aliceToken, "web", "2.0.0")
	awaitStatus(t, s.endpoint, aliceToken, id, "input_required")
	p := s.awaitPause("Deploy web 2.0.0?")
	s.kill()

	s.start()
	if again := s.awaitPause("Deploy web 2.0.0?"); again.ID != p.ID {
		t.Fatalf("after the restart %s is listed, want %s", again.ID, p.ID)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	task := awaitStatus(t, s.endpoint, aliceToken, id, "completed")
	if got, want := taskText(t, task), "deployed web 2.0.0, approved by bob"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed web 2.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
}

// A task cancelled while it waits for its decision takes its question
// off the approval surfaces (withdrawn by the task grain, not decided):
// it is no longer listed, a decision finds it settled, and nothing is
// deployed.
func TestCancelledTaskDeployLeavesTheApprovalSurfaces(t *testing.T) {
	s := newServer(t)
	s.start()
	id := deployTask(t, s.endpoint, aliceToken, "cache", "1.0.0")
	awaitStatus(t, s.endpoint, aliceToken, id, "input_required")
	p := s.awaitPause("Deploy cache 1.0.0?")
	if a := modern(t, s.endpoint, aliceToken, "tasks/cancel", id, map[string]any{"taskId": id}); a.Error != nil {
		t.Fatalf("tasks/cancel: %+v", a)
	}
	awaitStatus(t, s.endpoint, aliceToken, id, "cancelled")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := api(t, http.MethodGet, s.approvals, bobToken, "")
		if code == http.StatusOK && !strings.Contains(string(body), p.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled task's question is still listed after 60s: %s", body)
		}
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code == http.StatusOK {
		t.Fatalf("an accept of the withdrawn question: %d %s", code, body)
	}
	if task := awaitStatus(t, s.endpoint, aliceToken, id, "cancelled"); task["status"] != "cancelled" {
		t.Fatalf("after the late accept: %+v", task)
	}
	if n := s.lines("deployed cache 1.0.0"); n != 0 {
		t.Fatalf("%d deployments of a cancelled task", n)
	}
}
