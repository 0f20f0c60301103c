package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// sessionless is the protocol version without sessions: a question is an
// input_required result and the client's retry brings the answer.
const sessionless = "2026-07-28"

// manual has the client return input_required results to the test, which
// retries the calls itself.
var manual = &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}

// connectModern opens a go-sdk client at protocol version 2026-07-28 to
// endpoint as token's user (no session: every call is one POST).
func connectModern(t *testing.T, endpoint, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "deploy-test-2026", Version: "v0"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: 1,
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(token, http.DefaultTransport)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: sessionless})
	if err != nil {
		t.Fatalf("connect at %s: %v", sessionless, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// deployCall calls deploy (state "": a first request; else a retry with
// state and the approval answer in, if not nil).
func deployCall(t *testing.T, cs *mcp.ClientSession, service, version, state string, in *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": service, "version": version}, RequestState: state}
	if in != nil {
		p.InputResponses = mcp.InputResponseMap{"approval": in}
	}
	return cs.CallTool(ctx, p)
}

// asked calls deploy as a first request and returns the requestState of
// its input_required result, which must ask for the approval of want.
func asked(t *testing.T, cs *mcp.ClientSession, service, version, want string) string {
	t.Helper()
	res, err := deployCall(t, cs, service, version, "", nil)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("deploy %s %s: %v %+v, want input_required", service, version, err, res)
	}
	q, ok := res.InputRequests["approval"].(*mcp.ElicitParams)
	if !ok || q.Message != want || res.RequestState == "" || strings.HasPrefix(res.RequestState, "mcpgrain-call.") {
		t.Fatalf("input requests %+v state %q: want the approval of %q under a sealed state", res.InputRequests, res.RequestState, want)
	}
	return res.RequestState
}

// finished is the text of a result that ended the call.
func finished(t *testing.T, res *mcp.CallToolResult, err error) string {
	t.Helper()
	if err != nil || res.IsError || res.NeedsInput() {
		t.Fatalf("deploy: %v %+v %q, want its result", err, res, mcpclient.Text(res))
	}
	return mcpclient.Text(res)
}

// In the 2026-07-28 era the question is an input_required result and a
// pause on the approval surfaces at once. A viewer's decision is refused
// (403); another user's retry, a retry with other arguments and a forged
// state are refused before the handler runs; a member's accept over HTTP
// reaches the call at the client's retry (no answer needed), which
// deploys once; the decision stands against a later answer of the client
// and a second decision (409). A second call is declined with the CLI;
// the client's accept that comes after does not change it.
func TestSessionlessDeployApprovedOverHTTPDeclinedWithTheCLI(t *testing.T) {
	s := newServer(t)
	s.start()
	alice := connectModern(t, s.endpoint, aliceToken, manual)
	state := asked(t, alice, "api", "1.2.3", "Deploy api 1.2.3?")
	p := s.awaitPause("Deploy api 1.2.3?")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", vicToken, `{"action":"accept"}`); code != http.StatusForbidden {
		t.Fatalf("a viewer's accept: %d %s, want 403", code, body)
	}
	vic := connectModern(t, s.endpoint, vicToken, manual)
	if _, err := deployCall(t, vic, "api", "1.2.3", state, &mcp.ElicitResult{Action: "accept"}); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("another user's retry: %v, want invalid requestState", err)
	}
	if _, err := deployCall(t, alice, "api", "6.6.6", state, &mcp.ElicitResult{Action: "accept"}); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("a retry with other arguments: %v, want invalid requestState", err)
	}
	if _, err := deployCall(t, alice, "api", "1.2.3", "mcpgrain-call.v1.call_x."+p.ID, &mcp.ElicitResult{Action: "accept"}); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("a forged state: %v, want invalid requestState", err)
	}
	if n := s.lines("requested api 6.6.6"); n != 0 {
		t.Fatalf("the handler ran %d times for a refused state", n)
	}
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	res, err := deployCall(t, alice, "api", "1.2.3", state, nil)
	if got, want := finished(t, res, err), "deployed api 1.2.3, approved by bob"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	res, err = deployCall(t, alice, "api", "1.2.3", state, &mcp.ElicitResult{Action: "decline"})
	if got, want := finished(t, res, err), "deployed api 1.2.3, approved by bob"; got != want {
		t.Fatalf("the client's late decline: %q, want the decision that stood, %q", got, want)
	}
	if n := s.lines("deployed api 1.2.3"); n != 1 {
		t.Fatalf("%d deployments, want 1", n)
	}
	if code, _ := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusConflict {
		t.Fatalf("a second decision: %d, want 409 (already decided)", code)
	}

	state = asked(t, alice, "api", "9.9.9", "Deploy api 9.9.9?")
	p = s.awaitPause("Deploy api 9.9.9?")
	cmd := exec.Command(binary(t), "approve", "decline", p.ID, "--grpc", s.grpc, "--reason", "not on a friday")
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+bobToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy approve decline: %v\n%s", err, out)
	}
	res, err = deployCall(t, alice, "api", "9.9.9", state, &mcp.ElicitResult{Action: "accept"})
	if got, want := finished(t, res, err), `deploy of api 9.9.9 declined by "bob": not on a friday`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed api 9.9.9"); n != 0 {
		t.Fatalf("%d deployments of a declined version", n)
	}
}

// A 2026-07-28 client that answers input requests (go-sdk's
// multi-round-trip loop and an elicitation handler): an admin's accept is
// the decision, and the call deploys in the same CallTool; its pause is
// then settled (409 on the surfaces). A viewer's client answering accept
// decides nothing: the tool says so and the question stays listed until a
// member accepts it over HTTP, after which the viewer's retry deploys.
func TestSessionlessDeployApprovedByTheClient(t *testing.T) {
	s := newServer(t)
	s.start()
	accepting := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}}
	alice := connectModern(t, s.endpoint, aliceToken, accepting)
	res, err := deployCall(t, alice, "cache", "5.0.0", "", nil)
	if got, want := finished(t, res, err), "deployed cache 5.0.0, approved by alice"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed cache 5.0.0"); n != 1 {
		t.Fatalf("%d deployments, want 1", n)
	}

	vic := connectModern(t, s.endpoint, vicToken, manual)
	state := asked(t, vic, "cache", "5.0.1", "Deploy cache 5.0.1?")
	res, err = deployCall(t, vic, "cache", "5.0.1", state, &mcp.ElicitResult{Action: "accept"})
	if err != nil || !res.IsError || !strings.Contains(mcpclient.Text(res), "may not decide") {
		t.Fatalf("a viewer's answer: %v %q, want the role error", err, mcpclient.Text(res))
	}
	p := s.awaitPause("Deploy cache 5.0.1?")
	if code, body := api(t, http.MethodPost, s.approvals+"/"+p.ID+"/resume", bobToken, `{"action":"accept"}`); code != http.StatusOK {
		t.Fatalf("bob's accept: %d %s", code, body)
	}
	res, err = deployCall(t, vic, "cache", "5.0.1", state, nil)
	if got, want := finished(t, res, err), "deployed cache 5.0.1, approved by bob"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if n := s.lines("deployed cache 5.0.1"); n != 1 {
		t.Fatalf("%d deployments, want 1", n)
	}
}

// Nobody decides within the approval window: until it lapses a retry
// without an answer is asked again; then the question is declined
// (approval_timeout, by nobody), and nothing is deployed.
func TestSessionlessDeployDeclinedWhenTheApprovalWindowLapses(t *testing.T) {
	s := newServer(t)
	s.start("--approval-window", "2s")
	alice := connectModern(t, s.endpoint, aliceToken, manual)
	began := time.Now()
	state := asked(t, alice, "db", "3.0.0", "Deploy db 3.0.0?")
	var got string
	for deadline := time.Now().Add(60 * time.Second); got == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		res, err := deployCall(t, alice, "db", "3.0.0", state, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() {
			got = finished(t, res, err)
		}
	}
	if want := `deploy of db 3.0.0 declined by "": approval_timeout`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if took := time.Since(began); took < 2*time.Second {
		t.Fatalf("declined after %s, before the 2s window lapsed", took)
	}
	t.Logf("declined %s after the question (window 2s)", time.Since(began).Round(time.Millisecond))
	if n := s.lines("deployed db 3.0.0"); n != 0 {
		t.Fatalf("%d deployments after the window lapsed", n)
	}
}
