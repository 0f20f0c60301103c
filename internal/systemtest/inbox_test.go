package systemtest

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// inboxTab opens a tab of the browser in a context of its own (its own
// cookies, as another person's browser) and signs in to the inbox at addr
// with token, as a link pasted into the address bar.
func inboxTab(t *testing.T, browserCtx context.Context, addr, token string, scripts bool) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // open the tab on a context without a timeout: it lives as long as ctx
		t.Fatalf("open a tab: %v", err)
	}
	if !scripts {
		if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			t.Fatal(err)
		}
	}
	browse(t, ctx, chromedp.Navigate("http://"+addr+"/approvals?token="+token), chromedp.WaitVisible(chromedp.CSS("#inbox")))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != "http://"+addr+"/approvals" {
		t.Fatalf("address after sign-in: %q %v", loc, err)
	}
	return ctx
}

// markPage sets a mark on the loaded page; pageMarked reports whether the
// page still has it (no navigation or reload happened since).
func markPage(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.inboxMark = 42`)); err != nil {
		t.Fatal(err)
	}
}

func pageMarked(t *testing.T, ctx context.Context) bool {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.inboxMark || 0`))
	if err != nil {
		t.Fatal(err)
	}
	return v == 42
}

// entry is the selector of an execution's inbox entry, decision the one
// of its history row.
func entry(id string) string { return "#exec-" + id }

// TestApprovalsInboxInHeadlessChromium: two browsers of one organization
// see a pause appear without reloading; one approves it, the other sees
// the decision (who, what) arrive; another organization's browser never
// sees it; without JavaScript the inbox works by reloading and posting.
func TestApprovalsInboxInHeadlessChromium(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	ctx := browser(t)
	alice := inboxTab(t, ctx, info.HTTPAddr, aliceToken, true)
	bob := inboxTab(t, ctx, info.HTTPAddr, bobToken, true)
	carol := inboxTab(t, ctx, info.HTTPAddr, carolToken, true)
	for _, tab := range []context.Context{alice, bob, carol} {
		browse(t, tab, chromedp.WaitVisible(chromedp.CSS("#empty")))
		markPage(t, tab)
	}

	id := pause(t, cs, "waiting_for_interaction")
	for name, tab := range map[string]context.Context{"alice": alice, "bob": bob} {
		browse(t, tab, chromedp.WaitVisible(chromedp.CSS(entry(id)+" button.approve")))
		tool, args, owner, left := text(t, tab, entry(id)+" .tool"), text(t, tab, entry(id)+" .arguments"), text(t, tab, entry(id)+" .owner"), text(t, tab, entry(id)+" .time-left")
		if tool != "demo.createTodo" || !strings.Contains(args, `"title": "ship it"`) || owner != "alice" || !strings.HasSuffix(left, "s left") {
			t.Fatalf("%s's inbox shows tool %q args %q owner %q time left %q", name, tool, args, owner, left)
		}
		if !pageMarked(t, tab) {
			t.Fatalf("%s's inbox reloaded: the pause should arrive live", name)
		}
	}
	browse(t, carol, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#empty")))
	if body := text(t, carol, "body"); strings.Contains(body, id) {
		t.Fatal("another organization's inbox shows the pause")
	}

	browse(t, alice, chromedp.Click(chromedp.CSS(entry(id)+" button.approve")), chromedp.WaitVisible(chromedp.CSS(decision(id))))
	browse(t, bob, chromedp.WaitNotPresent(chromedp.CSS(entry(id))), chromedp.WaitVisible(chromedp.CSS(decision(id))))
	for name, tab := range map[string]context.Context{"alice": alice, "bob": bob} {
		if who, what := text(t, tab, decision(id)+" .who"), text(t, tab, decision(id)+" .what"); who != "alice" || what != "accepted" {
			t.Fatalf("%s's history: %q %q, want alice accepted", name, who, what)
		}
	}
	if !pageMarked(t, bob) {
		t.Fatal("bob's inbox reloaded: the decision should arrive live")
	}
	if res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id}); res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume after the inbox's approval: %s", mcpclient.Text(res))
	}

	// Without JavaScript: reload to see, post to decide.
	noJS := inboxTab(t, ctx, info.HTTPAddr, bobToken, false)
	id2 := pause(t, cs, "waiting_for_interaction")
	browse(t, noJS, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(entry(id2)+" button.decline")),
		chromedp.Click(chromedp.CSS(entry(id2)+" button.decline")), chromedp.WaitVisible(chromedp.CSS(decision(id2))))
	if who, what := text(t, noJS, decision(id2)+" .who"), text(t, noJS, decision(id2)+" .what"); who != "bob" || what != "declined" {
		t.Fatalf("history without JavaScript: %q %q", who, what)
	}
	if res, _ := callTool(t, cs, "resume", map[string]any{"executionId": id2}); !res.IsError || !strings.Contains(mcpclient.Text(res), "decline") {
		t.Fatalf("resume after the inbox's decline: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 1 {
		t.Fatalf("todos %d, want 1 (approved ran, declined did not)", n)
	}
}

// TestApprovalsInboxRefusesHostileForms: on a real node, inbox posts
// without a valid token of the poster, cross-site, or by another
// organization decide nothing; the pause stays.
func TestApprovalsInboxRefusesHostileForms(t *testing.T) {
	info := startCodeNode(t, nil)
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	// bob's own token for the execution, from his inbox.
	req, _ := http.NewRequest("GET", "http://"+info.HTTPAddr+"/approvals", nil)
	req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: bobToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`action="/approvals/` + id + `">\s*<input type="hidden" name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("bob's inbox has no form for %s:\n%s", id, page)
	}
	bobCSRF := string(m[1])
	post := func(token, form string, hdr map[string]string) int {
		req, _ := http.NewRequest("POST", "http://"+info.HTTPAddr+"/approvals/"+id, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "mcpgrain_approval_token", Value: token})
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, token, form string
		hdr               map[string]string
		want              int
	}{
		{"no csrf", bobToken, "action=accept", nil, 403},
		{"forged csrf", bobToken, "action=accept&csrf=forged", nil, 403},
		{"bob's csrf, posted by alice", aliceToken, "action=accept&csrf=" + bobCSRF, nil, 403},
		{"bob's csrf, posted by another organization", carolToken, "action=accept&csrf=" + bobCSRF, nil, 403},
		{"cross-site", bobToken, "action=accept&csrf=" + bobCSRF, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
		{"signed out", "", "action=accept&csrf=" + bobCSRF, nil, 401},
	} {
		if st := post(tc.token, tc.form, tc.hdr); st != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, st, tc.want)
		}
	}
	if r := api(t, "GET", "http://"+info.HTTPAddr+"/api/executions/"+id, aliceToken, ""); r.status != 200 {
		t.Fatalf("the pause is gone after refused forms: %d", r.status)
	}
	if st := post(bobToken, "action=accept&csrf="+bobCSRF, nil); st != http.StatusSeeOther {
		t.Fatalf("bob's own form: %d", st)
	}
	if st := post(bobToken, "action=accept&csrf="+bobCSRF, nil); st != http.StatusConflict {
		t.Fatalf("bob's form again: %d, want 409 (already decided)", st)
	}
}
