package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// TestIntrospector: opaque tokens are checked at the introspection
// endpoint (authenticated with the client's credentials), active answers
// are cached, and an answer for another audience, another issuer, a
// refresh token or an inactive token is refused.
func TestIntrospector(t *testing.T) {
	clock := newManualClock()
	exp := float64(clock.Now().Add(time.Hour).Unix())
	answers := map[string]map[string]any{
		"good":       {"active": true, "scope": "mcp:approve openid", "sub": "bob", "aud": []string{testResource}, "exp": exp, "iss": "https://as.example", "ext": map[string]any{"org": "acme"}},
		"inactive":   {"active": false},
		"other-aud":  {"active": true, "scope": "mcp:read", "sub": "bob", "aud": "https://other.example", "exp": exp},
		"other-iss":  {"active": true, "scope": "mcp:read", "sub": "bob", "aud": testResource, "exp": exp, "iss": "https://evil.example"},
		"refresh":    {"active": true, "scope": "mcp:read", "sub": "bob", "aud": testResource, "exp": exp, "token_use": "refresh_token"},
		"no-exp":     {"active": true, "scope": "mcp:read", "sub": "bob", "aud": testResource},
		"short-life": {"active": true, "scope": "mcp:read", "sub": "bob", "aud": testResource, "exp": float64(clock.Now().Add(time.Minute).Unix())},
	}
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if id, secret, ok := r.BasicAuth(); !ok || id != "mcpgrain" || secret != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.PostFormValue("token_type_hint") != "access_token" {
			http.Error(w, "bad hint", http.StatusBadRequest)
			return
		}
		ans, ok := answers[r.PostFormValue("token")]
		if !ok {
			ans = map[string]any{"active": false}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ans)
	}))
	t.Cleanup(srv.Close)
	in, err := NewIntrospector(IntrospectionOptions{URL: srv.URL, ClientID: "mcpgrain", ClientSecret: "s3cret", Audience: testResource,
		Issuers: []string{"https://as.example"}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Verify(t.Context(), "good", nil)
	if err != nil || info.UserID != "bob" || strings.Join(info.Scopes, " ") != "mcp:approve openid" {
		t.Fatalf("good: %+v %v", info, err)
	}
	p, err := ClaimMapping{OrgClaim: "ext.org"}.Principal(info)
	if err != nil || p.GetOrg() != "acme" || p.GetRole() != RoleMember {
		t.Fatalf("principal: %v %v", p, err)
	}
	for range 5 {
		if _, err := in.Verify(t.Context(), "good", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d introspection calls for six uses of one token, want 1 (cached)", n)
	}
	for tok, want := range map[string]string{
		"inactive": "not active", "other-aud": "not issued for this resource", "other-iss": "issuer is not trusted",
		"refresh": "not an access token", "no-exp": "no exp", "never-issued": "not active",
	} {
		if _, err := in.Verify(t.Context(), tok, nil); !errors.Is(err, sdkauth.ErrInvalidToken) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", tok, err, want)
		}
	}
	// A cached answer is not used past the token's expiry.
	if _, err := in.Verify(t.Context(), "short-life", nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	if _, err := in.Verify(t.Context(), "short-life", nil); !errors.Is(err, sdkauth.ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("short-lived token after its exp: %v", err)
	}

	// Wrong client credentials: the server refuses; that is not the
	// token's fault.
	bad, _ := NewIntrospector(IntrospectionOptions{URL: srv.URL, ClientID: "mcpgrain", ClientSecret: "wrong", Audience: testResource})
	if _, err := bad.Verify(t.Context(), "good", nil); err == nil || errors.Is(err, sdkauth.ErrInvalidToken) {
		t.Fatalf("introspection refused: %v, want an error that is not invalid token", err)
	}
}

// TestOAuthRoutesTokensByShape: with both verifiers, JWTs are verified
// locally and anything else is introspected.
func TestOAuthRoutesTokensByShape(t *testing.T) {
	is := newTestIssuer(t)
	var introspected atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		introspected.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "scope": "mcp:read", "sub": "opaque-user", "org": "acme", "aud": testResource, "exp": float64(time.Now().Add(time.Hour).Unix())})
	}))
	t.Cleanup(srv.Close)
	in, err := NewIntrospector(IntrospectionOptions{URL: srv.URL, Audience: testResource})
	if err != nil {
		t.Fatal(err)
	}
	oa, err := NewOAuth(OAuthOptions{Resource: testResource, AuthorizationServers: []string{is.URL()}, JWT: newTestVerifier(t, is, newManualClock(), nil), Introspection: in})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := oa.Verify(t.Context(), is.sign(claims{}, nil)); err != nil || p.GetUser() != "alice" || introspected.Load() != 0 {
		t.Fatalf("JWT: %v %v (introspected %d)", p, err, introspected.Load())
	}
	if p, err := oa.Verify(t.Context(), "ory_at_opaque"); err != nil || p.GetUser() != "opaque-user" || p.GetRole() != RoleViewer || introspected.Load() != 1 {
		t.Fatalf("opaque: %v %v (introspected %d)", p, err, introspected.Load())
	}
}
