package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// Tokens of the test's users: one organization, three roles.
const (
	aliceToken = "mcpg_deploy_alice_admin_0123456789"
	bobToken   = "mcpg_deploy_bob_member_0123456789"
	vicToken   = "mcpg_deploy_vic_viewer_0123456789"
	// eveToken is an admin of another organization.
	eveToken = "mcpg_deploy_eve_other_0123456789"
)

// binary builds examples/deploy once per test process.
func binary(t *testing.T) string {
	t.Helper()
	return testcluster.Build(t, "./examples/deploy")
}

// server is a deploy binary run as `deploy dev` on fixed addresses, with
// its data directory and deployment log, so that it can be killed and
// started again as the same node.
type server struct {
	t                   *testing.T
	http, grpc, data    string
	log, keys           string
	cmd                 *exec.Cmd
	exited              chan struct{}
	endpoint, approvals string
	stderr              *testenv.SyncBuffer // what the process wrote to stderr, to look for a log line
}

// logged reports whether a line with every one of parts was written to buf.
func logged(buf *testenv.SyncBuffer, parts ...string) bool {
	for _, line := range strings.Split(buf.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func newServer(t *testing.T) *server {
	ports := testenv.FreePorts(t, 2)
	dir := t.TempDir()
	s := &server{t: t, http: fmt.Sprintf("127.0.0.1:%d", ports[0]), grpc: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		data: filepath.Join(dir, "data"), log: filepath.Join(dir, "deployments.log"), keys: filepath.Join(dir, "keys.json")}
	body := fmt.Sprintf(`{"keys":[{"token":%q,"user":"alice","org":"acme","role":"admin"},{"token":%q,"user":"bob","org":"acme","role":"member"},{"token":%q,"user":"vic","org":"acme","role":"viewer"},{"token":%q,"user":"eve","org":"globex","role":"admin"}]}`,
		aliceToken, bobToken, vicToken, eveToken)
	if err := os.WriteFile(s.keys, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s.endpoint, s.approvals = "http://"+s.http+"/mcp", "http://"+s.http+"/api/executions"
	return s
}

// start runs the binary and returns once it serves.
func (s *server) start(extra ...string) {
	t := s.t
	t.Helper()
	args := append([]string{"dev", "--http", s.http, "--grpc", s.grpc, "--data", s.data, "--keys-file", s.keys}, extra...)
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "DEPLOY_LOG="+s.log)
	s.stderr = &testenv.SyncBuffer{}
	cmd.Stderr = io.MultiWriter(t.Output(), s.stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	ready, exited := make(chan struct{}), s.exited
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "MCP endpoint:") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	select {
	case <-ready:
	case <-exited:
		t.Fatal("deploy exited before serving")
	case <-time.After(60 * time.Second):
		t.Fatal("deploy printed no MCP endpoint within 60s")
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// connect opens a stateful go-sdk client session as token's user. It keeps
// no standalone stream, so a node that goes away and comes back does not
// end the session on the client's side.
func (s *server) connect(token string) *mcp.ClientSession {
	s.t.Helper()
	return connect(s.t, s.endpoint, token)
}

// connect opens a stateful go-sdk client session to endpoint as token's
// user, with no standalone stream.
func connect(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "deploy-test", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: 1,
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(token, http.DefaultTransport)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call is a deploy call in flight.
type call struct {
	res    *mcp.CallToolResult
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

func startDeploy(t *testing.T, cs *mcp.ClientSession, service, version string) *call {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	c := &call{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(c.done)
		c.res, c.err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": service, "version": version}})
	}()
	return c
}

// result waits for the call's result text.
func (c *call) result(t *testing.T) string {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("deploy returned nothing within 2 minutes")
	}
	if c.err != nil || c.res.IsError {
		t.Fatalf("deploy: %v %s", c.err, mcpclient.Text(c.res))
	}
	return mcpclient.Text(c.res)
}

// api calls the HTTP approval API as token's user.
func api(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// listed is one execution of the HTTP API's list.
type listed struct {
	ID        string          `json:"executionId"`
	Tool      string          `json:"tool"`
	Message   string          `json:"message"`
	Arguments json.RawMessage `json:"arguments"`
	// SessionID is the grain that owns it: a session, or a continuation
	// grain for a 2026-07-28 call.
	SessionID string `json:"sessionId"`
}

// awaitPause polls the approval API (as bob) until exactly one pause with
// message want is listed, and returns it.
func (s *server) awaitPause(want string) listed {
	s.t.Helper()
	return awaitPause(s.t, s.approvals, want)
}

// awaitPause polls the approval API at url (as bob) until a pause with
// message want is listed, and returns it.
func awaitPause(t *testing.T, url, want string) listed {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		code, body := api(t, http.MethodGet, url, bobToken, "")
		var got struct {
			Executions []listed `json:"executions"`
		}
		if code == http.StatusOK && json.Unmarshal(body, &got) == nil {
			for _, e := range got.Executions {
				if e.Message == want {
					return e
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no paused execution %q listed within 60s", want)
	return listed{}
}

// lines counts the deployment log's lines equal to line.
func (s *server) lines(line string) int {
	s.t.Helper()
	return countLines(s.t, s.log, line)
}

// countLines counts the lines of the file at path equal to line.
func countLines(t *testing.T, path, line string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// The asked question is an execution paused for approval on the node's
// approval surfaces: listed by the HTTP API, refused to a viewer,
// accepted by a member over HTTP (the call then deploys, once, and says
// who approved), and, for a second call, declined with the CLI of the
// same binary (`deploy approve decline`), after which nothing is
// deployed.
func TestDeployApprovedOverHTTPDeclinedWithTheCLI(t *testing.T) {
	s := newServer(t)
	s.start()
	cs := s.connect(aliceToken)

	c := startDeploy(t, cs, "api", "1.2.3")
	p := s.awaitPause("Deploy api 1.2.3?")
	if p.Tool != "deploy" || string(p.Arguments) != `{"service":"api","version":"1.2.3"}` {
		t.Fatalf("listed %+v (arguments %s), want the tool's name and the question's details", p, p.Arguments)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", vicToken, `{"action":"accept"}`); code != http.StatusForbidden {
		t.Fatalf("a viewer's accept: %d %s, want 403", code, body)
	}
	if n := s.lines("deployed api 1.2.3"); n != 0 {
		t.Fatalf("%d deployments before the decision", n)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	if got, want := c.result(t), "deployed api 1.2.3, approved by bob"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed api 1.2.3"); n != 1 {
		t.Fatalf("%d deployments, want 1", n)
	}
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusConflict {
		t.Fatalf("a second decision: %d, want 409 (already decided)", code)
	}

	c = startDeploy(t, cs, "api", "9.9.9")
	p = s.awaitPause("Deploy api 9.9.9?")
	cmd := exec.Command(binary(t), "approve", "decline", p.ID, "--grpc", s.grpc, "--reason", "not on a friday")
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+bobToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy approve decline: %v\n%s", err, out)
	}
	if got, want := c.result(t), `deploy of api 9.9.9 declined by "bob": not on a friday`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed api 9.9.9"); n != 0 {
		t.Fatalf("%d deployments of a declined version", n)
	}
}

// The node is killed (kill -9) while the call waits for its decision and
// started again on the same store; the pause is still listed, a decision
// taken on the new process reaches the call when the client retries it
// (same session, tool and arguments: docs/sdk.md §4), and the deployment
// happens exactly once. The work before Ask, which is not in a Step, ran
// twice: once per run of the handler.
func TestDeployDecisionSurvivesKillOfTheNode(t *testing.T) {
	s := newServer(t)
	s.start()
	cs := s.connect(aliceToken)

	c := startDeploy(t, cs, "web", "2.0.0")
	p := s.awaitPause("Deploy web 2.0.0?")
	s.kill()
	c.cancel() // the client gives up on the call its node lost
	<-c.done

	s.start()
	again := s.awaitPause("Deploy web 2.0.0?")
	if again.ID != p.ID {
		t.Fatalf("after the restart %s is listed, want %s", again.ID, p.ID)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	if got, want := startDeploy(t, cs, "web", "2.0.0").result(t), "deployed web 2.0.0, approved by bob"; got != want {
		t.Fatalf("the retry's result %q, want %q", got, want)
	}
	if n := s.lines("deployed web 2.0.0"); n != 1 {
		t.Fatalf("%d deployments, want exactly 1", n)
	}
	if n := s.lines("requested web 2.0.0"); n != 2 {
		t.Fatalf("the unjournaled work before Ask ran %d times, want 2 (once per run of the handler)", n)
	}
	// The call completed: the same arguments again are a new call.
	c = startDeploy(t, cs, "web", "2.0.0")
	if p2 := s.awaitPause("Deploy web 2.0.0?"); p2.ID == p.ID {
		t.Fatal("a call after the completed one reused its pause")
	}
	c.cancel()
}

// Nobody decides within the approval window (--approval-window): the
// question is declined by the node (reason approval_timeout, by nobody),
// as a code-mode pause is, and nothing is deployed.
func TestDeployDeclinedWhenTheApprovalWindowLapses(t *testing.T) {
	s := newServer(t)
	s.start("--approval-window", "2s")
	cs := s.connect(aliceToken)
	c := startDeploy(t, cs, "db", "3.0.0")
	s.awaitPause("Deploy db 3.0.0?")
	if got, want := c.result(t), `deploy of db 3.0.0 declined by "": approval_timeout`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed db 3.0.0"); n != 0 {
		t.Fatalf("%d deployments after the window lapsed", n)
	}
}

// The official TypeScript SDK's client (tools/tsclient/call-tool.mjs)
// calls deploy; a member accepts over HTTP; the client gets the result.
func TestDeployWithTheTypeScriptClient(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tools", "tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "the TypeScript SDK is not installed (run: npm ci --prefix tools/tsclient)")
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH")
	}
	s := newServer(t)
	s.start()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join(dir, "call-tool.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL="+s.endpoint, "MCP_TOKEN="+aliceToken, "MCP_TOOL=deploy", `MCP_ARGS={"service":"ts","version":"5.0.0"}`)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := s.awaitPause("Deploy ts 5.0.0?")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript client: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var out struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil || len(out.Result.Content) != 1 ||
		out.Result.Content[0].Text != "deployed ts 5.0.0, approved by bob" {
		t.Fatalf("TypeScript client's result %q (%v), want the deployment approved by bob", stdout.String(), err)
	}
	if n := s.lines("deployed ts 5.0.0"); n != 1 {
		t.Fatalf("%d deployments, want 1", n)
	}
}
