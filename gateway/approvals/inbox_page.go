package approvals

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// maxArgsShown bounds the arguments an inbox entry shows (the execution's
// page shows them all).
const maxArgsShown = 1500

// inboxCSP allows the inbox its one same-origin script (live updates) and
// its event stream; nothing else changes from the approval page's policy.
const inboxCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var inboxTmpl = template.Must(template.New("inbox").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Approvals · mcpgrain</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;overflow-wrap:anywhere}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:1.6rem}h3{font-size:1rem;margin:0 0 .4rem}
article{border:1px solid #ccc;border-radius:.4rem;padding:.8rem 1rem;margin:.8rem 0}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.1rem 1rem;margin:.4rem 0}
dt{font-weight:600}dd{margin:0;min-width:0}
code{overflow-wrap:anywhere;word-break:break-all}
pre{background:#f4f4f4;padding:.6rem;overflow:auto;max-height:12rem;white-space:pre-wrap;word-break:break-word;margin:.4rem 0}
button{font:inherit;padding:.4rem 1.2rem;margin-right:.6rem;border-radius:.3rem;border:1px solid #888;cursor:pointer}
button.approve{background:#1e7d32;color:#fff;border-color:#1e7d32}
button.decline{background:#b3261e;color:#fff;border-color:#b3261e}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.2rem .6rem .2rem 0;border-bottom:1px solid #eee;vertical-align:top}
.why{color:#555}
@media (max-width:40rem){body{margin:1rem auto}article{padding:.6rem}dl{grid-template-columns:minmax(0,1fr)}dd{margin-bottom:.3rem}
table,tbody,tr,td{display:block;width:auto}thead{display:none}tr{border-bottom:1px solid #ccc;padding:.4rem 0}td{border:0;padding:.05rem 0}
td[data-label]::before{content:attr(data-label) ": ";font-weight:600}}
.note,.empty{color:#555}
</style>
{{if not .Login}}<script src="/approvals/inbox.js" defer></script>{{end}}
</head>
<body>
<h1>Approvals</h1>
{{if .Login}}
<p>Sign in with your mcpgrain token to see your organization's executions waiting for approval.</p>
{{if .Detail}}<p class="note">{{.Detail}}</p>{{end}}
<form method="post" action="/approvals/login">
<label>Token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Sign in</button>
</form>
{{else}}
<p class="note">Executions of <strong id="org">{{.Org}}</strong> waiting for a decision, newest first. Signed in as <span id="user">{{.User}}</span>. <span id="live"><a href="/approvals">Reload</a> to see changes.</span></p>
{{if .Detail}}<p class="note" id="view-only">{{.Detail}}</p>{{end}}
<div id="inbox">{{template "list" .List}}</div>
{{end}}
</body>
</html>
{{define "list"}}<section id="pending">
<h2>Waiting ({{len .Pending}}{{if .More}}+{{end}})</h2>
{{if not .Pending}}<p class="empty" id="empty">Nothing is waiting for approval. A tool call that needs approval shows up here.</p>{{end}}
{{if .More}}<p class="note" id="more">Only the {{len .Pending}} newest are shown; decide some to see the rest.</p>{{end}}
{{range .Pending}}<article class="exec" id="exec-{{.ID}}" data-id="{{.ID}}">
<h3><code class="tool">{{.Tool}}</code>{{if .ApprovalText}} — <span class="approval-text">{{.ApprovalText}}</span>{{end}}</h3>
<pre class="arguments">{{.Args}}</pre>{{if .Truncated}}<p class="note truncated">The arguments are cut short here; the <a href="/approve/{{.ID}}">execution's page</a> shows them all.</p>{{end}}
<dl>
<dt>Requested by</dt><dd class="owner">{{.User}}</dd>
<dt>Session</dt><dd><code class="session">{{.Session}}</code></dd>
<dt>Time left</dt><dd class="time-left" data-deadline="{{.DeadlineMs}}">{{.TimeLeft}}</dd>
<dt>Execution</dt><dd><a class="details" href="/approve/{{.ID}}"><code>{{.ID}}</code></a></dd>
</dl>
{{if .CSRF}}<form method="post" action="/approvals/{{.ID}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button class="approve" type="submit" name="action" value="accept">Approve</button>
<button class="decline" type="submit" name="action" value="decline">Decline</button>
</form>{{end}}
</article>
{{end}}</section>
<section id="history">
<h2>Recent decisions</h2>
{{if not .Recent}}<p class="empty" id="no-history">Nothing was decided lately.</p>{{else}}<table>
<thead><tr><th>When</th><th>Who</th><th>What</th><th>Why</th><th>Tool</th><th>Requested by</th></tr></thead>
<tbody>{{range .Recent}}<tr class="decision" data-id="{{.ExecutionID}}"><td data-label="When" class="when">{{.At.UTC.Format "2006-01-02 15:04:05 UTC"}}</td><td data-label="Who" class="who">{{if .DecidedBy}}{{.DecidedBy}}{{else}}—{{end}}</td><td data-label="What" class="what">{{.Outcome}}</td><td data-label="Why" class="why">{{if .Reason}}{{.Reason}}{{else}}—{{end}}</td><td data-label="Tool"><code>{{.Tool}}</code></td><td data-label="Requested by">{{.RequestedBy}}</td></tr>
{{end}}</tbody></table>{{end}}
</section>{{end}}
`))

// inboxData is the inbox page.
type inboxData struct {
	Login     bool
	Detail    string
	Org, User string
	List      listData
}

// listData is the inbox's list: the page's and each live update's.
type listData struct {
	Pending []entryData
	More    bool
	Recent  []Settlement
}

// entryData is one waiting execution.
type entryData struct {
	ID, Tool, ApprovalText, User, Session string
	Args                                  string
	Truncated                             bool
	DeadlineMs                            int64
	TimeLeft                              string
	CSRF                                  string
}

// listFor renders in for who: decision forms only for a role that may
// decide.
func (p *page) listFor(who *pb.Principal, in Inbox, now time.Time) listData {
	d := listData{More: in.More, Recent: in.Recent}
	decide := p.svc.MayDecide(who)
	for _, e := range in.Pending {
		args, cut := shownArgs(e.GetArgumentsJson(), maxArgsShown)
		ed := entryData{ID: e.GetExecutionId(), Tool: e.GetAddress(), ApprovalText: e.GetApprovalText(),
			User: e.GetPrincipal().GetUser(), Session: e.GetSessionId(), Args: args, Truncated: cut,
			DeadlineMs: e.GetDeadlineMs(), TimeLeft: timeLeft(time.UnixMilli(e.GetDeadlineMs()), now)}
		if decide {
			ed.CSRF = p.csrf(who, ed.ID)
		}
		d.Pending = append(d.Pending, ed)
	}
	return d
}

// shownArgs is a call's arguments as an entry shows them: indented JSON
// (anything else as is), valid UTF-8, cut to at most limit bytes on a
// character boundary (cut reports it).
func shownArgs(raw string, limit int) (s string, cut bool) {
	var b bytes.Buffer
	if json.Indent(&b, []byte(raw), "", "  ") != nil {
		b.Reset()
		b.WriteString(raw)
	}
	s = strings.ToValidUTF8(b.String(), "\uFFFD")
	if len(s) <= limit {
		return s, false
	}
	s = s[:limit]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1] // drop a partial last character
	}
	return s + "…", true
}

// timeLeft says how long until deadline, to the second.
func timeLeft(deadline, now time.Time) string {
	d := deadline.Sub(now).Truncate(time.Second)
	if d <= 0 {
		return "expired"
	}
	return d.String() + " left"
}

func (p *page) renderInbox(w http.ResponseWriter, status int, d inboxData) {
	var buf bytes.Buffer
	if err := inboxTmpl.Execute(&buf, d); err != nil {
		p.o.Logger.Error("approvals: render inbox", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	pageHeaders(w.Header(), inboxCSP)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// inboxTarget is the inbox, as a page that signs in.
func (p *page) inboxTarget() target {
	return target{path: "/approvals", form: func(w http.ResponseWriter, status int, detail string) {
		p.renderInbox(w, status, inboxData{Login: true, Detail: detail})
	}}
}

// inbox serves GET /approvals.
func (p *page) inbox(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" && !p.o.Auth.NoAuth() {
		if !sameOrigin(r) {
			p.renderInbox(w, http.StatusForbidden, inboxData{Login: true, Detail: crossSiteSignIn})
			return
		}
		p.signIn(w, r, tok, "", p.inboxTarget())
		return
	}
	who, ok := p.signedIn(w, r, p.inboxTarget())
	if !ok {
		return
	}
	in, err := p.svc.Inbox(r.Context(), who)
	if err != nil {
		p.o.Logger.Warn("approvals: inbox", "err", err)
		p.message(w, http.StatusServiceUnavailable, "Try again", "The list of waiting executions could not be read.", "Reload this page in a moment.")
		return
	}
	d := inboxData{Org: who.GetOrg(), User: who.GetUser(), List: p.listFor(who, in, p.svc.now())}
	if !p.svc.MayDecide(who) {
		d.Detail = strings.TrimPrefix(p.svc.roleError(who).Error(), ErrInsufficientRole.Error()+": ") + "."
	}
	p.renderInbox(w, http.StatusOK, d)
}

// inboxLogin serves POST /approvals/login.
func (p *page) inboxLogin(w http.ResponseWriter, r *http.Request) {
	form, ok := p.form(w, r)
	if !ok {
		return
	}
	p.signIn(w, r, strings.TrimSpace(form.Get("token")), "That token is not valid.", p.inboxTarget())
}

// inboxDecide serves POST /approvals/{eid}: an entry's Approve or
// Decline, then back to the inbox (its history shows the decision).
func (p *page) inboxDecide(w http.ResponseWriter, r *http.Request) {
	if _, ok := p.decideForm(w, r, r.PathValue("eid"), p.inboxTarget(), "inbox"); !ok {
		return
	}
	http.Redirect(w, r, "/approvals", http.StatusSeeOther)
}
