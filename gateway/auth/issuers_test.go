package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// TestPrincipalsAreKeyedByIssuer (issue 23, finding 8): an access token
// whose sub and org equal a static key's user and org was that key's
// principal, whichever trusted issuer signed it, so a second authorization
// server could sign in as any user of any organization of the first (or of
// the keys). Now only a local issuer names principals in the keys'
// namespace — by default the only issuer of a single-issuer deployment,
// which keeps working as before — and every other issuer's principals are
// qualified by the issuer. Two real issuers over HTTP, one static key.
func TestPrincipalsAreKeyedByIssuer(t *testing.T) {
	a, b := newTestIssuer(t), newTestIssuer(t)
	clock := newManualClock()
	keys, err := NewKeys(Entry{Token: tokAlice, User: "alice", Org: "acme", Role: RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	authn := func(t *testing.T, trusted []*testIssuer, local []string) *Authenticator {
		t.Helper()
		var urls []string
		for _, is := range trusted {
			urls = append(urls, is.URL())
		}
		v := newTestVerifier(t, trusted[0], clock, func(o *JWTOptions) { o.Issuers = urls })
		oa, err := NewOAuth(OAuthOptions{Resource: testResource, AuthorizationServers: urls, JWT: v, LocalIssuers: local})
		if err != nil {
			t.Fatal(err)
		}
		return NewAuthenticator(keys, AuthOptions{Realm: "mcpgrain", OAuth: oa})
	}
	alice := &pb.Principal{User: "alice", Org: "acme", Role: RoleMember}
	qualified := func(is *testIssuer, user, org string) *pb.Principal {
		return &pb.Principal{User: is.URL() + "#" + user, Org: is.URL() + "#" + org, Role: RoleMember}
	}
	asAlice := claims{sub: "alice"} // org acme, mcp:approve
	for _, tc := range []struct {
		name    string
		trusted []*testIssuer
		local   []string
		token   string
		want    *pb.Principal // nil: refused with 401
	}{
		{"one issuer: its names are the keys' names (as before)", []*testIssuer{a}, nil, a.sign(asAlice, nil), alice},
		{"two issuers, none local: A's alice is A's", []*testIssuer{a, b}, nil, a.sign(asAlice, nil), qualified(a, "alice", "acme")},
		{"two issuers, none local: B's alice is B's", []*testIssuer{a, b}, nil, b.sign(asAlice, nil), qualified(b, "alice", "acme")},
		{"A local: A's alice is the key's alice", []*testIssuer{a, b}, []string{a.URL()}, a.sign(asAlice, nil), alice},
		{"A local: B's alice is B's", []*testIssuer{a, b}, []string{a.URL()}, b.sign(asAlice, nil), qualified(b, "alice", "acme")},
		{"A local: B naming A's qualified user stays B's", []*testIssuer{a, b}, []string{a.URL()},
			b.sign(claims{sub: a.URL() + "#alice", extra: map[string]any{"org": a.URL() + "#acme"}}, nil),
			qualified(b, a.URL()+"#alice", a.URL()+"#acme")},
		{"A local: A naming B's qualified user is refused", []*testIssuer{a, b}, []string{a.URL()},
			a.sign(claims{sub: b.URL() + "#alice"}, nil), nil},
		{"A local: A naming B's qualified org is refused", []*testIssuer{a, b}, []string{a.URL()},
			a.sign(claims{extra: map[string]any{"org": b.URL() + "#acme"}}, nil), nil},
		{"both local (an explicit choice): the same namespace", []*testIssuer{a, b}, []string{a.URL(), b.URL()}, b.sign(asAlice, nil), alice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			p, err := authn(t, tc.trusted, tc.local).Authenticate(r)
			if tc.want == nil {
				var ae *Error
				if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != CodeInvalidToken {
					t.Fatalf("got %v %v, want 401 invalid_token", p, err)
				}
				return
			}
			if err != nil || p.GetUser() != tc.want.GetUser() || p.GetOrg() != tc.want.GetOrg() || p.GetRole() != tc.want.GetRole() {
				t.Fatalf("got %v %v, want %v", p, err, tc.want)
			}
		})
	}
	// The static key is alice in acme whatever the issuers.
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tokAlice)
	if p, err := authn(t, []*testIssuer{a, b}, nil).Authenticate(r); err != nil || p.GetUser() != "alice" || p.GetOrg() != "acme" {
		t.Fatalf("static key: %v %v", p, err)
	}
	if _, err := NewOAuth(OAuthOptions{Resource: testResource, AuthorizationServers: []string{a.URL()}, LocalIssuers: []string{b.URL()},
		JWT: newTestVerifier(t, a, clock, nil)}); err == nil {
		t.Fatal("a local issuer that is not trusted was accepted")
	}
}

// An introspected token is keyed by the iss of the answer; an answer
// without one belongs to the only issuer, and is refused when there are
// several (its principal could not be keyed).
func TestIntrospectedPrincipalsAreKeyedByIssuer(t *testing.T) {
	clock := newManualClock()
	exp := float64(clock.Now().Add(time.Hour).Unix())
	const asA, asB = "https://a.example", "https://b.example"
	answers := map[string]map[string]any{
		"from-b": {"active": true, "scope": "mcp:read", "sub": "alice", "org": "acme", "aud": testResource, "exp": exp, "iss": asB},
		"no-iss": {"active": true, "scope": "mcp:read", "sub": "alice", "org": "acme", "aud": testResource, "exp": exp},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answers[r.PostFormValue("token")])
	}))
	t.Cleanup(srv.Close)
	verify := func(t *testing.T, trusted []string, token string) (*pb.Principal, error) {
		t.Helper()
		in, err := NewIntrospector(IntrospectionOptions{URL: srv.URL, Audience: testResource, Issuers: trusted, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		oa, err := NewOAuth(OAuthOptions{Resource: testResource, AuthorizationServers: trusted, Introspection: in})
		if err != nil {
			t.Fatal(err)
		}
		return oa.Verify(t.Context(), token)
	}
	if p, err := verify(t, []string{asA}, "no-iss"); err != nil || p.GetUser() != "alice" || p.GetOrg() != "acme" {
		t.Fatalf("one issuer, no iss: %v %v, want the local alice", p, err)
	}
	if p, err := verify(t, []string{asA, asB}, "from-b"); err != nil || p.GetUser() != asB+"#alice" || p.GetOrg() != asB+"#acme" {
		t.Fatalf("two issuers, B's token: %v %v, want B's alice", p, err)
	}
	var ae *Error
	if p, err := verify(t, []string{asA, asB}, "no-iss"); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("two issuers, no iss: %v %v, want 401", p, err)
	}
}

func TestIsQualifiedName(t *testing.T) {
	for name, want := range map[string]bool{
		"https://login.example.com#alice":        true,
		"http://127.0.0.1:4444/#acme":            true,
		"https://login.example.com/tenant/x#":    true,
		"alice":                                  false,
		"team#1":                                 false,
		"mailto:x#y":                             false,
		"https://#x":                             false, // no host
		"alice@example.com":                      false,
		"https://login.example.com/no-separator": false,
	} {
		if got := IsQualifiedName(name); got != want {
			t.Errorf("IsQualifiedName(%q) = %v, want %v", name, got, want)
		}
	}
}
