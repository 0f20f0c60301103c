package approvals

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// TokenCookie holds the approval pages' bearer token after a sign-in (or a
// link with ?token=). It is HttpOnly, SameSite=Strict and set twice,
// scoped to /approve/ and to /approvals (the inbox).
const TokenCookie = "mcpgrain_approval_token"

// maxFormBody bounds the page's form posts.
const maxFormBody = 8 << 10

type page struct {
	svc     *Service
	o       HTTPOptions
	streams *streamLimits
	feeds   *feeds
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"until": func(t time.Time, now time.Time) string {
		d := t.Sub(now).Round(time.Second)
		if d <= 0 {
			return "expired"
		}
		return "in " + d.String()
	},
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · mcpgrain</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;overflow-wrap:anywhere}
h1{font-size:1.4rem}
code{overflow-wrap:anywhere;word-break:break-all}
dt{font-weight:600;margin-top:.6rem}
dd{margin:0}
pre{background:#f4f4f4;padding:.8rem;overflow:auto;max-height:24rem;white-space:pre-wrap;word-break:break-word}
button{font:inherit;padding:.5rem 1.4rem;margin-right:.6rem;border-radius:.3rem;border:1px solid #888;cursor:pointer}
button.approve{background:#1e7d32;color:#fff;border-color:#1e7d32}
button.decline{background:#b3261e;color:#fff;border-color:#b3261e}
.note{color:#555}
.result{font-size:1.2rem;font-weight:600}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Exec}}
<p>{{if .Exec.Message}}{{.Exec.Message}}{{else}}An execution wants to call a tool that needs approval.{{end}}</p>
<dl>
<dt>Tool</dt><dd><code id="tool">{{.Exec.Tool}}</code>{{if .Exec.ApprovalText}} — <span id="approval-text">{{.Exec.ApprovalText}}</span>{{end}}</dd>
<dt>Arguments</dt><dd><pre id="arguments">{{.Args}}</pre></dd>
<dt>Requested by</dt><dd id="owner">{{.Exec.Owner.User}} ({{.Exec.Owner.Org}})</dd>
<dt>Decide by</dt><dd id="deadline">{{.Exec.Deadline.Format "2006-01-02 15:04:05 UTC"}} ({{until .Exec.Deadline .Now}}; then it is declined)</dd>
<dt>Execution</dt><dd><code>{{.Exec.ExecutionID}}</code></dd>
</dl>
{{if .CSRF}}<form method="post" action="/approve/{{.Exec.ExecutionID}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button class="approve" type="submit" name="action" value="accept">Approve</button>
<button class="decline" type="submit" name="action" value="decline">Decline</button>
</form>{{else}}<p class="note" id="view-only">{{.Detail}}</p>{{end}}
{{else if .Login}}
<p>Sign in with your mcpgrain token to see this execution.</p>
{{if .Detail}}<p class="note">{{.Detail}}</p>{{end}}
<form method="post" action="{{.LoginAction}}">
<label>Token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Sign in</button>
</form>
{{else}}
<p class="result" id="result">{{.Result}}</p>
{{if .Detail}}<p class="note">{{.Detail}}</p>{{end}}
{{end}}
<p class="note"><a id="inbox-link" href="/approvals">All executions waiting for approval</a></p>
</body>
</html>
`))

type pageData struct {
	Title string
	ID    string
	Exec  *ExecutionJSON
	Args  string
	Now   time.Time
	CSRF  string
	Login bool
	// LoginAction is where the sign-in form posts.
	LoginAction string
	Result      string
	Detail      string
}

func (p *page) render(w http.ResponseWriter, status int, d pageData) {
	// No scripts at all; no framing (the buttons must not be clickjacked);
	// forms only post back here; the URL may carry a token: no Referer.
	pageHeaders(w.Header(), "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, d); err != nil {
		p.o.Logger.Error("approvals: render page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// signInForm answers with the approval page's sign-in form for execution id.
func (p *page) signInForm(w http.ResponseWriter, status int, id, detail string) {
	p.render(w, status, pageData{Title: "Sign in", ID: id, Login: true, LoginAction: "/approve/" + url.PathEscape(id) + "/login", Detail: detail})
}

// pageHeaders are the headers of an HTML page with policy csp: never
// cached, never framed, no Referer, no sniffing.
func pageHeaders(h http.Header, csp string) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

func (p *page) message(w http.ResponseWriter, status int, title, result, detail string) {
	p.render(w, status, pageData{Title: title, Result: result, Detail: detail})
}

// principal authenticates a page request: the Authorization header, else
// the token cookie. ok=false with a nil error: no credentials were sent.
func (p *page) principal(r *http.Request) (*pb.Principal, bool, error) {
	if p.o.Auth.NoAuth() || r.Header.Get("Authorization") != "" {
		who, err := p.o.Auth.Authenticate(r)
		return who, err == nil, err
	}
	if c, err := r.Cookie(TokenCookie); err == nil && c.Value != "" {
		who, err := p.o.Auth.AuthenticateToken(r.Context(), r.RemoteAddr, c.Value)
		return who, err == nil, err
	}
	return nil, false, nil
}

// failedSignIns answers a request refused for too many failed sign-ins
// from its address (429 with Retry-After); it reports whether err was one.
func (p *page) failedSignIns(w http.ResponseWriter, err error) bool {
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Code != auth.CodeRateLimited {
		return false
	}
	w.Header().Set("Retry-After", auth.RetryAfterSeconds(ae.RetryAfter))
	p.message(w, http.StatusTooManyRequests, "Slow down", "Too many failed sign-ins from your address.",
		"Try again in "+auth.RetryAfterSeconds(ae.RetryAfter)+" seconds.")
	return true
}

func (p *page) limited(w http.ResponseWriter, who *pb.Principal) bool {
	if p.o.Limiter == nil {
		return false
	}
	if ok, retry := p.o.Limiter.Allow(who); !ok {
		w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
		p.message(w, http.StatusTooManyRequests, "Slow down", "Too many requests.", "Try again in a moment.")
		return true
	}
	return false
}

// cookiePaths are where the token cookie goes: the approval page and the
// inbox, nowhere else.
var cookiePaths = []string{"/approve/", "/approvals"}

func (p *page) setToken(w http.ResponseWriter, r *http.Request, token string) {
	for _, path := range cookiePaths {
		http.SetCookie(w, &http.Cookie{
			Name: TokenCookie, Value: token, Path: path, HttpOnly: true, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
			SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds()),
		})
	}
}

func (p *page) show(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("eid")
	if !validID(id) {
		p.message(w, http.StatusNotFound, "Not found", "There is no such execution.", "")
		return
	}
	// A link with ?token=… signs in: keep the token in a cookie and drop it
	// from the address bar and history. Not when another site sent the
	// browser here: that would sign the victim in as whoever's token the
	// link carries (login CSRF), and they would then see and decide that
	// principal's executions as if they were their own.
	if tok := r.URL.Query().Get("token"); tok != "" && !p.o.Auth.NoAuth() {
		if !sameOrigin(r) {
			p.signInForm(w, http.StatusForbidden, id, crossSiteSignIn)
			return
		}
		p.signIn(w, r, tok, "", p.approveTarget(id))
		return
	}
	who, ok := p.signedIn(w, r, p.approveTarget(id))
	if !ok {
		return
	}
	pe, err := p.svc.Get(r.Context(), who, "", id)
	if err != nil {
		if st, ok := p.svc.Settled(r.Context(), who, id); ok && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyDecided)) {
			p.message(w, http.StatusOK, "Already "+st.Outcome, st.Sentence(), "")
			return
		}
		p.failed(w, err)
		return
	}
	ej := ToJSON(pe)
	var args bytes.Buffer
	if json.Indent(&args, ej.Arguments, "", "  ") != nil {
		args.Reset()
		args.Write(ej.Arguments)
	}
	d := pageData{Title: "Approve " + ej.Tool + "?", ID: id, Exec: &ej, Args: args.String(), Now: p.svc.now()}
	if p.svc.MayDecide(who) {
		d.CSRF = p.csrf(who, id)
	} else {
		d.Detail = strings.TrimPrefix(p.svc.roleError(who).Error(), ErrInsufficientRole.Error()+": ") + "."
	}
	p.render(w, http.StatusOK, d)
}

func (p *page) failed(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		p.message(w, http.StatusNotFound, "Not found", "This execution is not waiting for approval.",
			"It may have been decided already, timed out, or belong to another organization.")
	case errors.Is(err, ErrAlreadyDecided):
		p.message(w, http.StatusConflict, "Already decided", "This execution was already decided (or timed out).", "")
	case errors.Is(err, ErrInvalid):
		p.message(w, http.StatusBadRequest, "Bad request", "The form was not understood.", "")
	case errors.Is(err, ErrInsufficientRole):
		p.message(w, http.StatusForbidden, "Not allowed", "You cannot decide this execution.",
			strings.TrimPrefix(err.Error(), ErrInsufficientRole.Error()+": ")+".")
	default:
		p.o.Logger.Warn("approvals: page request failed", "err", err)
		p.message(w, http.StatusServiceUnavailable, "Try again", "The execution's session could not be reached.",
			"Reload this page before deciding again: a decision may have been recorded.")
	}
}

// csrf is the page form's token: a MAC of the principal and execution, so
// a form is only valid for the one who was shown it.
func (p *page) csrf(who *pb.Principal, id string) string {
	m := hmac.New(sha256.New, p.o.PageKey)
	m.Write([]byte("mcpgrain approve form\x00" + who.GetOrg() + "\x00" + who.GetUser() + "\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sameOrigin refuses cross-site form posts (with the CSRF token this is
// defence in depth; with --no-auth it is the main guard) and cross-site
// sign-in links. Sec-Fetch-Site "none" is a navigation the user started
// (address bar, bookmark, another application). A request with neither
// header (a browser older than Sec-Fetch-Site, a script) is let through:
// nothing tells it apart.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return false
		}
	}
	return true
}

func (p *page) form(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		p.message(w, http.StatusBadRequest, "Bad request", "The form was not understood.", "")
		return nil, false
	}
	if !sameOrigin(r) {
		p.message(w, http.StatusForbidden, "Forbidden", "Cross-site form posts are refused.", "")
		return nil, false
	}
	return r.PostForm, true
}

func (p *page) decide(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("eid")
	d, ok := p.decideForm(w, r, id, p.approveTarget(id), "page")
	if !ok {
		return
	}
	title, result := "Accepted", "You ("+d.By+") accepted it: the tool call runs."
	if d.Status != StatusAccepted {
		title, result = "Declined", "You ("+d.By+") declined it: the tool call fails (reason: "+declineReasons["page"]+")."
	}
	p.message(w, http.StatusOK, title, result, "You can close this page; the execution continues.")
}

// decideForm takes a decision form posted to a page (where: "page" or
// "inbox", named in the reason of a decline and in the hint of an expired
// form): a same-origin form from the signed-in principal, whose CSRF
// token was issued to that principal for execution id. It answers the
// request itself when the form or the decision fails.
func (p *page) decideForm(w http.ResponseWriter, r *http.Request, id string, signIn target, where string) (Decision, bool) {
	form, ok := p.form(w, r)
	if !ok {
		return Decision{}, false
	}
	who, ok := p.signedIn(w, r, signIn)
	if !ok {
		return Decision{}, false
	}
	if !hmac.Equal([]byte(form.Get("csrf")), []byte(p.csrf(who, id))) {
		p.message(w, http.StatusForbidden, "Forbidden", "This form has expired or was not issued to you.", "Reload the "+where+" and decide again.")
		return Decision{}, false
	}
	action := form.Get("action")
	if action != "accept" && action != "decline" {
		p.message(w, http.StatusBadRequest, "Bad request", "Choose Approve or Decline.", "")
		return Decision{}, false
	}
	var content map[string]any
	if action == "decline" {
		content = map[string]any{"reason": declineReasons[where]}
	}
	d, err := p.svc.Decide(r.Context(), who, "", id, action, content)
	if err != nil {
		p.failed(w, err)
		return Decision{}, false
	}
	return d, true
}

// declineReasons are the reasons a decline from each page records.
var declineReasons = map[string]string{"page": "declined in the approval page", "inbox": "declined in the approvals inbox"}

func (p *page) login(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("eid")
	form, ok := p.form(w, r)
	if !ok {
		return
	}
	p.signIn(w, r, strings.TrimSpace(form.Get("token")), "That token is not valid.", p.approveTarget(id))
}

// crossSiteSignIn explains a refused ?token= link.
const crossSiteSignIn = "A sign-in link opened from another site is refused. Sign in here, or open the link from the address bar."

// target is a page that signs in: where to go after, and its sign-in form.
type target struct {
	path string
	form func(w http.ResponseWriter, status int, detail string)
}

// approveTarget is the approval page of execution id.
func (p *page) approveTarget(id string) target {
	return target{path: "/approve/" + url.PathEscape(id), form: func(w http.ResponseWriter, status int, detail string) {
		p.signInForm(w, status, id, detail)
	}}
}

// signIn keeps a valid token in the pages' cookies and redirects to
// t.path, without the token in the address; an invalid one gets t's
// sign-in form (with detail).
func (p *page) signIn(w http.ResponseWriter, r *http.Request, token, detail string, t target) {
	if _, err := p.o.Auth.AuthenticateToken(r.Context(), r.RemoteAddr, token); err != nil {
		if p.failedSignIns(w, err) {
			return
		}
		t.form(w, http.StatusUnauthorized, detail)
		return
	}
	p.setToken(w, r, token)
	http.Redirect(w, r, t.path, http.StatusSeeOther)
}

// signedIn returns the caller of a page request, or answers with t's
// sign-in form (no credentials) or 429 (rate limited) itself.
func (p *page) signedIn(w http.ResponseWriter, r *http.Request, t target) (*pb.Principal, bool) {
	who, ok, err := p.principal(r)
	if !ok {
		if p.failedSignIns(w, err) {
			return nil, false
		}
		t.form(w, http.StatusUnauthorized, "")
		return nil, false
	}
	if p.limited(w, who) {
		return nil, false
	}
	return who, true
}
