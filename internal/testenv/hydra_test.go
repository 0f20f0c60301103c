package testenv

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestHydra: the helper's Hydra issues RS256 JWT access tokens for the
// requested audience and scopes with the client's hook claims at the top
// level, opaque tokens that its introspection endpoint knows, and after
// RotateKeys signs with a key it publishes instead of the old one.
func TestHydra(t *testing.T) {
	h := StartHydra(t, HydraOptions{})
	const aud = "http://127.0.0.1:1/mcp"
	h.CreateClient(t, HydraClient{ID: "svc", Secret: "svc-secret-0123456789", Scopes: []string{"mcp:read"}, Audiences: []string{aud}, Claims: map[string]any{"org": "acme"}})
	tok := h.Token(t, "svc", "svc-secret-0123456789", []string{"mcp:read"}, aud)
	header, claims := decodeJWT(t, tok)
	if header["alg"] != "RS256" || claims["iss"] != h.Issuer() || claims["org"] != "acme" || claims["sub"] != "svc" {
		t.Fatalf("token header %v claims %v", header, claims)
	}
	if a, _ := claims["aud"].([]any); len(a) != 1 || a[0] != aud {
		t.Fatalf("aud %v", claims["aud"])
	}
	published := func() []string {
		var set struct {
			Keys []struct {
				KID string `json:"kid"`
			} `json:"keys"`
		}
		if err := getJSON(http.DefaultClient, h.Issuer()+"/.well-known/jwks.json", &set); err != nil {
			t.Fatal(err)
		}
		var kids []string
		for _, k := range set.Keys {
			kids = append(kids, k.KID)
		}
		return kids
	}
	old := header["kid"].(string)
	if !strings.Contains(strings.Join(published(), " "), old) {
		t.Fatalf("signing key %s not published", old)
	}
	kid := h.RotateKeys(t)
	if h2, _ := decodeJWT(t, h.Token(t, "svc", "svc-secret-0123456789", []string{"mcp:read"}, aud)); h2["kid"] != kid {
		t.Fatalf("after rotation signed by %v, want %s", h2["kid"], kid)
	}
	if kids := strings.Join(published(), " "); strings.Contains(kids, old) || !strings.Contains(kids, kid) {
		t.Fatalf("published after rotation: %s (old %s, new %s)", kids, old, kid)
	}

	h.CreateClient(t, HydraClient{ID: "opaque", Secret: "opaque-secret-0123456789", Scopes: []string{"mcp:read"}, Audiences: []string{aud}, Opaque: true})
	if tok := h.Token(t, "opaque", "opaque-secret-0123456789", []string{"mcp:read"}, aud); strings.Count(tok, ".") == 2 {
		t.Fatalf("opaque client got a JWT: %s", tok)
	}
}

func decodeJWT(t *testing.T, tok string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %s", tok)
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			t.Fatalf("part %d of %s: %v", i, tok, err)
		}
	}
	return header, claims
}
