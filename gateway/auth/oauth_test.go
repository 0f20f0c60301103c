package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// newOAuthAuthenticator is an Authenticator with one static key (alice,
// acme, admin) and OAuth against is.
func newOAuthAuthenticator(t testing.TB, is *testIssuer, clock *manualClock, failures *FailureLimiter) *Authenticator {
	t.Helper()
	keys, err := NewKeys(Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	oa, err := NewOAuth(OAuthOptions{
		Resource:             testResource,
		AuthorizationServers: []string{is.URL()},
		JWT:                  newTestVerifier(t, is, clock, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	return NewAuthenticator(keys, AuthOptions{Realm: "mcpgrain", OAuth: oa, Failures: failures})
}

// TestAuthenticateOAuth: with OAuth, static keys still work, access tokens
// map to principals, and every refusal carries the challenge the MCP
// authorization spec asks for (resource_metadata always; scope when there
// are no credentials or too few; the RFC 6750 error code and why).
func TestAuthenticateOAuth(t *testing.T) {
	is := newTestIssuer(t)
	clock := newManualClock()
	a := newOAuthAuthenticator(t, is, clock, nil)
	const meta = `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	tests := []struct {
		name       string
		header     string
		want       *pb.Principal
		wantStatus int
		wantWWW    string
	}{
		{name: "static key first", header: "Bearer " + tokAlice, want: &pb.Principal{User: "alice", Org: "acme", Role: RoleAdmin}},
		{name: "access token", header: "Bearer " + is.sign(claims{sub: "bob"}, nil), want: &pb.Principal{User: "bob", Org: "acme", Role: RoleMember}},
		{
			name: "no credentials", wantStatus: 401,
			wantWWW: `Bearer realm="mcpgrain", ` + meta + `, scope="mcp:read"`,
		},
		{
			name: "expired", header: "Bearer " + is.sign(claims{iat: clock.Now().Add(-2 * time.Hour), exp: clock.Now().Add(-time.Hour)}, nil), wantStatus: 401,
			wantWWW: `Bearer realm="mcpgrain", ` + meta + `, error="invalid_token", error_description="access token expired"`,
		},
		{
			name: "other audience", header: "Bearer " + is.sign(claims{aud: []string{"https://other.example/mcp"}}, nil), wantStatus: 401,
			wantWWW: `Bearer realm="mcpgrain", ` + meta + `, error="invalid_token", error_description="access token not issued for this resource (aud must name https://mcp.example.com/mcp)"`,
		},
		{
			name: "no role scope", header: "Bearer " + is.sign(claims{extra: map[string]any{"scp": []string{"openid"}}}, nil), wantStatus: 403,
			wantWWW: `Bearer realm="mcpgrain", ` + meta + `, scope="mcp:read", error="insufficient_scope", error_description="the token grants no role: it needs scope mcp:read (or mcp:approve, mcp:admin)"`,
		},
		{
			name: "unknown opaque token", header: "Bearer " + tokCarol, wantStatus: 401,
			wantWWW: `Bearer realm="mcpgrain", ` + meta + `, error="invalid_token", error_description="access token not a JWT signed with an accepted algorithm"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			got, err := a.Authenticate(r)
			if tt.want != nil {
				if err != nil || !samePrincipal(got, tt.want) {
					t.Fatalf("Authenticate = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != tt.wantStatus || ae.WWWAuthenticate != tt.wantWWW {
				t.Fatalf("Authenticate = %v %+v\nwant %d %s", got, ae, tt.wantStatus, tt.wantWWW)
			}
			if strings.Contains(ae.WWWAuthenticate, strings.TrimPrefix(tt.header, "Bearer ")) && tt.header != "" {
				t.Fatal("the challenge carries the token")
			}
		})
	}

	// A role too low for what was asked: the challenge names the scope.
	if got := a.InsufficientRole(RoleMember, "viewers may not decide"); got != `Bearer realm="mcpgrain", `+meta+`, scope="mcp:approve", error="insufficient_scope", error_description="viewers may not decide"` {
		t.Fatalf("InsufficientRole = %s", got)
	}
	if got := NewAuthenticator(nil, AuthOptions{}).InsufficientRole(RoleMember, "x"); got != "" {
		t.Fatalf("InsufficientRole without OAuth = %q, want none (keys have no scopes)", got)
	}
}

// TestAuthenticateOAuthUnavailable: an authorization server that cannot
// be reached is a 503 (retry), not a 401, and not a failed sign-in; the
// outage is logged, not once per request.
func TestAuthenticateOAuthUnavailable(t *testing.T) {
	is := newTestIssuer(t)
	is.down.Store(true)
	failures := NewFailureLimiter(FailureLimiterOptions{Burst: 1})
	var logs bytes.Buffer
	oa, err := NewOAuth(OAuthOptions{Resource: testResource, AuthorizationServers: []string{is.URL()},
		JWT: newTestVerifier(t, is, newManualClock(), nil), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuthenticator(nil, AuthOptions{OAuth: oa, Failures: failures})
	for range 3 {
		_, err := a.AuthenticateToken(t.Context(), "192.0.2.7:1", is.sign(claims{}, nil))
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != CodeTemporarilyUnavailable || !errors.Is(err, errKeysUnavailable) {
			t.Fatalf("server down: %#v (%v)", ae, err)
		}
	}
	if _, blocked := failures.Blocked(ClientKey("192.0.2.7:1")); blocked {
		t.Fatal("tokens that could not be checked counted as failed sign-ins")
	}
	if n := strings.Count(logs.String(), "could not be reached"); n != 1 {
		t.Fatalf("%d log lines for three refusals in a row, want 1:\n%s", n, logs.String())
	}
}

// TestAuthenticateOAuthCountsInvalidTokens: forged access tokens are failed
// sign-ins like unknown keys.
func TestAuthenticateOAuthCountsInvalidTokens(t *testing.T) {
	is := newTestIssuer(t)
	failures := NewFailureLimiter(FailureLimiterOptions{Burst: 2})
	a := newOAuthAuthenticator(t, is, newManualClock(), failures)
	bad := is.sign(claims{aud: []string{"https://elsewhere"}}, nil)
	for range 2 {
		if _, err := a.AuthenticateToken(t.Context(), "192.0.2.8:1", bad); err == nil {
			t.Fatal("accepted")
		}
	}
	_, err := a.AuthenticateToken(t.Context(), "192.0.2.8:1", is.sign(claims{}, nil))
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeRateLimited {
		t.Fatalf("after two forged tokens: %v, want rate limited", err)
	}
}

// TestProtectedResourceMetadata: the document names the resource, its
// authorization server and scopes, at the path-suffixed well-known URL
// (and the root one), with CORS for browser clients.
func TestProtectedResourceMetadata(t *testing.T) {
	is := newTestIssuer(t)
	a := newOAuthAuthenticator(t, is, newManualClock(), nil)
	paths, h := a.ProtectedResource()
	if strings.Join(paths, " ") != "/.well-known/oauth-protected-resource/mcp /.well-known/oauth-protected-resource" {
		t.Fatalf("paths %v", paths)
	}
	for _, p := range paths {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		var meta oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal(rec.Body.Bytes(), &meta); err != nil || rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", p, rec.Code, rec.Body)
		}
		if meta.Resource != testResource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != is.URL() ||
			strings.Join(meta.ScopesSupported, " ") != "mcp:read mcp:approve mcp:admin" || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("GET %s: %+v %v", p, meta, rec.Header())
		}
	}
	root, err := NewOAuth(OAuthOptions{Resource: "https://mcp.example.com", AuthorizationServers: []string{is.URL()}, JWT: newTestVerifier(t, is, newManualClock(), nil)})
	if err != nil {
		t.Fatal(err)
	}
	if p := root.MetadataPaths(); len(p) != 1 || p[0] != "/.well-known/oauth-protected-resource" || root.MetadataURL() != "https://mcp.example.com/.well-known/oauth-protected-resource" {
		t.Fatalf("resource at the root: %v %s", p, root.MetadataURL())
	}
	if paths, h := NewAuthenticator(nil, AuthOptions{}).ProtectedResource(); paths != nil || h != nil {
		t.Fatal("metadata served without OAuth")
	}
}

func TestNewOAuthValidates(t *testing.T) {
	is := newTestIssuer(t)
	v := newTestVerifier(t, is, newManualClock(), nil)
	for name, o := range map[string]OAuthOptions{
		"no resource":       {AuthorizationServers: []string{is.URL()}, JWT: v},
		"resource fragment": {Resource: "https://x.example/mcp#a", AuthorizationServers: []string{is.URL()}, JWT: v},
		"relative resource": {Resource: "/mcp", AuthorizationServers: []string{is.URL()}, JWT: v},
		"no server":         {Resource: testResource, JWT: v},
		"no verifier":       {Resource: testResource, AuthorizationServers: []string{is.URL()}},
	} {
		if _, err := NewOAuth(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
