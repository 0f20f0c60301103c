package gateway_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// jwtIssuer is a minimal authorization server over real HTTP: RFC 8414
// metadata and a key set, and RS256 access tokens signed with its key.
// (The OAuth suite uses a real Hydra; two issuers only need this much.)
type jwtIssuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &jwtIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks",
			"token_endpoint": is.srv.URL + "/token", "response_types_supported": []string{"code"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// token is an access token for resource naming sub in org with scope.
func (is *jwtIssuer) token(t *testing.T, resource, sub, org, scope string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader(jose.HeaderKey("kid"), "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: is.srv.URL, Subject: sub, Audience: jwt.Audience{resource},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).
		Claims(map[string]any{"org": org, "scope": scope}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAnotherIssuerCannotBecomeAKeysPrincipal (issue 23, finding 8): with
// two trusted authorization servers, a token of the second naming sub
// "alice" and org "acme" was the static key's alice in acme: it listed,
// showed and decided her organization's paused executions. Principals are
// now keyed by issuer: only a local issuer (--oauth-local-issuer; by
// default none when there are several) names the keys' principals;
// another's alice is its own, in an organization of its own, and finds
// nothing of acme's on any surface.
func TestAnotherIssuerCannotBecomeAKeysPrincipal(t *testing.T) {
	a, b := newJWTIssuer(t), newJWTIssuer(t)
	for _, tc := range []struct {
		name   string
		local  []string
		aIsKey bool // A's alice is the keys' alice
	}{
		{"A local", []string{a.srv.URL}, true},
		{"two issuers, none local (the default)", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			resource := "http://" + addr + "/mcp"
			info := startCodeNode(t, func(c *app.Config) {
				c.HTTP = addr
				c.MCP.OAuth = app.OAuthConfig{Issuers: []string{a.srv.URL, b.srv.URL}, Resource: resource, LocalIssuers: tc.local}
			})
			base := "http://" + info.HTTPAddr
			owner := connectMode(t, info.HTTPAddr, aliceToken, "") // the static key: alice in acme
			id := pause(t, owner, "waiting_for_interaction")

			fromB := b.token(t, resource, "alice", "acme", "mcp:admin")
			if r := api(t, "GET", base+"/api/executions", fromB, ""); r.status != 200 || len(r.body["executions"].([]any)) != 0 {
				t.Fatalf("B's alice lists: %d %v, want nothing of acme's", r.status, r.body)
			}
			for _, r := range []apiResponse{
				api(t, "GET", base+"/api/executions/"+id, fromB, ""),
				api(t, "POST", base+"/api/executions/"+id+"/resume", fromB, `{"action":"accept"}`),
			} {
				if r.status != 404 || r.body["error"] != "execution_not_found" {
					t.Fatalf("B's alice: %d %v, want 404 execution_not_found", r.status, r.body)
				}
			}
			hdr := map[string]string{"Authorization": "Bearer " + fromB, "Content-Type": "application/json",
				"Accept": "application/json, text/event-stream", "Mcp-Session-Id": owner.ID(), "Mcp-Protocol-Version": "2025-11-25"}
			if r := raw(t, "POST", info.HTTPAddr, hdr, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.status != 403 {
				t.Fatalf("B's alice on the key's session: %d %s, want 403", r.status, r.body)
			}
			if n := len(todos(t, info.HTTPAddr, aliceToken)); n != 0 {
				t.Fatalf("B's alice ran the write: %d to-dos", n)
			}

			fromA := a.token(t, resource, "alice", "acme", "mcp:approve")
			r := api(t, "GET", base+"/api/executions", fromA, "")
			if got := len(r.body["executions"].([]any)); r.status != 200 || (got == 1) != tc.aIsKey {
				t.Fatalf("A's alice lists %d (status %d), want acme's pause listed: %v", got, r.status, tc.aIsKey)
			}
			if !tc.aIsKey {
				return
			}
			if r := api(t, "POST", base+"/api/executions/"+id+"/resume", fromA, `{"action":"accept"}`); r.status != 200 {
				t.Fatalf("A's alice decides: %d %v", r.status, r.body)
			}
			hdr["Authorization"] = "Bearer " + fromA
			if r := raw(t, "POST", info.HTTPAddr, hdr, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.status != 200 {
				t.Fatalf("A's alice on the key's alice's session: %d %s, want 200 (the same principal)", r.status, r.body)
			}
		})
	}
}
