package upgrade_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// forwardsOK is node i's mcpgrain_resume_forwards_total{outcome="ok"}: the
// cross-session resumes it sent to another session's owner that the owner
// answered (either route; an AskContinue the previous release rejected,
// after which the node falls back to ExecutionResumeForModel, is not
// counted, its fallback is).
func forwardsOK(t *testing.T, c *testcluster.Cluster, i int) float64 {
	t.Helper()
	return testcluster.ScrapeMetrics(t, c.Node(i).HTTP).Value("mcpgrain_resume_forwards_total", map[string]string{"outcome": "ok"})
}

// crossSessionResumes runs on the mixed cluster in the middle of the roll
// (node newer runs the current build, node older the previous release):
// code mode's `resume` of a paused execution from another session of the
// same user, both ways.
//
//   - Owner on the previous release, resumed from a session on the current
//     build: the new node sends the owner an AskContinue naming
//     mcpgrain.code.resume, which the old node does not take, and falls
//     back to ExecutionResumeForModel (docs/sdk.md §6, "Compatibility with
//     the previous release"). Without the fallback the resume ends
//     execution_expired and writes nothing.
//   - Owner on the current build, resumed from a session on the previous
//     release: the old node forwards ExecutionResumeForModel, which the new
//     node still serves (and does not log the continuation route for).
//
// Each time bob (same organization, another user) is refused first, the
// paused write runs once, a second resume does not run it again, and the
// forwarding node's mcpgrain_resume_forwards_total{outcome="ok"} rises by
// exactly one: the resume was forwarded to the owner's node, not served
// elsewhere.
func crossSessionResumes(t *testing.T, c *testcluster.Cluster, todos *demo.API, newer, older int) {
	t.Helper()
	resumeAcross(t, c, todos, older, newer, "cross-owner-old")
	id := resumeAcross(t, c, todos, newer, older, "cross-owner-new")
	for _, l := range c.Node(newer).LogLines("on the continuation route", 50) {
		if strings.Contains(l, id) {
			t.Errorf("owner on the current build: the previous release's forward of %s took the continuation route, which it does not know: %s", id, l)
		}
	}
}

// resumeAcross pauses an execution writing the to-do title in a session
// of alice's owned by node owner and resumes it from sessions owned by
// node via: bob's (refused) and another of alice's (completes it, once).
// It returns the execution's id.
func resumeAcross(t *testing.T, c *testcluster.Cluster, todos *demo.API, owner, via int, title string) string {
	t.Helper()
	pausing := testcluster.ConnectOwnedBy(t, c, owner, owner, testcluster.AliceToken, nil)
	defer pausing.Close()
	res, sc := testcluster.CallTool(t, pausing, "execute", map[string]any{"code": fmt.Sprintf(`return await tools.todo.createTodo({title: %q})`, title)})
	id, _ := sc["executionId"].(string)
	if sc["status"] != "waiting_for_interaction" || id == "" {
		t.Fatalf("%s: execute on node %s did not pause: %s", title, c.Node(owner).ID, mcpclient.Text(res))
	}
	other := testcluster.ConnectOwnedBy(t, c, via, via, testcluster.AliceToken, nil)
	defer other.Close()
	bob := testcluster.ConnectOwnedBy(t, c, via, via, testcluster.BobToken, nil)
	defer bob.Close()
	before := forwardsOK(t, c, via)
	where := fmt.Sprintf("%s: paused on node %s, resumed from node %s", title, c.Node(owner).ID, c.Node(via).ID)

	res, sc = resume(t, bob, id)
	if !res.IsError || sc["status"] != "execution_forbidden" {
		t.Fatalf("%s: bob's resume of alice's execution: %s / %v, want execution_forbidden", where, mcpclient.Text(res), sc)
	}
	if n := written(todos, title); n != 0 {
		t.Fatalf("%s: bob's refused resume ran the write (%d to-dos)", where, n)
	}
	res, sc = resume(t, other, id)
	if res.IsError || sc["status"] != "completed" || !strings.Contains(fmt.Sprint(sc["result"]), title) {
		t.Fatalf("%s: alice's resume from another session: %s / %v, want completed", where, mcpclient.Text(res), sc)
	}
	if n := written(todos, title); n != 1 {
		t.Fatalf("%s: the resumed write ran %d times, want once", where, n)
	}
	after := forwardsOK(t, c, via)
	if after != before+1 {
		t.Fatalf("%s: node %s's mcpgrain_resume_forwards_total{outcome=\"ok\"} went %v → %v, want one forward answered by the owner", where, c.Node(via).ID, before, after)
	}
	// Again: the owner replays the result, or says it is settled; the
	// write does not run again.
	res, sc = resume(t, other, id)
	again := sc["status"]
	if again != "completed" && again != "execution_already_settled" {
		t.Errorf("%s: a second resume: %s / %v, want completed (replayed) or execution_already_settled", where, mcpclient.Text(res), sc)
	}
	if n := written(todos, title); n != 1 {
		t.Errorf("%s: after a second resume the write ran %d times, want once", where, n)
	}
	t.Logf("%s: bob refused, alice's resume completed it, written once (a second resume: %v); forwards answered by the owner on node %s: %v → %v",
		where, again, c.Node(via).ID, before, after)
	return id
}

// resume calls code mode's resume tool on cs: accept execution id.
func resume(t *testing.T, cs *mcp.ClientSession, id string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return testcluster.CallTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
}

// written is how many to-dos titled title the API holds.
func written(todos *demo.API, title string) int {
	n := 0
	for _, td := range todos.Todos() {
		if td.Title == title {
			n++
		}
	}
	return n
}
