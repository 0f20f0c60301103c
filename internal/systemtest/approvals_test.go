package systemtest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A browser-mode client pauses a write; a member watching the gRPC
// ApprovalService sees the pause arrive, decides it over gRPC, and the
// waiting resume completes.
func TestGRPCApprovalServiceDecidesAWaitingResume(t *testing.T) {
	info := startCodeNode(t, nil)
	client := approvalClient(t, info.GRPCAddr)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "browser")

	// Watch first: the pause must arrive on the stream.
	wctx, stopWatch := context.WithCancel(withToken(t, bobToken))
	defer stopWatch()
	watch, err := client.WatchPausedExecutions(wctx, &pb.WatchPausedExecutionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := pause(t, cs, "user_approval_required")
	m, err := watch.Recv()
	if err != nil || m.GetExecution().GetExecutionId() != id || m.GetExecution().GetAddress() != "demo.createTodo" {
		t.Fatalf("watch: %v %v", m, err)
	}

	list, err := client.ListPausedExecutions(withToken(t, bobToken), &pb.ListPausedExecutionsRequest{})
	if err != nil || len(list.GetExecutions()) != 1 || list.GetExecutions()[0].GetSessionId() != cs.ID() {
		t.Fatalf("list: %v %v", list, err)
	}
	got, err := client.GetPausedExecution(withToken(t, bobToken), &pb.GetPausedExecutionRequest{ExecutionId: id})
	if err != nil || !strings.Contains(got.GetExecution().GetArgumentsJson(), "ship it") || got.GetExecution().GetApprovalText() != "POST /todos" {
		t.Fatalf("get: %v %v", got, err)
	}

	// Wrong callers get the right codes and change nothing.
	for _, tc := range []struct {
		ctx  context.Context
		code codes.Code
	}{
		{t.Context(), codes.Unauthenticated},
		{withToken(t, "mcpg_not_a_known_token_000"), codes.Unauthenticated},
		{withToken(t, carolToken), codes.NotFound}, // another org
	} {
		_, err := client.DecideExecution(tc.ctx, &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept"})
		if status.Code(err) != tc.code {
			t.Fatalf("decide: %v, want %v", err, tc.code)
		}
	}
	if _, err := client.DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "later"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad action: %v", err)
	}
	if _, err := client.DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept", ContentJson: "[1"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad content: %v", err)
	}

	done := make(chan map[string]any, 1)
	go func() {
		_, sc := callTool(t, cs, "resume", map[string]any{"executionId": id})
		done <- sc
	}()
	d, err := client.DecideExecution(withToken(t, bobToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "accept"})
	if err != nil || d.GetStatus() != "accepted" {
		t.Fatalf("decide: %v %v", d, err)
	}
	if _, err := client.DecideExecution(withToken(t, aliceToken), &pb.DecideExecutionRequest{ExecutionId: id, Action: "decline"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second decision: %v", err)
	}
	select {
	case sc := <-done:
		if sc["status"] != "completed" {
			t.Fatalf("resume: %v", sc)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("resume did not wake")
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 || got[0]["title"] != "ship it" {
		t.Fatalf("todos %v", got)
	}
	if _, err := client.GetPausedExecution(withToken(t, bobToken), &pb.GetPausedExecutionRequest{ExecutionId: id}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("settled execution: %v", err)
	}
}

// An approver drives the `mcpgrain approve` CLI against a node: list
// (empty, then two pauses), show, accept one and decline the other; each
// outcome reaches the client's execution.
func TestCLIApproveListShowAcceptDecline(t *testing.T) {
	bin := testcluster.Binary(t)
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	flags := []string{"--grpc", info.GRPCAddr, "--token-file", tokenFile(t, bobToken)}

	if out, err := mcpgrainCLI(t, bin, append([]string{"approve", "list"}, flags...)...); err != nil || !strings.Contains(out, "no paused executions") {
		t.Fatalf("empty list: %v\n%s", err, out)
	}
	accepted := pause(t, cs, "waiting_for_interaction")
	declined := pause(t, cs, "waiting_for_interaction")

	out, err := mcpgrainCLI(t, bin, append([]string{"approve", "list"}, flags...)...)
	if err != nil || !strings.Contains(out, accepted) || !strings.Contains(out, declined) || !strings.Contains(out, "demo.createTodo") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = mcpgrainCLI(t, bin, append([]string{"approve", "show", accepted}, flags...)...)
	if err != nil || !strings.Contains(out, `"title": "ship it"`) || !strings.Contains(out, "POST /todos") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = mcpgrainCLI(t, bin, append([]string{"approve", "accept", accepted}, flags...)...)
	if err != nil || strings.TrimSpace(out) != accepted+": accepted" {
		t.Fatalf("accept: %v\n%s", err, out)
	}
	out, err = mcpgrainCLI(t, bin, append(append([]string{"approve", "decline"}, flags...), declined, "--reason", "not today")...)
	if err != nil || strings.TrimSpace(out) != declined+": declined" {
		t.Fatalf("decline: %v\n%s", err, out)
	}
	out, err = mcpgrainCLI(t, bin, append([]string{"approve", "accept", accepted}, flags...)...)
	if err == nil || !strings.Contains(out, "execution_already_decided") {
		t.Fatalf("second decision: %v\n%s", err, out)
	}
	out, err = mcpgrainCLI(t, bin, "approve", "list", "--grpc", info.GRPCAddr)
	if err == nil || !strings.Contains(out, "not authenticated") {
		t.Fatalf("no token: %v\n%s", err, out)
	}
	out, err = mcpgrainCLI(t, bin, "approve", "show")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out, "exactly one execution id") {
		t.Fatalf("usage error: %v\n%s", err, out)
	}

	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": accepted, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume accepted: %s", mcpclient.Text(res))
	}
	res, _ = callTool(t, cs, "resume", map[string]any{"executionId": declined, "action": "accept"})
	if !res.IsError || !strings.Contains(mcpclient.Text(res), "not today") {
		t.Fatalf("resume declined: %s", mcpclient.Text(res))
	}
	if got := todos(t, info.HTTPAddr, aliceToken); len(got) != 1 {
		t.Fatalf("todos %v", got)
	}
}

// browser starts headless Chromium and returns its (first tab's) context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if path, err = exec.LookPath("google-chrome"); err != nil {
			testenv.Unavailable(t, "no chromium on PATH (apt-get install chromium)")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // start the browser on a context without a timeout
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// text reads the text of the element sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func browse(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// A browser-mode client pauses a write and follows its approval URL in
// headless Chromium: the link signs in, the page shows the call, and its
// buttons decide it for the waiting resume.
func TestApprovalPageInHeadlessChromium(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "browser")
	ctx := browser(t)

	// Approve: the approval URL with ?token= signs in (and drops the token
	// from the address), the page shows the call, the button decides it.
	_, sc := callTool(t, cs, "execute", map[string]any{"code": createCode})
	approvalURL := sc["approvalUrl"].(string)
	id := sc["executionId"].(string)
	done := make(chan map[string]any, 1)
	go func() {
		_, sc := callTool(t, cs, "resume", map[string]any{"executionId": id})
		done <- sc
	}()
	browse(t, ctx, chromedp.Navigate(approvalURL+"?token="+bobToken))
	if location, err := chromedp.Run(ctx, chromedp.Location()); err != nil || location != approvalURL {
		t.Fatalf("address after sign-in: %q %v", location, err)
	}
	browse(t, ctx, chromedp.WaitVisible(chromedp.CSS("button.approve")))
	tool, args, deadline := text(t, ctx, "#tool"), text(t, ctx, "#arguments"), text(t, ctx, "#deadline")
	if tool != "demo.createTodo" || !strings.Contains(args, `"title": "ship it"`) || !strings.Contains(deadline, "UTC") {
		t.Fatalf("page showed tool %q args %q deadline %q", tool, args, deadline)
	}
	browse(t, ctx, chromedp.Click(chromedp.CSS("button.approve")), chromedp.WaitVisible(chromedp.CSS("#result")))
	if result := text(t, ctx, "#result"); result != "You (bob) accepted it: the tool call runs." {
		t.Fatalf("result %q", result)
	}
	select {
	case sc := <-done:
		if sc["status"] != "completed" {
			t.Fatalf("resume: %v", sc)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("resume did not wake")
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("todos %d after approve", n)
	}

	// Decline, signed out first, signing in through the form.
	_, sc = callTool(t, cs, "execute", map[string]any{"code": createCode})
	approvalURL, id = sc["approvalUrl"].(string), sc["executionId"].(string)
	browse(t, ctx,
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{})
			return err
		}),
		chromedp.Navigate(approvalURL),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
	)
	if h := text(t, ctx, "h1"); h != "Sign in" {
		t.Fatalf("signed-out page: %q", h)
	}
	browse(t, ctx,
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), aliceToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("button.decline")),
		chromedp.Click(chromedp.CSS("button.decline")),
		chromedp.WaitVisible(chromedp.CSS("#result")),
	)
	if result := text(t, ctx, "#result"); result != "You (alice) declined it: the tool call fails (reason: declined in the approval page)." {
		t.Fatalf("result %q", result)
	}
	res, _ := callTool(t, cs, "resume", map[string]any{"executionId": id})
	if !res.IsError || !strings.Contains(mcpclient.Text(res), "decline") {
		t.Fatalf("resume after decline: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("declined call ran: %d todos", n)
	}
}

// Someone posts to a pause's approval page without the page's CSRF token,
// with a forged one or from another site: every form is refused and the
// execution stays paused.
func TestApprovalPageRefusesForgedAndCrossSiteForms(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	page := "http://" + info.HTTPAddr + "/approve/" + id
	post := func(form string, hdr map[string]string) int {
		req, _ := http.NewRequest("POST", page, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: aliceToken})
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("action=accept&csrf=forged", nil); st != 403 {
		t.Fatalf("forged csrf: %d", st)
	}
	if st := post("action=accept", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); st != 403 {
		t.Fatalf("cross-site post: %d", st)
	}
	// Framing is refused, scripts are not allowed, nothing is cached.
	req, _ := http.NewRequest("GET", page, nil)
	req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: aliceToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("page headers: %d %v", resp.StatusCode, resp.Header)
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
		t.Fatalf("refused forms ran the call: %d todos", n)
	}
	if r := api(t, "GET", "http://"+info.HTTPAddr+"/api/executions/"+id, aliceToken, ""); r.status != 200 {
		t.Fatalf("the pause is gone after refused forms: %d", r.status)
	}
}

// TestCrossSiteSignInLinkInHeadlessChromium: a page on another site links
// to the approval page with someone's token (login CSRF). Following the
// link in a real browser (Chromium sends Sec-Fetch-Site: cross-site) shows
// the sign-in form and sets no cookie; the user's own navigation (the
// address bar: Sec-Fetch-Site: none) signs in as before.
func TestCrossSiteSignInLinkInHeadlessChromium(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	link := "http://" + info.HTTPAddr + "/approve/" + id + "?token=" + bobToken
	// The attacker's site: "localhost" is another site than "127.0.0.1".
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><a id="go" href="` + link + `">a prize</a>`))
	}))
	defer evil.Close()
	_, port, _ := net.SplitHostPort(evil.Listener.Addr().String())
	ctx := browser(t)
	cookies := func() []string {
		t.Helper()
		r, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{"http://" + info.HTTPAddr + "/approve/"}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range r.Cookies {
			names = append(names, c.Name)
		}
		return names
	}
	browse(t, ctx,
		chromedp.Navigate("http://localhost:"+port+"/"),
		chromedp.Click(chromedp.CSS("#go")),
		chromedp.WaitVisible(chromedp.CSS("h1")), // the approval page's, whatever it shows
	)
	// (Even unfixed, the page after the redirect showed the sign-in form:
	// the SameSite=Strict cookie is not sent within a cross-site
	// navigation. But it was set, and the next same-site visit used it.)
	if c := cookies(); len(c) != 0 {
		t.Fatalf("the cross-site link set cookies %v", c)
	}
	if body := text(t, ctx, "body"); !strings.Contains(body, "Sign in") || !strings.Contains(body, "another site") {
		t.Fatalf("after the cross-site link: %q, want the sign-in form saying why", body)
	}
	// Typed into the address bar, the same link signs in.
	browse(t, ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("button.approve")))
	if c := cookies(); len(c) != 1 || c[0] != "mcpgrain_approval_token" {
		t.Fatalf("the user's own navigation: cookies %v", c)
	}
}
