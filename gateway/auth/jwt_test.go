package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

func newTestVerifier(t testing.TB, is *testIssuer, clock *manualClock, tweak func(*JWTOptions)) *JWTVerifier {
	t.Helper()
	o := JWTOptions{Issuers: []string{is.URL()}, Audience: testResource, Now: clock.Now}
	if tweak != nil {
		tweak(&o)
	}
	v, err := NewJWTVerifier(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestJWTVerifierClaims: each way a token can be wrong is refused with an
// invalid-token error that says why; a good token yields its scopes,
// subject, expiry and claims.
func TestJWTVerifierClaims(t *testing.T) {
	is := newTestIssuer(t)
	other := newTestIssuer(t) // a server this resource does not trust
	clock := newManualClock()
	v := newTestVerifier(t, is, clock, nil)
	now := clock.Now()
	hmacKey := []byte("0123456789abcdef0123456789abcdef")
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	foreignRSA, _ := rsa.GenerateKey(rand.Reader, 2048)

	tests := []struct {
		name    string
		token   string
		wantErr string // substring of the invalid-token message; "" = valid
	}{
		{name: "valid", token: is.sign(claims{}, nil)},
		{name: "aud among several", token: is.sign(claims{aud: []string{"https://other.example", testResource}}, nil)},
		{name: "expired", token: is.sign(claims{iat: now.Add(-2 * time.Hour), exp: now.Add(-time.Minute)}, nil), wantErr: "expired"},
		{name: "expired within leeway", token: is.sign(claims{iat: now.Add(-time.Hour), exp: now.Add(-10 * time.Second)}, nil)},
		{name: "no exp", token: is.sign(claims{noExp: true}, nil), wantErr: "no exp"},
		{name: "not yet valid", token: is.sign(claims{nbf: now.Add(5 * time.Minute)}, nil), wantErr: "not valid yet"},
		{name: "nbf within leeway", token: is.sign(claims{nbf: now.Add(10 * time.Second)}, nil)},
		{name: "issued in the future", token: is.sign(claims{iat: now.Add(5 * time.Minute)}, nil), wantErr: "not valid yet"},
		{name: "wrong audience", token: is.sign(claims{aud: []string{"https://other.example/mcp"}}, nil), wantErr: "not issued for this resource"},
		{name: "audience with trailing slash", token: is.sign(claims{aud: []string{testResource + "/"}}, nil), wantErr: "not issued for this resource"},
		{name: "untrusted issuer", token: other.sign(claims{}, nil), wantErr: "issuer is not trusted"},
		{name: "our iss, other server's key", token: signWith(t, jose.RS256, other.current().priv, is.current().kid, is.URL(), claims{}), wantErr: "bad signature"},
		{name: "unknown kid", token: signWith(t, jose.RS256, foreignRSA, "made-up", is.URL(), claims{}), wantErr: "does not publish"},
		{name: "HS256 with a guessable key", token: signWith(t, jose.HS256, hmacKey, is.current().kid, is.URL(), claims{}), wantErr: "accepted algorithm"},
		{name: "EdDSA key not published", token: signWith(t, jose.EdDSA, edPriv, "", is.URL(), claims{}), wantErr: "bad signature"},
		{name: "alg none", token: unsignedToken(is.URL()), wantErr: "accepted algorithm"},
		{name: "garbage", token: "abc.def.ghi", wantErr: "accepted algorithm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := v.Verify(t.Context(), tt.token, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if info.UserID != "alice" || info.Extra["org"] != "acme" || len(info.Scopes) != 1 || info.Scopes[0] != DefaultMemberScope || info.Expiration.IsZero() {
					t.Fatalf("info = %+v", info)
				}
				return
			}
			if !errors.Is(err, sdkauth.ErrInvalidToken) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Verify = %v, want an invalid token error containing %q", err, tt.wantErr)
			}
		})
	}
}

// unsignedToken is a JWT with alg "none".
func unsignedToken(iss string) string {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	return enc(`{"alg":"none","typ":"JWT"}`) + "." + enc(`{"iss":"`+iss+`","sub":"x","aud":"`+testResource+`","exp":9999999999}`) + "."
}

func TestJWTVerifierAlgorithmAllowList(t *testing.T) {
	is := newTestIssuer(t)
	ec := is.addECKey()
	clock := newManualClock()
	rsaOnly := newTestVerifier(t, is, clock, func(o *JWTOptions) { o.Algorithms = []string{"RS256"} })
	if _, err := rsaOnly.Verify(t.Context(), is.sign(claims{}, ec), nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
		t.Fatalf("ES256 token with RS256 allowed: %v", err)
	}
	both := newTestVerifier(t, is, clock, nil)
	if _, err := both.Verify(t.Context(), is.sign(claims{}, ec), nil); err != nil {
		t.Fatalf("ES256 token with the defaults: %v", err)
	}
	for _, bad := range []string{"HS256", "none", "RS1"} {
		if _, err := NewJWTVerifier(JWTOptions{Issuers: []string{is.URL()}, Audience: testResource, Algorithms: []string{bad}}); err == nil {
			t.Errorf("algorithm %q accepted in the allow-list", bad)
		}
	}
}

// TestJWTVerifierKeyRotation: the verifier fetches the key set once, a
// token signed by a new key makes it fetch again (the set then no longer
// has the rotated-out key, whose tokens are refused), and tokens naming
// unknown keys cannot make it fetch more than a few times in a row, then
// once per KeysMinRefresh.
func TestJWTVerifierKeyRotation(t *testing.T) {
	is := newTestIssuer(t)
	clock := newManualClock()
	v := newTestVerifier(t, is, clock, func(o *JWTOptions) { o.KeysMinRefresh = 10 * time.Second })
	ctx := t.Context()
	oldTok := is.sign(claims{}, nil)
	for range 3 {
		if _, err := v.Verify(ctx, oldTok, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := is.jwksFetches.Load(); n != 1 {
		t.Fatalf("%d key set fetches for three tokens of one key, want 1", n)
	}

	// Made-up key ids: the burst, then nothing within the interval.
	for i := range 50 {
		if _, err := v.Verify(ctx, signWith(t, jose.RS256, is.current().priv, "made-up-"+randomID(), is.URL(), claims{}), nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
			t.Fatalf("token %d with a made-up kid: %v", i, err)
		}
	}
	if n := is.jwksFetches.Load(); n != refreshBurst {
		t.Fatalf("%d fetches after 50 unknown key ids within the interval, want %d (the burst)", n, refreshBurst)
	}

	// The server rotates: the old key is gone, a new one signs.
	is.rotate(true)
	newTok := is.sign(claims{}, nil)
	if _, err := v.Verify(ctx, newTok, nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
		t.Fatalf("new key's token within the refresh interval: %v (want refused until the interval passed)", err)
	}
	clock.Advance(10 * time.Second)
	if _, err := v.Verify(ctx, newTok, nil); err != nil {
		t.Fatalf("new key's token after the interval: %v", err)
	}
	if n := is.jwksFetches.Load(); n != refreshBurst+1 {
		t.Fatalf("%d fetches, want %d", n, refreshBurst+1)
	}
	if _, err := v.Verify(ctx, oldTok, nil); !errors.Is(err, sdkauth.ErrInvalidToken) || !strings.Contains(err.Error(), "does not publish") {
		t.Fatalf("rotated-out key's token: %v, want refused", err)
	}
}

// TestJWTVerifierKeysMaxAge: a key set older than KeysMaxAge is fetched
// again before use, so a key removed without a new one showing up stops
// working within that time.
func TestJWTVerifierKeysMaxAge(t *testing.T) {
	is := newTestIssuer(t)
	clock := newManualClock()
	v := newTestVerifier(t, is, clock, func(o *JWTOptions) { o.KeysMaxAge = time.Minute })
	tok := is.sign(claims{exp: clock.Now().Add(24 * time.Hour)}, nil)
	if _, err := v.Verify(t.Context(), tok, nil); err != nil {
		t.Fatal(err)
	}
	is.rotate(true)
	clock.Advance(59 * time.Second)
	if _, err := v.Verify(t.Context(), tok, nil); err != nil {
		t.Fatalf("within max age: %v", err)
	}
	clock.Advance(time.Second)
	if _, err := v.Verify(t.Context(), tok, nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
		t.Fatalf("after max age, key no longer published: %v", err)
	}
}

// TestJWTVerifierServerDown: while the authorization server is down,
// tokens of known keys still verify; with no keys at all the error says
// the server could not be reached (not that the token is invalid).
func TestJWTVerifierServerDown(t *testing.T) {
	is := newTestIssuer(t)
	clock := newManualClock()
	cold := newTestVerifier(t, is, clock, nil)
	warm := newTestVerifier(t, is, clock, func(o *JWTOptions) { o.KeysMaxAge = time.Minute })
	tok := is.sign(claims{exp: clock.Now().Add(24 * time.Hour)}, nil)
	if err := warm.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	is.down.Store(true)
	if _, err := cold.Verify(t.Context(), tok, nil); err == nil || errors.Is(err, sdkauth.ErrInvalidToken) || !errors.Is(err, errKeysUnavailable) {
		t.Fatalf("no keys, server down: %v, want keys unavailable", err)
	}
	clock.Advance(time.Hour) // stale keys, and the refetch fails
	if _, err := warm.Verify(t.Context(), tok, nil); err != nil {
		t.Fatalf("known key, server down: %v", err)
	}
	is.down.Store(false)
	clock.Advance(DefaultKeysMinRefresh)
	if _, err := cold.Verify(t.Context(), tok, nil); err != nil {
		t.Fatalf("server back: %v", err)
	}
}

// TestJWTVerifierConcurrentFetchesOnce: many first tokens at once cost
// one fetch.
func TestJWTVerifierConcurrentFetchesOnce(t *testing.T) {
	is := newTestIssuer(t)
	v := newTestVerifier(t, is, newManualClock(), nil)
	tok := is.sign(claims{}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), tok, nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := is.jwksFetches.Load(); n != 1 {
		t.Fatalf("%d fetches for 32 concurrent first tokens, want 1", n)
	}
}

// TestJWTVerifierWithRequireBearerToken: the verifier plugs into go-sdk's
// middleware as an [sdkauth.TokenVerifier].
func TestJWTVerifierWithRequireBearerToken(t *testing.T) {
	is := newTestIssuer(t)
	v := newTestVerifier(t, is, newManualClock(), nil)
	h := sdkauth.RequireBearerToken(v.Verify, &sdkauth.RequireBearerTokenOptions{Scopes: []string{DefaultMemberScope}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(sdkauth.TokenInfoFromContext(r.Context()).UserID))
	}))
	for _, tt := range []struct {
		tok  string
		want int
	}{
		{is.sign(claims{}, nil), 200},
		{is.sign(claims{extra: map[string]any{"scp": []string{DefaultViewerScope}}}, nil), 403},
		{is.sign(claims{aud: []string{"https://elsewhere"}}, nil), 401},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tt.tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tt.want {
			t.Errorf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
		}
	}
}

func TestDiscoverAuthServer(t *testing.T) {
	is := newTestIssuer(t)
	meta, err := DiscoverAuthServer(t.Context(), http.DefaultClient, is.URL())
	if err != nil || meta.JWKSURI != is.URL()+"/jwks" {
		t.Fatalf("discover: %+v, %v", meta, err)
	}
	if _, err := DiscoverAuthServer(t.Context(), http.DefaultClient, is.URL()+"/tenant"); err == nil {
		t.Fatal("discovered a server whose metadata names another issuer")
	}
	if _, err := DiscoverAuthServer(t.Context(), http.DefaultClient, "ftp://x"); err == nil {
		t.Fatal("discovered a non-http issuer")
	}
}
