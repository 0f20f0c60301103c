package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/cli"
	"github.com/mcpgrain/mcpgrain/internal/inspect"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// inspectGet is GET /api/inspect/<path> on node addr with token ("": none).
func inspectGet(t *testing.T, addr, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/inspect/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// inspectSession is alice-style inspection of session id that must answer.
func inspectSession(t *testing.T, addr, id, token string) inspect.Session {
	t.Helper()
	st, body := inspectGet(t, addr, "sessions/"+id, token)
	if st != http.StatusOK {
		t.Fatalf("inspect %s on %s: %d %s", id, addr, st, body)
	}
	var s inspect.Session
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return s
}

// Only an admin of the session's organization inspects it: a viewer and a
// member of that organization, and an admin of another, get exactly the
// answer an unknown id gets; no token is 401.
func TestInspectIsForAdminsOfTheOrganization(t *testing.T) {
	addr := startNode(t, func(c *app.Config) {
		k, err := c.MCP.Keys.Merge(mustKeys(t, testcluster.CarolToken, "carol", "globex", "admin"))
		if err == nil {
			k, err = k.Merge(mustKeys(t, testcluster.VeraToken, "vera", "acme", "viewer"))
		}
		if err != nil {
			t.Fatal(err)
		}
		c.MCP.Keys = k
	})
	cs := connect(t, addr, aliceToken, "2025-11-25", nil)
	echo(t, cs, "hello")
	_, unknown := inspectGet(t, addr, "sessions/no-such-session", aliceToken)
	for _, path := range []string{"sessions/" + cs.ID(), "sessions/no-such-session", "tasks/no-such-task", "executions/no-such-execution"} {
		for name, token := range map[string]string{"viewer": testcluster.VeraToken, "member": bobToken, "other org's admin": carolToken} {
			st, body := inspectGet(t, addr, path, token)
			if st != http.StatusNotFound || !bytes.Equal(body, unknown) {
				t.Errorf("%s on %s: %d %s, want the unknown id's 404 %s", name, path, st, body, unknown)
			}
		}
		if st, _ := inspectGet(t, addr, path, ""); st != http.StatusUnauthorized {
			t.Errorf("no token on %s: %d, want 401", path, st)
		}
	}
	s := inspectSession(t, addr, cs.ID(), aliceToken)
	if s.Org != "acme" || s.User != "alice" || !s.Resident || s.Passivated || s.OwnerNode != "t1" || len(s.Requests) < 2 {
		t.Fatalf("alice's inspection: %+v", s)
	}
	var out, errOut bytes.Buffer
	err := cli.Program{}.Run(t.Context(), []string{"inspect", "session", cs.ID(), "--url", "http://" + addr + "/mcp", "--token", aliceToken}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "resident on t1") || !strings.Contains(out.String(), "recent requests (newest first)") {
		t.Fatalf("mcpgrain inspect session: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	err = cli.Program{}.Run(t.Context(), []string{"inspect", "session", cs.ID(), "--url", "http://" + addr, "--token", carolToken}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "that you may inspect") {
		t.Fatalf("carol's mcpgrain inspect: %v", err)
	}
}

// A session is inspected from a node that does not own it: resident on
// its owner with the trace id of the client's call among its last
// requests; then passivated (idle) with the dispose reason and time kept
// in its record; then restored by the next call, on its owner again.
func TestInspectSessionFromAnotherNode(t *testing.T) {
	j := testenv.StartJaeger(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--trace-endpoint", j.OTLPEndpoint(), "--session-timeout", "2s"}})
	cs := connectOwnedBy(t, c, 0, 1, nil)
	traceID := randomHex(16)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}, Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + randomHex(8) + "-01"}}
	if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("echo: %+v %v", res, err)
	}
	s := inspectSession(t, c.Node(2).HTTP, cs.ID(), testcluster.Token)
	if !s.Resident || s.OwnerNode != c.Node(1).ID || !seenTrace(s, traceID) {
		t.Fatalf("resident session seen from node 2: %+v (want owner %s, trace %s)", s, c.Node(1).ID, traceID)
	}
	for s = inspectSession(t, c.Node(2).HTTP, cs.ID(), testcluster.Token); !s.Passivated; s = inspectSession(t, c.Node(2).HTTP, cs.ID(), testcluster.Token) {
		if ctx.Err() != nil {
			t.Fatalf("session never passivated: %+v", s)
		}
		time.Sleep(100 * time.Millisecond) // polling the idle alarm's effect
	}
	if s.LastDispose == nil || s.LastDispose.Reason != "idle" || s.LastDispose.At.Before(s.CreatedAt) || s.OwnerNode != "" || len(s.Requests) != 0 || s.RequestsNote == "" {
		t.Fatalf("passivated session: %+v", s)
	}
	echo(t, cs, "again")
	r := inspectSession(t, c.Node(0).HTTP, cs.ID(), testcluster.Token)
	if !r.Resident || r.OwnerNode != c.Node(1).ID || r.Epoch <= s.Epoch || r.LastDispose == nil || r.LastDispose.Reason != "idle" || len(r.Requests) == 0 {
		t.Fatalf("restored session: %+v (before: %+v)", r, s)
	}
}

func seenTrace(s inspect.Session, traceID string) bool {
	for _, r := range s.Requests {
		if r.TraceID == traceID {
			return true
		}
	}
	return false
}

// A paused execution is inspected with its session: the execution waits,
// its session holds its lease; another organization's admin is told "not
// found".
func TestInspectPausedExecution(t *testing.T) {
	addr := startNodeInfo(t, testcluster.CodeNode(t, nil)).HTTPAddr
	cs := connect(t, addr, aliceToken, "2025-11-25", nil)
	id := pause(t, cs, "waiting_for_interaction")
	st, body := inspectGet(t, addr, "executions/"+id, aliceToken)
	var e inspect.Execution
	if st != http.StatusOK || json.Unmarshal(body, &e) != nil {
		t.Fatalf("inspect execution: %d %s", st, body)
	}
	if e.Org != "acme" || !e.Settled.IsZero() || e.SessionID != cs.ID() || e.Session == nil ||
		len(e.Session.Leases) != 1 || e.Session.Leases[0] != id || !hasReminder(*e.Session, "approval:"+id) ||
		e.Session.Paused+e.Session.DurablePaused != 1 {
		t.Fatalf("paused execution: %s", body)
	}
	if st, _ := inspectGet(t, addr, "executions/"+id, carolToken); st != http.StatusNotFound {
		t.Fatalf("carol inspects alice's execution: %d", st)
	}
}

func hasReminder(s inspect.Session, name string) bool {
	for _, r := range s.Reminders {
		if r.Name == name && !r.Due.IsZero() {
			return true
		}
	}
	return false
}
