package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// requested is what request_deploy answered.
type requested struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// requestDeploy calls request_deploy, which returns at once.
func requestDeploy(t *testing.T, cs *mcp.ClientSession, service, version string) requested {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_deploy", Arguments: map[string]any{"service": service, "version": version}})
	if err != nil || res.IsError {
		t.Fatalf("request_deploy: %v %s", err, mcpclient.Text(res))
	}
	var r requested
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		t.Fatalf("request_deploy answered %s, want an id and a URL", b)
	}
	if want := "waiting for approval: " + r.URL; !strings.HasPrefix(mcpclient.Text(res), want) {
		t.Fatalf("request_deploy said %q, want it to start with %q", mcpclient.Text(res), want)
	}
	return r
}

// status calls deploy_status for id and returns its text, or the tool's
// error text (isErr).
func status(t *testing.T, cs *mcp.ClientSession, id string) (text string, isErr bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_status", Arguments: map[string]any{"id": id}})
	if err != nil {
		t.Fatalf("deploy_status: %v", err)
	}
	return mcpclient.Text(res), res.IsError
}

// wantStatus checks deploy_status's answer.
func wantStatus(t *testing.T, cs *mcp.ClientSession, id, want string) {
	t.Helper()
	if got, isErr := status(t, cs, id); isErr || !strings.HasPrefix(got, want) {
		t.Fatalf("deploy_status: %q (error %v), want it to start with %q", got, isErr, want)
	}
}

// request_deploy publishes its question without waiting (AskLater) and
// answers at once with the question's id and approval page; the question
// is listed on the HTTP API like deploy's. deploy_status reads it: from
// the session that asked and from another session of the same user, never
// for another user (bob, same organization: refused) or another
// organization (eve: unknown). A viewer's accept is 403. The node is
// killed (kill -9) and started again before the decision, and the session
// passivates (--session-timeout) while the question waits: the question
// is still listed, a member's accept over HTTP reaches it, deploy_status
// then deploys exactly once (a second status call, and the other session,
// find it deployed), a second decision is 409, and a second request
// declined with the CLI is reported declined.
func TestRequestDeployDecidedOverHTTPReadByDeployStatus(t *testing.T) {
	s := newServer(t)
	s.start("--session-timeout", "1s")
	cs := s.connect(aliceToken)

	r := requestDeploy(t, cs, "api", "4.0.0")
	if want := "http://" + s.http + "/approve/" + r.ID; r.URL != want {
		t.Fatalf("approval URL %q, want %q", r.URL, want)
	}
	p := s.awaitPause("Deploy api 4.0.0?")
	if p.ID != r.ID || p.Tool != "request_deploy" || string(p.Arguments) != `{"service":"api","version":"4.0.0"}` {
		t.Fatalf("listed %+v (arguments %s), want the request %s with the question's details", p, p.Arguments, r.ID)
	}
	wantStatus(t, cs, r.ID, "deploy of api 4.0.0 is waiting for approval")
	other := s.connect(aliceToken)
	wantStatus(t, other, r.ID, "deploy of api 4.0.0 is waiting for approval")
	if got, isErr := status(t, s.connect(bobToken), r.ID); !isErr || !strings.Contains(got, "another user's") {
		t.Fatalf("bob's deploy_status: %q (error %v), want refused as another user's", got, isErr)
	}
	if got, isErr := status(t, s.connect(eveToken), r.ID); !isErr || !strings.Contains(got, "no pending question") {
		t.Fatalf("eve's deploy_status: %q (error %v), want unknown", got, isErr)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", vicToken, `{"action":"accept"}`); code != http.StatusForbidden {
		t.Fatalf("a viewer's accept: %d %s, want 403", code, body)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", eveToken, `{"action":"accept"}`); code == http.StatusOK {
		t.Fatalf("another organization's accept: %d %s", code, body)
	}

	// No handler waits: the session passivates while the question waits.
	waitLogged(t, s, "mcp_session_idle_runtime_dispose", "reason=idle")
	s.kill()
	s.start("--session-timeout", "1s")
	if again := s.awaitPause("Deploy api 4.0.0?"); again.ID != r.ID {
		t.Fatalf("after the restart %s is listed, want %s", again.ID, r.ID)
	}
	wantStatus(t, cs, r.ID, "deploy of api 4.0.0 is waiting for approval")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	waitStatus(t, cs, r.ID, "deployed api 4.0.0, approved by bob")
	wantStatus(t, cs, r.ID, "deployed api 4.0.0, approved by bob")
	wantStatus(t, other, r.ID, "deployed api 4.0.0, approved by bob")
	if n := s.lines("deployed api 4.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusConflict {
		t.Fatalf("a second decision: %d, want 409 (already decided)", code)
	}

	d := requestDeploy(t, cs, "api", "9.9.9")
	s.awaitPause("Deploy api 9.9.9?")
	cmd := exec.Command(binary(t), "approve", "decline", d.ID, "--grpc", s.grpc, "--reason", "not on a friday")
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+bobToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy approve decline: %v\n%s", err, out)
	}
	waitStatus(t, other, d.ID, `deploy of api 9.9.9 declined by "bob": not on a friday`)
	if n := s.lines("deployed api 9.9.9"); n != 0 {
		t.Fatalf("%d deployments of a declined version", n)
	}
}

// Nobody decides a request within the approval window: the session's
// approval reminder declines it, deploy_status reports it expired, and
// nothing is deployed; a late accept is refused.
func TestRequestDeployExpiresWhenTheApprovalWindowLapses(t *testing.T) {
	s := newServer(t)
	s.start("--approval-window", "2s")
	cs := s.connect(aliceToken)
	r := requestDeploy(t, cs, "db", "5.0.0")
	wantStatus(t, cs, r.ID, "deploy of db 5.0.0 is waiting for approval")
	start := time.Now()
	waitStatus(t, cs, r.ID, "deploy of db 5.0.0 expired")
	t.Logf("expired %v after the request (window 2s)", time.Since(start).Round(time.Millisecond))
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code == http.StatusOK {
		t.Fatal("an accept after the window lapsed was taken")
	}
	wantStatus(t, cs, r.ID, "deploy of db 5.0.0 expired")
	if n := s.lines("deployed db 5.0.0"); n != 0 {
		t.Fatalf("%d deployments after the window lapsed", n)
	}
}

// waitStatus polls deploy_status until its answer starts with want (the
// decision is journaled by the session as it is taken: a moment after
// the surface answered).
func waitStatus(t *testing.T, cs *mcp.ClientSession, id, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var isErr bool
		if got, isErr = status(t, cs, id); !isErr && strings.HasPrefix(got, want) {
			return
		}
	}
	t.Fatalf("deploy_status still says %q after 60s, want %q", got, want)
}

// waitLogged waits until the node logged a line with every one of parts.
func waitLogged(t *testing.T, s *server, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !logged(s.stderr, parts...); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 60s", parts)
		}
	}
}

// Three deploy nodes (Consul, Postgres): request_deploy in a session that
// node 1 owns; deploy_status from another session of the same user, owned
// by node 2, reads it through the execution directory. Node 1 is killed
// (kill -9) before the decision: the request is still listed, a member's
// accept on node 2 reaches the session's new owner (503 until one takes
// it), and both sessions' deploy_status then report the one deployment.
func TestRequestDeployOnAClusterSurvivesKillOfTheOwner(t *testing.T) {
	c, log := startCluster(t)
	cs := ownedBy(t, c, 0, 1, aliceToken)
	other := ownedBy(t, c, 2, 2, aliceToken)

	r := requestDeploy(t, cs, "billing", "7.0.0")
	if p := awaitPause(t, "http://"+c.Node(2).HTTP+"/api/executions", "Deploy billing 7.0.0?"); p.ID != r.ID {
		t.Fatalf("listed %s, want %s", p.ID, r.ID)
	}
	wantStatus(t, other, r.ID, "deploy of billing 7.0.0 is waiting for approval")
	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)
	wantStatus(t, other, r.ID, "deploy of billing 7.0.0 is waiting for approval")

	url := "http://" + c.Node(2).HTTP + "/api/executions/" + r.ID + "/resume"
	var code int
	var answer []byte
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, answer = api(t, http.MethodPost, url, bobToken, `{"action":"accept"}`); code != http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, answer)
	}
	waitStatus(t, other, r.ID, "deployed billing 7.0.0, approved by bob")
	wantStatus(t, cs, r.ID, "deployed billing 7.0.0, approved by bob")
	if n := countLines(t, log, "deployed billing 7.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
}

// A principal holds at most --max-pending-asks-per-principal undecided
// questions (here 2): alice's third request_deploy is a tool error naming
// the cap, and nothing is listed for it; bob (same organization) and eve
// (another) each ask their two meanwhile — one principal's full cap
// never refuses another's (the hostile case: a tool asking in a loop);
// bob's decision of one of alice's questions frees her slot.
func TestRequestDeployCappedPerPrincipal(t *testing.T) {
	s := newServer(t)
	s.start("--max-pending-asks-per-principal", "2")
	alice := s.connect(aliceToken)
	first := requestDeploy(t, alice, "api", "1")
	requestDeploy(t, alice, "api", "2")
	res, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "request_deploy", Arguments: map[string]any{"service": "api", "version": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mcpclient.Text(res); !res.IsError || !strings.Contains(got, mcpgrain.ErrTooManyPendingAsks.Error()) ||
		!strings.Contains(got, "--max-pending-asks-per-principal") {
		t.Fatalf("alice's third request: %q (error %v), want the cap's error", got, res.IsError)
	}
	t.Logf("alice's third request answered: %s", mcpclient.Text(res))
	if code, body := api(t, http.MethodGet, s.approvals, bobToken, ""); code != http.StatusOK ||
		!strings.Contains(string(body), "Deploy api 2?") || strings.Contains(string(body), "Deploy api 3?") {
		t.Fatalf("listed: %d %s, want alice's two questions, not the refused one", code, body)
	}
	for _, tok := range []string{bobToken, eveToken} {
		cs := s.connect(tok)
		requestDeploy(t, cs, "web", "1")
		requestDeploy(t, cs, "web", "2")
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+first.ID+"/resume", bobToken, `{"action":"decline"}`); code != http.StatusOK {
		t.Fatalf("bob's decline: %d %s", code, body)
	}
	waitStatus(t, alice, first.ID, "deploy of api 1 declined by")
	requestDeploy(t, alice, "api", "3")
}
