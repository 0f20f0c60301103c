package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// finish calls finish_deploy for id and returns its text, or the tool's
// error text (isErr).
func finish(t *testing.T, cs *mcp.ClientSession, id string) (text string, isErr bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "finish_deploy", Arguments: map[string]any{"id": id}})
	if err != nil {
		t.Fatalf("finish_deploy: %v", err)
	}
	return mcpclient.Text(res), res.IsError
}

// waitFinish calls finish_deploy until it no longer says the request
// waits (the decision is journaled by the owning session a moment after
// the surface answered) and checks its answer.
func waitFinish(t *testing.T, cs *mcp.ClientSession, id, want string) {
	t.Helper()
	var got string
	var isErr bool
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got, isErr = finish(t, cs, id); isErr || !strings.Contains(got, "is waiting for approval") {
			break
		}
	}
	if isErr || got != want {
		t.Fatalf("finish_deploy: %q (error %v), want %q", got, isErr, want)
	}
}

// finish_deploy continues a request_deploy on the session that asked it
// (mcpgrain.ContinueAsk): from another session of the same user it says
// the request waits while undecided; another user (bob, same
// organization) is refused and another organization (eve) does not find
// it. The session passivates and the node is killed (kill -9) and started
// again before the decision; after a member's accept over HTTP,
// finish_deploy from the other session deploys once, and every later
// call — from the asking session, after another kill -9 and restart, from
// a new session — gets the same recorded answer without deploying again;
// deploy_status finds it deployed (one "step ask/ID" line).
func TestFinishDeployContinuesOnTheAskingSession(t *testing.T) {
	s := newServer(t)
	s.start("--session-timeout", "1s")
	cs, other := s.connect(aliceToken), s.connect(aliceToken)
	r := requestDeploy(t, cs, "api", "6.0.0")
	s.awaitPause("Deploy api 6.0.0?")
	if got, isErr := finish(t, other, r.ID); isErr || !strings.Contains(got, "is waiting for approval") {
		t.Fatalf("finish_deploy of an undecided request: %q (error %v)", got, isErr)
	}
	if got, isErr := finish(t, s.connect(bobToken), r.ID); !isErr || !strings.Contains(got, "another user's") {
		t.Fatalf("bob's finish_deploy: %q (error %v), want refused as another user's", got, isErr)
	}
	if got, isErr := finish(t, s.connect(eveToken), r.ID); !isErr || !strings.Contains(got, "no pending question") {
		t.Fatalf("eve's finish_deploy: %q (error %v), want unknown", got, isErr)
	}

	waitLogged(t, s, "mcp_session_idle_runtime_dispose", "reason=idle")
	s.kill()
	s.start("--session-timeout", "1s")
	s.awaitPause("Deploy api 6.0.0?")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	want := "deployed api 6.0.0, approved by bob (finished by alice)"
	waitFinish(t, other, r.ID, want)
	if got, isErr := finish(t, cs, r.ID); isErr || got != want {
		t.Fatalf("finish_deploy again from the asking session: %q (error %v), want the recorded %q", got, isErr, want)
	}
	wantStatus(t, cs, r.ID, "deployed api 6.0.0, approved by bob")

	s.kill()
	s.start("--session-timeout", "1s")
	if got, isErr := finish(t, s.connect(aliceToken), r.ID); isErr || got != want {
		t.Fatalf("finish_deploy after kill -9 from a new session: %q (error %v), want the recorded %q", got, isErr, want)
	}
	if n := s.lines("deployed api 6.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
	if n := s.lines("step ask/" + r.ID); n != 1 {
		t.Fatalf("%d deployment keys for the request, want 1", n)
	}
}

// A request asked by a 2026-07-28 (sessionless) client is owned by its
// request's continuation grain, which runs no continuations: finish_deploy
// from a stateful session of the same user, once it is decided, says so
// (mcpgrain.ErrContinueNeedsSession) and deploys nothing; from a
// 2026-07-28 request it is not available (ErrNoSessionCall); deploy_status
// deploys it as before.
func TestFinishDeployOfASessionlessRequestIsRefused(t *testing.T) {
	s := newServer(t)
	s.start()
	r := requestDeploy(t, connectModern(t, s.endpoint, aliceToken, manual), "web", "8.0.0")
	s.awaitPause("Deploy web 8.0.0?")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	cs := s.connect(aliceToken) // the grain journaled the decision before the surface's answer
	if got, isErr := finish(t, cs, r.ID); !isErr || !strings.Contains(got, "runs only on a stateful session") {
		t.Fatalf("finish_deploy of a 2026-07-28 request's question: %q (error %v), want ErrContinueNeedsSession", got, isErr)
	}
	if got, isErr := finish(t, connectModern(t, s.endpoint, aliceToken, manual), r.ID); !isErr || !strings.Contains(got, "need a tool call") {
		t.Fatalf("finish_deploy in a 2026-07-28 request: %q (error %v), want ErrNoSessionCall", got, isErr)
	}
	if n := s.lines("deployed web 8.0.0"); n != 0 {
		t.Fatalf("%d deployments before deploy_status", n)
	}
	wantStatus(t, cs, r.ID, "deployed web 8.0.0, approved by bob")
}

// Three deploy nodes (Consul, Postgres): request_deploy in a session node
// 1 owns; finish_deploy from another session of the same user, owned by
// node 2, is routed to node 1 (waiting while undecided; after a member's
// accept it deploys there). Node 1 is killed (kill -9): finish_deploy
// again, from both sessions, reaches the asking session's new owner,
// which answers the recorded result without deploying again.
func TestFinishDeployOnAClusterSurvivesKillOfTheOwner(t *testing.T) {
	c, log := startCluster(t)
	cs := ownedBy(t, c, 0, 1, aliceToken)
	other := ownedBy(t, c, 2, 2, aliceToken)
	r := requestDeploy(t, cs, "ledger", "3.0.0")
	awaitPause(t, "http://"+c.Node(2).HTTP+"/api/executions", "Deploy ledger 3.0.0?")
	if got, isErr := finish(t, other, r.ID); isErr || !strings.Contains(got, "is waiting for approval") {
		t.Fatalf("finish_deploy through node 2 of an undecided request: %q (error %v)", got, isErr)
	}
	if code, body := api(t, http.MethodPost, "http://"+c.Node(2).HTTP+"/api/executions/"+r.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	want := "deployed ledger 3.0.0, approved by bob (finished by alice)"
	waitFinish(t, other, r.ID, want)

	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)
	for _, s := range []*mcp.ClientSession{other, cs} {
		var got string
		var isErr bool
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got, isErr = finish(t, s, r.ID); !isErr {
				break // a retryable error while the session moves
			}
		}
		if isErr || got != want {
			t.Fatalf("finish_deploy after kill -9 of the owner: %q (error %v), want the recorded %q", got, isErr, want)
		}
	}
	if n := countLines(t, log, "deployed ledger 3.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
}
