package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/continuation"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/actors/tasks"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// ownedBy connects to node via until the session is owned by node owner
// (the placement of nodes 0, 1 and 2).
func ownedBy(t *testing.T, c *testcluster.Cluster, via, owner int, token string) *mcp.ClientSession {
	t.Helper()
	table := c.Placement(session.KindName, 0, 1, 2)
	for range 40 {
		cs := connect(t, "http://"+c.Node(via).HTTP+"/mcp", token)
		if o, _ := table.Owner(session.KindName, cs.ID()); o.ID == c.Node(owner).ID {
			return cs
		}
		_ = cs.Close()
	}
	t.Fatal("could not get a session owned by the wanted node")
	return nil
}

// startCluster starts three deploy nodes (Consul, Postgres) that share a
// deployments log and a keys file with alice (admin) and bob (member) of
// acme; it returns the cluster and the log's path.
func startCluster(t *testing.T) (*testcluster.Cluster, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "deployments.log")
	t.Setenv("DEPLOY_LOG", log)
	keys := filepath.Join(dir, "keys.json")
	body := `{"keys":[{"token":"` + aliceToken + `","user":"alice","org":"acme","role":"admin"},{"token":"` + bobToken + `","user":"bob","org":"acme","role":"member"}]}`
	if err := os.WriteFile(keys, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Binary: binary(t), ExtraArgs: []string{"--keys-file", keys}})
	return c, log
}

// Three deploy nodes (Consul, Postgres). The node that owns the session
// is killed (kill -9) while deploy waits for its decision: the pause is
// still listed on the other nodes, a member's decision there restores it
// on the session's new owner, the client's retry of the call (same
// session, tool and arguments) gets the decision, and the deployment
// happens exactly once. The work before Ask, not in a Step, ran twice.
func TestDeployOnAClusterSurvivesKillOfTheOwner(t *testing.T) {
	c, log := startCluster(t)
	cs := ownedBy(t, c, 0, 1, aliceToken)

	call := startDeploy(t, cs, "billing", "4.2.0")
	p := awaitPause(t, "http://"+c.Node(2).HTTP+"/api/executions", "Deploy billing 4.2.0?")
	c.Kill(1)
	call.cancel() // the client gives up on the call its owner lost
	<-call.done
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)

	if again := awaitPause(t, "http://"+c.Node(0).HTTP+"/api/executions", "Deploy billing 4.2.0?"); again.ID != p.ID {
		t.Fatalf("after the kill %s is listed, want %s", again.ID, p.ID)
	}
	url := "http://" + c.Node(2).HTTP + "/api/executions/" + p.ID + "/resume"
	var code int
	var answer []byte
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// Until the session's new owner takes it, the decision may find
		// no owner (503): retried, as a client of the API would.
		if code, answer = api(t, http.MethodPost, url, bobToken, `{"action":"accept"}`); code != http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, answer)
	}
	if got, want := startDeploy(t, cs, "billing", "4.2.0").result(t), "deployed billing 4.2.0, approved by bob"; got != want {
		t.Fatalf("the retry's result %q, want %q", got, want)
	}
	if n := countLines(t, log, "deployed billing 4.2.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
	if n := countLines(t, log, "requested billing 4.2.0"); n != 2 {
		t.Fatalf("the unjournaled work before Ask ran %d times, want 2", n)
	}
}

// The 2026-07-28 era on three deploy nodes (Consul, Postgres): a call
// through node 1 is served by a continuation grain node 1 owns; its
// question is paused when node 1 is killed (kill -9). A member's accept on
// node 2 reaches the grain's new owner (503 until one takes it), which
// journals the decision; the client's retry through node 0 (its sealed
// requestState names the grain) reaches that owner, whose run of the
// handler deploys, exactly once. The work before Ask, not in a Step, ran
// once per run.
func TestSessionlessDeployOnAClusterSurvivesKillOfTheOwner(t *testing.T) {
	c, log := startCluster(t)

	via1 := connectModern(t, "http://"+c.Node(1).HTTP+"/mcp", aliceToken, manual)
	state := asked(t, via1, "billing", "4.2.0", "Deploy billing 4.2.0?")
	p := awaitPause(t, "http://"+c.Node(2).HTTP+"/api/executions", "Deploy billing 4.2.0?")
	if o, _ := c.Placement(continuation.KindName, 0, 1, 2).Owner(continuation.KindName, p.SessionID); o.ID != c.Node(1).ID {
		t.Fatalf("the question's grain %s is owned by %q, want node 1 (%s)", p.SessionID, o.ID, c.Node(1).ID)
	}
	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second)

	url := "http://" + c.Node(2).HTTP + "/api/executions/" + p.ID + "/resume"
	var code int
	var answer []byte
	began := time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// Until the grain's new owner takes it, the decision may find no
		// owner (503): retried, as a client of the API would.
		if code, answer = api(t, http.MethodPost, url, bobToken, `{"action":"accept"}`); code != http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, answer)
	}
	t.Logf("the decision reached the grain's new owner %s after the kill", time.Since(began).Round(time.Millisecond))
	via0 := connectModern(t, "http://"+c.Node(0).HTTP+"/mcp", aliceToken, manual)
	res, err := deployCall(t, via0, "billing", "4.2.0", state, &mcp.ElicitResult{Action: "decline"})
	if got, want := finished(t, res, err), "deployed billing 4.2.0, approved by bob"; got != want {
		t.Fatalf("the retry's result %q, want %q", got, want)
	}
	res, err = deployCall(t, via0, "billing", "4.2.0", state, nil)
	if got, want := finished(t, res, err), "deployed billing 4.2.0, approved by bob"; got != want {
		t.Fatalf("a second retry's result %q, want %q", got, want)
	}
	if n := countLines(t, log, "deployed billing 4.2.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
	if n := countLines(t, log, "requested billing 4.2.0"); n != 3 {
		t.Fatalf("the unjournaled work before Ask ran %d times, want 3 (once per run)", n)
	}
}

// deploy as an MCP task on three deploy nodes (Consul, Postgres): the
// task grain's owner is killed (kill -9) while the task waits for its
// decision. The question stays listed on the survivors; a member's accept
// there reaches the task grain's new owner (503 until one takes it),
// which journals the decision and runs the next round from the task's
// durable call; tasks/get through another survivor shows the task
// completed, deployed exactly once.
func TestTaskDeployOnAClusterSurvivesKillOfTheOwner(t *testing.T) {
	c, log := startCluster(t)

	id := deployTask(t, "http://"+c.Node(0).HTTP+"/mcp", aliceToken, "billing", "4.2.0")
	awaitStatus(t, "http://"+c.Node(0).HTTP+"/mcp", aliceToken, id, "input_required")
	owner := -1
	o, _ := c.Placement(tasks.KindName, 0, 1, 2).Owner(tasks.KindName, id)
	for i := range 3 {
		if c.Node(i).ID == o.ID {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatalf("task %s: no owner among the nodes (%q)", id, o.ID)
	}
	a, b := (owner+1)%3, (owner+2)%3
	p := awaitPause(t, "http://"+c.Node(a).HTTP+"/api/executions", "Deploy billing 4.2.0?")
	if p.SessionID != id {
		t.Fatalf("listed %+v, want the question of task %s", p, id)
	}
	c.Kill(owner)
	c.WaitMembersOn([]int{a, b}, 2, 30*time.Second)

	if again := awaitPause(t, "http://"+c.Node(b).HTTP+"/api/executions", "Deploy billing 4.2.0?"); again.ID != p.ID {
		t.Fatalf("after the kill %s is listed, want %s", again.ID, p.ID)
	}
	url := "http://" + c.Node(a).HTTP + "/api/executions/" + p.ID + "/resume"
	var code int
	var answer []byte
	began := time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// Until the task grain's new owner takes it, the decision may
		// find no owner (503): retried, as a client of the API would.
		if code, answer = api(t, http.MethodPost, url, bobToken, `{"action":"accept"}`); code != http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, answer)
	}
	t.Logf("the decision reached the task grain's new owner %s after the kill", time.Since(began).Round(time.Millisecond))
	task := awaitStatus(t, "http://"+c.Node(b).HTTP+"/mcp", aliceToken, id, "completed")
	if got, want := taskText(t, task), "deployed billing 4.2.0, approved by bob"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := countLines(t, log, "deployed billing 4.2.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
}
