package approvals

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestShownArgs(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		max       int
		want      string
		cut       bool
	}{
		{"indented", `{"a":1}`, 100, "{\n  \"a\": 1\n}", false},
		{"not JSON is shown as is", `<b>`, 100, `<b>`, false},
		{"invalid UTF-8 is replaced", "\xff", 100, "\uFFFD", false},
		{"invalid UTF-8 in a JSON string is replaced", "[\"\xff\"]", 100, "[\n  \"\uFFFD\"\n]", false},
		{"cut", `"abcdef"`, 4, `"abc…`, true},
		{"cut on a character boundary", `"ééé"`, 4, `"é…`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := shownArgs(tc.raw, tc.max)
			if got != tc.want || cut != tc.cut {
				t.Errorf("shownArgs(%q, %d) = %q %v, want %q %v", tc.raw, tc.max, got, cut, tc.want, tc.cut)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	at := time.UnixMilli(1_900_000_000_000)
	for _, tc := range []struct {
		decision string
		settled  time.Time
		want     string
	}{
		{"accept", at, "accepted"},
		{"decline", at, "declined"},
		{"cancel", at, "cancelled"},
		{"", at.Add(time.Minute), "timed out"},
		{"", at, "timed out"},
		{"", at.Add(-time.Second), "answered in its session"},
	} {
		r := directory.Execution{Decision: tc.decision, Deadline: at, Settled: tc.settled}
		if got := outcome(r); got != tc.want {
			t.Errorf("outcome(%q, settled %v) = %q, want %q", tc.decision, tc.settled.Sub(at), got, tc.want)
		}
	}
}

func TestNewestFirstIsBounded(t *testing.T) {
	var list []*pb.PausedExecution
	for i, ms := range []int64{30, 10, 20, 20} {
		list = append(list, &pb.PausedExecution{ExecutionId: string(rune('a' + i)), DeadlineMs: ms})
	}
	got := newestFirst(list, 3)
	var ids []string
	for _, p := range got {
		ids = append(ids, p.GetExecutionId())
	}
	if strings.Join(ids, ",") != "a,c,d" {
		t.Fatalf("newestFirst = %v, want a,c,d (latest deadline first, ties by id, 3 kept)", ids)
	}
	if list[1].GetExecutionId() != "b" {
		t.Fatal("newestFirst reordered its input")
	}
}

func TestStreamLimits(t *testing.T) {
	l := newStreamLimits(2, 3)
	var releases []func()
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"alice", true}, {"alice", true}, {"alice", false}, // per principal
		{"bob", true}, {"carol", false}, // per node
	} {
		release, ok := l.acquire(tc.key)
		if ok != tc.ok {
			t.Fatalf("acquire(%s) = %v, want %v", tc.key, ok, tc.ok)
		}
		if ok {
			releases = append(releases, release)
		}
	}
	releases[0]()
	releases[0]() // twice is once
	if _, ok := l.acquire("carol"); !ok {
		t.Fatal("a released stream was not given back")
	}
	if _, ok := l.acquire("alice"); ok {
		t.Fatal("the node's bound was exceeded after a double release")
	}
	for _, r := range releases[1:] {
		r()
	}
	if len(l.open) != 1 {
		t.Fatalf("open = %v: principals without streams are remembered", l.open)
	}
}

func TestWriteEventKeepsDataInDataFields(t *testing.T) {
	var b strings.Builder
	if err := writeEvent(&b, "inbox", "<p>a\r\nevent: evil\rdata: x\nb</p>"); err != nil {
		t.Fatal(err)
	}
	want := "event: inbox\ndata: <p>a\ndata: event: evil\ndata: data: x\ndata: b</p>\n\n"
	if b.String() != want {
		t.Fatalf("event %q, want %q", b.String(), want)
	}
}

// memDirectory is an execution directory in memory; it records decisions.
type memDirectory struct {
	mu   sync.Mutex
	rows map[string]directory.Execution
}

func (d *memDirectory) GetExecution(_ context.Context, id string) (directory.Execution, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.rows[id]
	if !ok {
		return directory.Execution{}, store.ErrNotFound
	}
	return r, nil
}

func (d *memDirectory) ListExecutions(_ context.Context, org string, _ time.Time, _ int) ([]directory.Execution, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []directory.Execution
	for _, r := range d.rows {
		if r.Org == org && r.Settled.IsZero() {
			out = append(out, r)
		}
	}
	return out, nil
}

func (d *memDirectory) RecordDecision(_ context.Context, id, user, action, reason string, at time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.rows[id]
	r.DecidedBy, r.Decision, r.Reason, r.Settled = user, action, reason, at
	d.rows[id] = r
	return nil
}

func (d *memDirectory) ListDecided(_ context.Context, org string, _ int) ([]directory.Execution, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []directory.Execution
	for _, r := range d.rows {
		if r.Org == org && !r.Settled.IsZero() {
			out = append(out, r)
		}
	}
	return out, nil
}

// countingSession decides whatever it is asked and counts decisions.
type countingSession struct {
	mu      sync.Mutex
	decided []string
}

func (s *countingSession) Request(_ context.Context, _, _ string, m proto.Message, _ ...cluster.CallOption) (proto.Message, error) {
	if d, ok := m.(*pb.ExecutionDecide); ok {
		s.mu.Lock()
		s.decided = append(s.decided, d.GetExecutionId())
		s.mu.Unlock()
	}
	return &pb.ExecutionReply{Status: pb.ExecutionReply_STATUS_OK, Text: "I've accepted it"}, nil
}

// Test tokens: alice admin, bob member, vera viewer (org acme); carol
// admin of globex.
const (
	tAlice = "tok_alice_0123456789abcdef"
	tBob   = "tok_bob_0123456789abcdefgh"
	tVera  = "tok_vera_0123456789abcdefg"
	tCarol = "tok_carol_0123456789abcdef"
)

type inboxFixture struct {
	srv     *httptest.Server
	p       *page
	session *countingSession
	dir     *memDirectory
}

func newInboxFixture(t *testing.T, approvers policy.Approvers, tweak ...func(*HTTPOptions)) *inboxFixture {
	t.Helper()
	keys, err := auth.NewKeys(
		auth.Entry{Token: tAlice, User: "alice", Org: "acme", Role: "admin"},
		auth.Entry{Token: tBob, User: "bob", Org: "acme", Role: "member"},
		auth.Entry{Token: tVera, User: "vera", Org: "acme", Role: "viewer"},
		auth.Entry{Token: tCarol, User: "carol", Org: "globex", Role: "admin"},
	)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Minute)
	dir := &memDirectory{rows: map[string]directory.Execution{
		"exec_acme": {ID: "exec_acme", Session: "S1", User: "alice", Org: "acme", Address: "demo.createTodo",
			ArgsJSON: `{"title":"<script>alert(1)</script>"}`, Deadline: deadline},
		"exec_globex": {ID: "exec_globex", Session: "S2", User: "carol", Org: "globex", Address: "demo.deleteTodo",
			ArgsJSON: `{"id":"globex-secret"}`, Deadline: deadline},
	}}
	f := &inboxFixture{session: &countingSession{}, dir: dir}
	svc := NewService(f.session, dir, ServiceOptions{Approvers: approvers})
	mux := http.NewServeMux()
	o := HTTPOptions{Auth: auth.NewAuthenticator(keys, auth.AuthOptions{}), PageKey: []byte(strings.Repeat("k", 32)),
		InboxInterval: 10 * time.Millisecond, InboxStreamsPerPrincipal: 1}
	for _, fn := range tweak {
		fn(&o)
	}
	if err := Register(mux, svc, o); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.p = &page{svc: svc, o: o}
	return f
}

// get fetches path with token in the pages' cookie.
func (f *inboxFixture) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: TokenCookie, Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

func (f *inboxFixture) post(t *testing.T, path, token string, form url.Values) int {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: TokenCookie, Value: token})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestInboxShowsOnlyTheOrganizationsExecutionsEscaped(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	st, body := f.get(t, "/approvals", tBob)
	if st != 200 || !strings.Contains(body, `id="exec-exec_acme"`) || strings.Contains(body, "exec_globex") || strings.Contains(body, "globex-secret") {
		t.Fatalf("bob's inbox (%d) shows acme's execution only?\n%s", st, body)
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("arguments are not escaped:\n%s", body)
	}
	if !strings.Contains(body, `name="csrf" value="`+f.p.csrf(&pb.Principal{User: "bob", Org: "acme"}, "exec_acme")+`"`) {
		t.Fatal("bob's form does not carry his token for the execution")
	}
	st, body = f.get(t, "/approvals", tCarol)
	if st != 200 || strings.Contains(body, "exec_acme") || !strings.Contains(body, "exec_globex") {
		t.Fatalf("carol's inbox shows another org's execution:\n%s", body)
	}
	if st, body = f.get(t, "/approvals", ""); st != 401 || !strings.Contains(body, `action="/approvals/login"`) {
		t.Fatalf("signed out: %d\n%s", st, body)
	}
}

func TestApprovalPageLinksToTheInbox(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	for _, tc := range []struct{ name, token string }{{"signed in", tBob}, {"signed out", ""}} {
		if _, body := f.get(t, "/approve/exec_acme", tc.token); !strings.Contains(body, `<a id="inbox-link" href="/approvals">`) {
			t.Errorf("%s: the approval page does not link to the inbox:\n%s", tc.name, body)
		}
	}
}

func TestInboxEmptyState(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	delete(f.dir.rows, "exec_acme")
	if _, body := f.get(t, "/approvals", tBob); !strings.Contains(body, `id="empty"`) || !strings.Contains(body, `id="no-history"`) {
		t.Fatalf("empty inbox:\n%s", body)
	}
}

// TestInboxRefusesHostileDecisions: each refused form decides nothing.
func TestInboxRefusesHostileDecisions(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	alice := &pb.Principal{User: "alice", Org: "acme"}
	carol := &pb.Principal{User: "carol", Org: "globex"}
	form := func(csrf string) url.Values { return url.Values{"action": {"accept"}, "csrf": {csrf}} }
	for _, tc := range []struct {
		name, token, id string
		form            url.Values
		want            int
	}{
		{"no csrf", tBob, "exec_acme", url.Values{"action": {"accept"}}, 403},
		{"forged csrf", tBob, "exec_acme", form("forged"), 403},
		{"another principal's csrf", tBob, "exec_acme", form(f.p.csrf(alice, "exec_acme")), 403},
		{"another execution's csrf", tCarol, "exec_acme", form(f.p.csrf(carol, "exec_globex")), 403},
		{"another org's execution, its own valid csrf", tCarol, "exec_acme", form(f.p.csrf(carol, "exec_acme")), 404},
		{"a viewer, with a valid csrf", tVera, "exec_acme", form(f.p.csrf(&pb.Principal{User: "vera", Org: "acme"}, "exec_acme")), 403},
		{"signed out", "", "exec_acme", form(f.p.csrf(alice, "exec_acme")), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if st := f.post(t, "/approvals/"+tc.id, tc.token, tc.form); st != tc.want {
				t.Fatalf("status %d, want %d", st, tc.want)
			}
			if len(f.session.decided) != 0 {
				t.Fatalf("decided %v", f.session.decided)
			}
		})
	}
	if st := f.post(t, "/approvals/exec_acme", tAlice, form(f.p.csrf(alice, "exec_acme"))); st != http.StatusSeeOther {
		t.Fatalf("alice's own form: %d", st)
	}
	if len(f.session.decided) != 1 {
		t.Fatalf("decided %v", f.session.decided)
	}
	if _, body := f.get(t, "/approvals", tBob); !strings.Contains(body, `class="who">alice<`) || !strings.Contains(body, `class="what">accepted<`) {
		t.Fatalf("history after alice's decision:\n%s", body)
	}
}

func TestInboxRolesSeeNoFormsTheyMayNotUse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		approvers policy.Approvers
		token     string
		forms     bool
	}{
		{"member", policy.ApproversMember, tBob, true},
		{"viewer", policy.ApproversMember, tVera, false},
		{"member when admins decide", policy.ApproversAdmin, tBob, false},
		{"admin when admins decide", policy.ApproversAdmin, tAlice, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newInboxFixture(t, tc.approvers)
			_, body := f.get(t, "/approvals", tc.token)
			if strings.Contains(body, `name="csrf"`) != tc.forms || strings.Contains(body, `id="view-only"`) == tc.forms {
				t.Fatalf("forms shown: %v, want %v\n%s", !tc.forms, tc.forms, body)
			}
		})
	}
}

func TestInboxPageHeaders(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	req, _ := http.NewRequest("GET", f.srv.URL+"/approvals", nil)
	req.AddCookie(&http.Cookie{Name: TokenCookie, Value: tBob})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self';") || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", resp.Header)
	}
	// A sign-in link from another site sets no cookie.
	req, _ = http.NewRequest("GET", f.srv.URL+"/approvals?token="+tBob, nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Fatalf("cross-site sign-in link: %d cookies %v", resp.StatusCode, resp.Cookies())
	}
}

func TestInboxEventsStreamTheListAndAreBoundedPerPrincipal(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/approvals/events", nil)
	req.AddCookie(&http.Cookie{Name: TokenCookie, Value: tBob})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", resp.StatusCode, resp.Header)
	}
	sc := bufio.NewScanner(resp.Body)
	waitFor := func(want string) {
		t.Helper()
		for sc.Scan() {
			if strings.Contains(sc.Text(), want) {
				return
			}
		}
		t.Fatalf("the stream ended before %q: %v", want, sc.Err())
	}
	waitFor(`id="exec-exec_acme"`)
	// A second stream of the same principal is refused; another's is not.
	if st, _ := f.get(t, "/approvals/events", tBob); st != http.StatusTooManyRequests {
		t.Fatalf("bob's second stream: %d", st)
	}
	if st, _ := f.get(t, "/approvals/events", ""); st != http.StatusUnauthorized {
		t.Fatalf("signed-out stream: %d", st)
	}
	// A settlement elsewhere redraws the list.
	_ = f.dir.RecordDecision(ctx, "exec_acme", "alice", "decline", "", time.Now())
	waitFor(`class="what">declined<`)
}

// TestFeedsShareOnePollPerOrganization: two streams of one organization
// get the same looks (one poll serves both), another organization gets
// its own, and a feed stops polling when its last stream leaves.
func TestFeedsShareOnePollPerOrganization(t *testing.T) {
	var mu sync.Mutex
	polls := map[string]int{}
	f := &feeds{interval: time.Millisecond, log: slog.New(slog.DiscardHandler), orgs: map[string]*feed{},
		poll: func(_ context.Context, org string) (Inbox, error) {
			mu.Lock()
			defer mu.Unlock()
			polls[org]++
			return Inbox{Recent: []Settlement{{ExecutionID: strconv.Itoa(polls[org]), Tool: org}}}, nil
		}}
	a, leaveA := f.subscribe("acme")
	b, leaveB := f.subscribe("acme")
	g, leaveG := f.subscribe("globex")
	f.mu.Lock()
	running := len(f.orgs)
	f.mu.Unlock()
	if running != 2 {
		t.Fatalf("%d polls run for 2 organizations", running)
	}
	// Each look is a poll's number; a stream may skip looks, never see
	// another's: both streams reach the same look.
	seen := func(ch <-chan inboxUpdate, org string, until int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case u := <-ch:
				if u.in.Recent[0].Tool != org {
					t.Fatalf("a stream of %s got a look of %s", org, u.in.Recent[0].Tool)
				}
				if n, _ := strconv.Atoi(u.in.Recent[0].ExecutionID); n >= until {
					return
				}
			case <-deadline:
				t.Fatalf("no look %d of %s", until, org)
			}
		}
	}
	seen(a, "acme", 5)
	seen(b, "acme", 5)
	seen(g, "globex", 5)
	mu.Lock()
	n := polls["acme"]
	mu.Unlock()
	if n < 5 {
		t.Fatalf("acme polled %d times", n)
	}
	leaveA()
	leaveA()
	leaveB()
	leaveG()
	f.mu.Lock()
	left := len(f.orgs)
	f.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d feeds still poll without streams", left)
	}
}

// readStream reads an event stream of path as token until it ends (or
// the test's deadline).
func (f *inboxFixture) readStream(t *testing.T, path, token string, hdr map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: TokenCookie, Value: token})
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		t.Fatalf("the stream did not end: %v", err)
	}
	return resp.StatusCode, b.String()
}

func TestInboxStreamsEnd(t *testing.T) {
	f := newInboxFixture(t, policy.ApproversMember, func(o *HTTPOptions) { o.InboxStreamAge = 300 * time.Millisecond })
	st, body := f.readStream(t, "/approvals/events", tBob, nil)
	if st != 200 || !strings.HasPrefix(body, "retry: 2000\n\n") || !strings.Contains(body, "event: inbox\n") {
		t.Fatalf("a stream past its age: %d %q, want the reconnect delay and the list, then its end", st, body)
	}
	if st, _ := f.readStream(t, "/approvals/events", tBob, map[string]string{"Sec-Fetch-Site": "same-site"}); st != http.StatusForbidden {
		t.Fatalf("a stream opened by a sibling site: %d", st)
	}
	stopping := newInboxFixture(t, policy.ApproversMember, func(o *HTTPOptions) { o.Stopping = func() bool { return true } })
	if st, body := stopping.readStream(t, "/approvals/events", tBob, nil); st != 200 || strings.Contains(body, "event:") {
		t.Fatalf("a stream of a stopping node: %d %q, want its end before any list", st, body)
	}
}

// brokenDirectory fails every read.
type brokenDirectory struct{ *memDirectory }

func (*brokenDirectory) ListExecutions(context.Context, string, time.Time, int) ([]directory.Execution, error) {
	return nil, errors.New("connection refused")
}

func TestInboxWhenTheDirectoryFails(t *testing.T) {
	keys, err := auth.NewKeys(auth.Entry{Token: tBob, User: "bob", Org: "acme", Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	svc := NewService(&countingSession{}, &brokenDirectory{&memDirectory{}}, ServiceOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := Register(mux, svc, HTTPOptions{Auth: auth.NewAuthenticator(keys, auth.AuthOptions{}), PageKey: []byte(strings.Repeat("k", 32)),
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := &inboxFixture{srv: srv}
	if st, body := f.get(t, "/approvals", tBob); st != http.StatusServiceUnavailable || !strings.Contains(body, "could not be read") {
		t.Fatalf("inbox without a directory: %d\n%s", st, body)
	}
}
