package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// request_deploy and deploy_status with 2026-07-28 (sessionless) go-sdk
// clients: request_deploy's question is owned by its request's
// continuation grain and answered at once; deploy_status, a later request
// on another continuation grain, reads it for alice, refuses bob (same
// organization, another user) and is unknown to eve (another
// organization); a viewer's accept is 403. The node is killed (kill -9)
// and started again before the decision: the question is still listed
// and still pending, a member's accept over HTTP reaches the grain's new
// activation, deploy_status then deploys exactly once (again from a
// stateful session of alice's, and a second call), a second decision is
// 409.
func TestSessionlessRequestDeployReadByAnotherCallSurvivesKillOfTheNode(t *testing.T) {
	s := newServer(t)
	s.start()
	cs := connectModern(t, s.endpoint, aliceToken, manual)

	r := requestDeploy(t, cs, "web", "7.0.0")
	if want := "http://" + s.http + "/approve/" + r.ID; r.URL != want {
		t.Fatalf("approval URL %q, want %q", r.URL, want)
	}
	if p := s.awaitPause("Deploy web 7.0.0?"); p.ID != r.ID || p.Tool != "request_deploy" {
		t.Fatalf("listed %+v, want the request %s", p, r.ID)
	}
	wantStatus(t, cs, r.ID, "deploy of web 7.0.0 is waiting for approval")
	wantStatus(t, connectModern(t, s.endpoint, aliceToken, manual), r.ID, "deploy of web 7.0.0 is waiting for approval")
	if got, isErr := status(t, connectModern(t, s.endpoint, bobToken, manual), r.ID); !isErr || !strings.Contains(got, "another user's") {
		t.Fatalf("bob's deploy_status: %q (error %v), want refused as another user's", got, isErr)
	}
	if got, isErr := status(t, connectModern(t, s.endpoint, eveToken, manual), r.ID); !isErr || !strings.Contains(got, "no pending question") {
		t.Fatalf("eve's deploy_status: %q (error %v), want unknown", got, isErr)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", vicToken, `{"action":"accept"}`); code != http.StatusForbidden {
		t.Fatalf("a viewer's accept: %d %s, want 403", code, body)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", eveToken, `{"action":"accept"}`); code == http.StatusOK {
		t.Fatalf("another organization's accept: %d %s", code, body)
	}

	s.kill()
	s.start()
	if again := s.awaitPause("Deploy web 7.0.0?"); again.ID != r.ID {
		t.Fatalf("after the restart %s is listed, want %s", again.ID, r.ID)
	}
	wantStatus(t, cs, r.ID, "deploy of web 7.0.0 is waiting for approval")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	wantStatus(t, cs, r.ID, "deployed web 7.0.0, approved by bob")
	wantStatus(t, cs, r.ID, "deployed web 7.0.0, approved by bob")
	wantStatus(t, s.connect(aliceToken), r.ID, "deployed web 7.0.0, approved by bob")
	if n := s.lines("deployed web 7.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusConflict {
		t.Fatalf("a second decision: %d, want 409 (already decided)", code)
	}
}

// The per-principal cap counts alice's questions of both eras together:
// with --max-pending-asks-per-principal 1, a question asked in a stateful
// session leaves her no slot for a 2026-07-28 request_deploy (a tool error
// naming the flag, nothing listed), bob still asks, and the node's
// mcpgrain_pending_asks_refused_total counts the refusal as a
// continuation grain's.
func TestSessionlessRequestDeployCappedWithTheSessionsQuestions(t *testing.T) {
	s := newServer(t)
	s.start("--max-pending-asks-per-principal", "1")
	requestDeploy(t, s.connect(aliceToken), "api", "1")
	res, err := connectModern(t, s.endpoint, aliceToken, manual).CallTool(t.Context(),
		&mcp.CallToolParams{Name: "request_deploy", Arguments: map[string]any{"service": "api", "version": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mcpclient.Text(res); !res.IsError || !strings.Contains(got, mcpgrain.ErrTooManyPendingAsks.Error()) ||
		!strings.Contains(got, "--max-pending-asks-per-principal") {
		t.Fatalf("alice's 2026-07-28 request past the cap: %q (error %v), want the cap's error", got, res.IsError)
	}
	if code, body := api(t, http.MethodGet, s.approvals, bobToken, ""); code != http.StatusOK || strings.Contains(string(body), "Deploy api 2?") {
		t.Fatalf("listed: %d %s, want the refused question not listed", code, body)
	}
	requestDeploy(t, connectModern(t, s.endpoint, bobToken, manual), "api", "2")
	code, body := api(t, http.MethodGet, "http://"+s.http+"/metrics", "", "")
	var refused []string
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "mcpgrain_pending_asks_refused_total{") {
			refused = append(refused, line)
		}
	}
	want := map[string]string{`owner="continuation"`: " 1", `owner="session"`: " 0", `owner="task"`: " 0"}
	for _, line := range refused {
		for label, v := range want {
			if strings.Contains(line, label) && strings.HasSuffix(line, v) {
				delete(want, label)
			}
		}
	}
	if code != http.StatusOK || len(want) != 0 {
		t.Fatalf("metrics %d: %q, want one continuation refusal", code, refused)
	}
}

// Nobody decides a 2026-07-28 request_deploy, and the node is killed
// (kill -9) right after the request and started again: the durable
// reminder of the question's continuation grain still declines it when
// the approval window lapses — its directory row is settled as the
// window's decline (the inbox's history shows it timed out; before, such
// a row stayed unsettled, only hidden, until pruned), deploy_status
// reports it expired from both eras, a late accept is refused, and
// nothing is deployed. A stateful session's question is declined by its
// session's reminder alike.
func TestSessionlessRequestDeployDeclinedByTheWindowAfterKill(t *testing.T) {
	s := newServer(t)
	s.start("--approval-window", "3s")
	cs := connectModern(t, s.endpoint, aliceToken, manual)
	r := requestDeploy(t, cs, "api", "9.0.0")
	stateful := s.connect(aliceToken)
	r2 := requestDeploy(t, stateful, "api", "9.0.1")
	s.kill()

	s.start("--approval-window", "3s")
	for _, id := range []string{r.ID, r2.ID} {
		awaitTimedOut(t, s, id)
	}
	for _, c := range []*mcp.ClientSession{connectModern(t, s.endpoint, aliceToken, manual), s.connect(aliceToken)} {
		wantStatus(t, c, r.ID, "deploy of api 9.0.0 expired")
		wantStatus(t, c, r2.ID, "deploy of api 9.0.1 expired")
	}
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code == http.StatusOK {
		t.Fatal("an accept after the window lapsed was taken")
	}
	if n := s.lines("deployed api 9.0.0"); n != 0 {
		t.Fatalf("%d deployments after the window lapsed", n)
	}
}

// awaitTimedOut polls the inbox (as bob) until its history shows question
// id timed out.
func awaitTimedOut(t *testing.T, s *server, id string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		code, body := api(t, http.MethodGet, "http://"+s.http+"/approvals", bobToken, "")
		_, row, found := strings.Cut(string(body), `data-id="`+id+`"`)
		row, _, _ = strings.Cut(row, "</tr>")
		if code == http.StatusOK && found && strings.Contains(row, "timed out") {
			return
		}
		last = fmt.Sprintf("%d %q", code, row)
	}
	t.Fatalf("the inbox's history does not show %s timed out within 60s (last: %s)", id, last)
}
