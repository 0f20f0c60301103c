package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The principal [AuthOptions.NoAuth] authenticates every request as.
const (
	// AnonymousUser is the anonymous principal's user.
	AnonymousUser = "anonymous"
	// AnonymousOrg is the anonymous principal's organization.
	AnonymousOrg = "local"
	// AnonymousRole is the anonymous principal's role.
	AnonymousRole = RoleAdmin
)

// Anonymous returns a new copy of the fixed principal [AuthOptions.NoAuth]
// authenticates every request as: user "anonymous", org "local", role
// "admin".
func Anonymous() *pb.Principal {
	return &pb.Principal{User: AnonymousUser, Org: AnonymousOrg, Role: AnonymousRole}
}

// Error codes, as found in [Error.Code].
const (
	// CodeInvalidRequest: the Authorization header is malformed (400;
	// RFC 6750).
	CodeInvalidRequest = "invalid_request"
	// CodeInvalidToken: the bearer token is not a known one (401; RFC
	// 6750).
	CodeInvalidToken = "invalid_token"
	// CodeRateLimited: too many failed sign-ins from the client's address
	// (429; see [Error.RetryAfter]).
	CodeRateLimited = "rate_limited"
	// CodeInsufficientScope: a valid access token that grants no role, or
	// not the role the request needs (403; RFC 6750). The challenge names
	// the scope that would.
	CodeInsufficientScope = "insufficient_scope"
	// CodeTemporarilyUnavailable: the authorization server could not be
	// reached to verify an access token (503); the token may be fine.
	CodeTemporarilyUnavailable = "temporarily_unavailable"
)

// AuthOptions configure an [Authenticator].
type AuthOptions struct {
	// NoAuth accepts every request, whatever its headers, as the fixed
	// [Anonymous] principal (user "anonymous", org "local", role "admin").
	// It is only for loopback experiments: the app refuses it unless the
	// HTTP listener is loopback (that check lives in the app, not here).
	NoAuth bool
	// Realm, if set, is sent as the realm parameter of WWW-Authenticate.
	Realm string
	// ResourceMetadataURL, if set, is sent as the resource_metadata
	// parameter of WWW-Authenticate (RFC 9728 OAuth protected resource
	// metadata, which MCP clients use to discover the authorization server).
	// Default with OAuth: [OAuth.MetadataURL].
	ResourceMetadataURL string
	// OAuth, if set, verifies bearer tokens that are not static keys as
	// OAuth access tokens (JWTs, or opaque tokens by introspection) and
	// maps them to principals. Keys are tried first. With OAuth, every
	// challenge also names the scope a request needs.
	OAuth *OAuth
	// Failures, if set, limits failed sign-ins per client address: an
	// address out of failures gets [CodeRateLimited] for every attempt
	// that carries credentials until it has one again.
	Failures *FailureLimiter
}

// Authenticator turns an HTTP request into a principal by its bearer token.
// It is safe for concurrent use.
type Authenticator struct {
	keys     *Keys
	noAuth   bool
	oauth    *OAuth
	failures *FailureLimiter
	// params are the challenge's fixed auth-params (realm,
	// resource_metadata), already formatted.
	params []string
}

// NewAuthenticator returns an Authenticator that accepts the tokens in keys
// (nil accepts none, unless opts.NoAuth).
func NewAuthenticator(keys *Keys, opts AuthOptions) *Authenticator {
	a := &Authenticator{keys: keys, noAuth: opts.NoAuth, oauth: opts.OAuth, failures: opts.Failures}
	if opts.Realm != "" {
		a.params = append(a.params, "realm="+quote(opts.Realm))
	}
	if opts.ResourceMetadataURL == "" && opts.OAuth != nil {
		opts.ResourceMetadataURL = opts.OAuth.MetadataURL()
	}
	if opts.ResourceMetadataURL != "" {
		a.params = append(a.params, "resource_metadata="+quote(opts.ResourceMetadataURL))
	}
	return a
}

// Authenticate reads the request's "Authorization: Bearer <token>" header
// (scheme case-insensitive, exactly one Authorization header, non-empty
// token) and returns the principal the token authenticates. On failure the
// error is an *[Error]:
//
//   - no Authorization header, an empty one, or a scheme other than Bearer:
//     401, WWW-Authenticate without an error code (RFC 6750 §3.1: the client
//     sent no bearer credentials);
//   - more than one Authorization header, an empty bearer token, or one that
//     is not b64token syntax: 400, error="invalid_request";
//   - a well-formed token that is not configured: 401, error="invalid_token";
//   - with [AuthOptions.OAuth], an access token that is not valid here
//     (expired, for another audience, badly signed...): 401,
//     error="invalid_token" with why; one that grants no role: 403,
//     error="insufficient_scope"; authorization server unreachable: 503;
//   - with [AuthOptions.Failures], credentials from an address out of
//     failed sign-ins: 429, [CodeRateLimited], with [Error.RetryAfter].
//
// With [AuthOptions.NoAuth] it returns [Anonymous] for every request.
func (a *Authenticator) Authenticate(r *http.Request) (*pb.Principal, error) {
	return a.AuthenticateHeader(r.Context(), r.RemoteAddr, r.Header.Values("Authorization"))
}

// AuthenticateHeader is [Authenticator.Authenticate] for the values of an
// Authorization header (or of gRPC "authorization" metadata) sent from
// remoteAddr (the connection's "host:port"; "" is not limited). ctx bounds
// a wait for the authorization server (OAuth).
func (a *Authenticator) AuthenticateHeader(ctx context.Context, remoteAddr string, vals []string) (*pb.Principal, error) {
	if a.noAuth {
		return Anonymous(), nil
	}
	if len(vals) == 0 {
		return nil, a.fail(http.StatusUnauthorized, "", "missing bearer token")
	}
	client, err := a.admit(remoteAddr)
	if err != nil {
		return nil, err
	}
	p, err := a.header(ctx, vals)
	if err != nil {
		a.failed(client, err)
	}
	return p, err
}

// header checks the values of an Authorization header.
func (a *Authenticator) header(ctx context.Context, vals []string) (*pb.Principal, error) {
	if len(vals) > 1 {
		return nil, a.fail(http.StatusBadRequest, CodeInvalidRequest, "more than one Authorization header")
	}
	h := strings.Trim(vals[0], " \t")
	if h == "" {
		return nil, a.fail(http.StatusUnauthorized, "", "missing bearer token")
	}
	scheme, token := h, ""
	if i := strings.IndexAny(h, " \t"); i >= 0 {
		scheme, token = h[:i], strings.TrimLeft(h[i:], " \t")
	}
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, a.fail(http.StatusUnauthorized, "", "unsupported authorization scheme; use Bearer")
	}
	return a.token(ctx, token)
}

// AuthenticateToken returns the principal a bare bearer token (e.g. from
// the approval page's cookie or sign-in form) sent from remoteAddr
// authenticates, with Authenticate's errors.
func (a *Authenticator) AuthenticateToken(ctx context.Context, remoteAddr, token string) (*pb.Principal, error) {
	if a.noAuth {
		return Anonymous(), nil
	}
	client, err := a.admit(remoteAddr)
	if err != nil {
		return nil, err
	}
	p, err := a.token(ctx, token)
	if err != nil {
		a.failed(client, err)
	}
	return p, err
}

// admit refuses a client address that is out of failed sign-ins; it
// returns the address's key ("" when not limited).
func (a *Authenticator) admit(remoteAddr string) (string, error) {
	if a.failures == nil || remoteAddr == "" {
		return "", nil
	}
	client := ClientKey(remoteAddr)
	if retry, blocked := a.failures.Blocked(client); blocked {
		return "", &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: retry,
			Message: "too many failed sign-ins from this address; retry later"}
	}
	return client, nil
}

// failed counts a failed sign-in of client: credentials that were sent
// and refused as malformed or invalid (not a request that carried none,
// nor a valid token that lacks a scope or could not be checked).
func (a *Authenticator) failed(client string, err error) {
	var ae *Error
	if client == "" || !errors.As(err, &ae) || (ae.Code != CodeInvalidToken && ae.Code != CodeInvalidRequest) {
		return
	}
	a.failures.Failed(client)
}

// token checks a bare bearer token: a static key, else (with OAuth) an
// access token.
func (a *Authenticator) token(ctx context.Context, token string) (*pb.Principal, error) {
	switch {
	case token == "":
		return nil, a.fail(http.StatusBadRequest, CodeInvalidRequest, "empty bearer token")
	case !isBearerToken(token):
		return nil, a.fail(http.StatusBadRequest, CodeInvalidRequest, "malformed bearer token")
	}
	if p, ok := a.keys.Lookup(token); ok {
		return p, nil
	}
	if a.oauth == nil {
		return nil, a.fail(http.StatusUnauthorized, CodeInvalidToken, "unknown bearer token")
	}
	p, err := a.oauth.Verify(ctx, token)
	if err != nil {
		var ae *Error
		if !errors.As(err, &ae) {
			return nil, a.fail(http.StatusUnauthorized, CodeInvalidToken, "access token not valid")
		}
		switch ae.Code {
		case CodeInsufficientScope:
			ae.WWWAuthenticate = a.challenge(CodeInsufficientScope, ae.Message, a.oauth.Scopes().For(RoleViewer))
		case CodeInvalidToken:
			ae.WWWAuthenticate = a.challenge(CodeInvalidToken, ae.Message, "")
		}
		return nil, ae
	}
	return p, nil
}

// InsufficientRole returns the WWW-Authenticate challenge for a
// principal whose role is below role (RFC 6750 insufficient_scope, naming
// the scope that grants role), or "" without OAuth (static keys have no
// scopes to ask for).
func (a *Authenticator) InsufficientRole(role, msg string) string {
	if a.oauth == nil {
		return ""
	}
	return a.challenge(CodeInsufficientScope, msg, a.oauth.Scopes().For(role))
}

// ProtectedResource returns the paths and handler of the OAuth protected
// resource metadata (RFC 9728) to serve, unauthenticated; none without
// OAuth.
func (a *Authenticator) ProtectedResource() ([]string, http.Handler) {
	if a.oauth == nil {
		return nil, nil
	}
	return a.oauth.MetadataPaths(), a.oauth.MetadataHandler()
}

// NoAuth reports whether every request is the anonymous principal.
func (a *Authenticator) NoAuth() bool { return a.noAuth }

func (a *Authenticator) fail(status int, code, msg string) *Error {
	scope := ""
	if code == "" && a.oauth != nil {
		scope = a.oauth.Scopes().For(RoleViewer) // no credentials: say what to ask for
	}
	return &Error{Status: status, WWWAuthenticate: a.challenge(code, msg, scope), Code: code, Message: msg}
}

// challenge formats a Bearer challenge: the fixed params, then scope (if
// set), then the error code and description (if code is set).
func (a *Authenticator) challenge(code, msg, scope string) string {
	params := a.params[:len(a.params):len(a.params)]
	if scope != "" {
		params = append(params, "scope="+quote(scope))
	}
	if code != "" {
		params = append(params, "error="+quote(code), "error_description="+quote(msg))
	}
	challenge := "Bearer"
	if len(params) > 0 {
		challenge += " " + strings.Join(params, ", ")
	}
	return challenge
}

// Error is an authentication failure, ready to be written as a response:
// set the WWW-Authenticate header to WWWAuthenticate and answer Status with
// Message as the body's explanation.
type Error struct {
	// Status is the HTTP status: 401 (no or unknown credentials), 400
	// (malformed Authorization header), 403 (insufficient_scope), 429
	// (rate_limited) or 503 (temporarily_unavailable).
	Status int
	// WWWAuthenticate is the WWW-Authenticate header value (RFC 6750 §3),
	// e.g. `Bearer realm="mcpgrain", error="invalid_token",
	// error_description="unknown bearer token"`. It has no error code when
	// the request carried no bearer credentials.
	WWWAuthenticate string
	// Code is the error code ([CodeInvalidRequest], [CodeInvalidToken],
	// [CodeInsufficientScope], [CodeRateLimited],
	// [CodeTemporarilyUnavailable]), or empty when the request carried no
	// bearer credentials.
	Code string
	// Message is a short explanation, safe to show the client: it never
	// contains the token.
	Message string
	// RetryAfter, for [CodeRateLimited], is how long until the client's
	// address may try again (answer it as a Retry-After header).
	RetryAfter time.Duration
	// cause is what went wrong underneath (for logs; never sent).
	cause error
}

// Error returns "auth: " followed by the message.
func (e *Error) Error() string { return "auth: " + e.Message }

// Unwrap returns the underlying failure, if any (an authorization server
// that could not be reached).
func (e *Error) Unwrap() error { return e.cause }

// quote returns s as an HTTP quoted-string, dropping control characters.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c == 0x7f:
			continue
		case c == '"' || c == '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
