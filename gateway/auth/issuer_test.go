package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testResource is the canonical resource URI of the unit tests.
const testResource = "https://mcp.example.com/mcp"

// testIssuer is a stand-in authorization server for unit tests: it
// publishes its metadata (RFC 8414) and key set, signs tokens with its
// current key, and can rotate keys. Integration tests use a real one
// (internal/testenv.StartHydra).
type testIssuer struct {
	t   testing.TB
	srv *httptest.Server
	// jwksFetches counts GETs of the key set.
	jwksFetches atomic.Int64
	// down makes every request fail with 503.
	down atomic.Bool

	mu   sync.Mutex
	keys []*testKey // published; the last one signs
}

type testKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv any
	pub  any
}

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	is := &testIssuer{t: t}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL(), "jwks_uri": is.URL() + "/jwks", "token_endpoint": is.URL() + "/token",
			"response_types_supported": []string{"code"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksFetches.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.pub, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	is.rotate(true)
	return is
}

// URL is the issuer identifier.
func (is *testIssuer) URL() string { return is.srv.URL }

// rotate adds a new RSA signing key; with drop, the older keys are no
// longer published.
func (is *testIssuer) rotate(drop bool) *testKey {
	is.t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		is.t.Fatal(err)
	}
	k := &testKey{kid: "rsa-" + randomID(), alg: jose.RS256, priv: priv, pub: &priv.PublicKey}
	is.mu.Lock()
	defer is.mu.Unlock()
	if drop {
		is.keys = nil
	}
	is.keys = append(is.keys, k)
	return k
}

// addECKey publishes an ES256 key and makes it the signing key.
func (is *testIssuer) addECKey() *testKey {
	is.t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		is.t.Fatal(err)
	}
	k := &testKey{kid: "ec-" + randomID(), alg: jose.ES256, priv: priv, pub: &priv.PublicKey}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = append(is.keys, k)
	return k
}

func (is *testIssuer) current() *testKey {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[len(is.keys)-1]
}

func randomID() string { return rand.Text()[:12] }

// claims are a token's claims, standard ones first.
type claims struct {
	iss, sub string
	aud      []string
	iat, nbf time.Time
	exp      time.Time
	noExp    bool
	extra    map[string]any
}

// sign returns a JWT with c, signed by key (nil: the current key) with
// the key's id.
func (is *testIssuer) sign(c claims, key *testKey) string {
	is.t.Helper()
	if key == nil {
		key = is.current()
	}
	return signWith(is.t, key.alg, key.priv, key.kid, is.URL(), c)
}

func signWith(t testing.TB, alg jose.SignatureAlgorithm, priv any, kid, defaultIss string, c claims) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.iss == "" {
		c.iss = defaultIss
	}
	if c.sub == "" {
		c.sub = "alice"
	}
	if c.aud == nil {
		c.aud = []string{testResource}
	}
	now := time.Now()
	if c.iat.IsZero() {
		c.iat = now
	}
	if c.exp.IsZero() {
		c.exp = now.Add(time.Hour)
	}
	std := jwt.Claims{Issuer: c.iss, Subject: c.sub, Audience: c.aud, IssuedAt: jwt.NewNumericDate(c.iat)}
	if !c.noExp {
		std.Expiry = jwt.NewNumericDate(c.exp)
	}
	if !c.nbf.IsZero() {
		std.NotBefore = jwt.NewNumericDate(c.nbf)
	}
	extra := map[string]any{"org": "acme", "scp": []string{DefaultMemberScope}}
	for k, v := range c.extra {
		if v == nil {
			delete(extra, k)
			continue
		}
		extra[k] = v
	}
	tok, err := jwt.Signed(signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock { return &manualClock{now: time.Now()} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
