package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// Defaults of [IntrospectionOptions].
const (
	// DefaultIntrospectionCache is how long an active token's
	// introspection answer is reused (at most until the token expires).
	DefaultIntrospectionCache = 30 * time.Second
	// DefaultIntrospectionCacheSize bounds the answers kept.
	DefaultIntrospectionCacheSize = 10000
)

// IntrospectionOptions configure an [Introspector].
type IntrospectionOptions struct {
	// URL is the authorization server's introspection endpoint (RFC 7662;
	// required).
	URL string
	// ClientID and ClientSecret authenticate this server at the endpoint
	// (HTTP Basic, RFC 7662 §2.1). Empty: no client authentication (an
	// endpoint protected otherwise, as Hydra's admin API).
	ClientID, ClientSecret string
	// Audience is this server's canonical resource URI (required): an
	// active token's aud must contain it.
	Audience string
	// Issuers, if set, are the trusted issuers: an answer with an iss not
	// among them is refused.
	Issuers []string
	// CacheTTL is how long an active token's answer is reused, so a
	// client's every request does not cost a round trip to the server (a
	// revoked token is accepted for up to this long). Default
	// [DefaultIntrospectionCache]; negative: no cache.
	CacheTTL time.Duration
	// CacheSize bounds the answers kept. Default
	// [DefaultIntrospectionCacheSize].
	CacheSize int
	// Leeway is the clock skew tolerated on exp. Default [DefaultLeeway].
	Leeway time.Duration
	// HTTPClient calls the endpoint. Default: a client with a
	// [DefaultHTTPTimeout] timeout.
	HTTPClient *http.Client
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Introspector verifies opaque access tokens by asking the authorization
// server (RFC 7662 token introspection). An answer is accepted when the
// token is active, is an access token, names this server in aud, comes
// from a trusted issuer (if it names one) and has not expired. Active
// answers are cached by the token's SHA-256 for a short while. Like
// [JWTVerifier.Verify], [Introspector.Verify] has the shape of go-sdk's
// [sdkauth.TokenVerifier]. It is safe for concurrent use.
type Introspector struct {
	o     IntrospectionOptions
	cache *expirable.LRU[[sha256.Size]byte, *sdkauth.TokenInfo]
}

// NewIntrospector returns an introspector configured by o.
func NewIntrospector(o IntrospectionOptions) (*Introspector, error) {
	if err := checkResourceURI(o.URL); err != nil {
		return nil, fmt.Errorf("auth: introspection URL: %w", err)
	}
	if err := checkResourceURI(o.Audience); err != nil {
		return nil, fmt.Errorf("auth: introspection audience: %w", err)
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultIntrospectionCache
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultIntrospectionCacheSize
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultLeeway
	}
	o.Leeway = max(o.Leeway, 0)
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	in := &Introspector{o: o}
	if o.CacheTTL > 0 {
		in.cache = expirable.NewLRU[[sha256.Size]byte, *sdkauth.TokenInfo](o.CacheSize, nil, o.CacheTTL)
	}
	return in, nil
}

// introspection is the part of an RFC 7662 answer the introspector reads;
// the whole answer becomes the token's claims.
type introspection struct {
	Active   bool            `json:"active"`
	Scope    string          `json:"scope"`
	Exp      *float64        `json:"exp"`
	Sub      string          `json:"sub"`
	Iss      string          `json:"iss"`
	Aud      json.RawMessage `json:"aud"`
	TokenUse string          `json:"token_use"`
}

// Verify introspects token. A token the server says is not active, or one
// not meant for this server, gives an error that wraps
// [sdkauth.ErrInvalidToken]; a server that cannot be asked gives one that
// does not.
func (in *Introspector) Verify(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := in.o.Now()
	if in.cache != nil {
		if info, ok := in.cache.Get(key); ok && now.Add(-in.o.Leeway).Before(info.Expiration) {
			return info, nil
		}
	}
	claims, err := in.ask(ctx, token)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(claims)
	var ans introspection
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, fmt.Errorf("auth: introspection answer: %w", err)
	}
	switch {
	case !ans.Active:
		return nil, invalid("not active (unknown, expired or revoked)", nil)
	case ans.TokenUse != "" && ans.TokenUse != "access_token":
		return nil, invalid("not an access token", nil)
	case !audienceContains(ans.Aud, in.o.Audience):
		return nil, invalid("not issued for this resource (aud must name "+in.o.Audience+")", nil)
	case ans.Iss != "" && len(in.o.Issuers) > 0 && !slices.Contains(in.o.Issuers, ans.Iss):
		return nil, invalid("the token's issuer is not trusted here", nil)
	case ans.Exp == nil:
		return nil, invalid("no exp in the introspection answer", nil)
	}
	exp := time.Unix(0, int64(*ans.Exp*float64(time.Second)))
	if !now.Add(-in.o.Leeway).Before(exp) {
		return nil, invalid("expired", nil)
	}
	info := &sdkauth.TokenInfo{Scopes: strings.Fields(ans.Scope), Expiration: exp, UserID: ans.Sub, Extra: claims}
	if in.cache != nil {
		in.cache.Add(key, info)
	}
	return info, nil
}

// ask posts token to the introspection endpoint and returns the answer.
func (in *Introspector) ask(ctx context.Context, token string) (map[string]any, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.o.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("auth: introspection request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.o.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(in.o.ClientID), url.QueryEscape(in.o.ClientSecret)) // RFC 6749 §2.3.1
	}
	resp, err := in.o.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: introspect at %s: %w", in.o.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: introspect at %s: %w", in.o.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth: introspect at %s: status %d", in.o.URL, resp.StatusCode)
	}
	if len(body) > maxMetadataBytes {
		return nil, fmt.Errorf("auth: introspect at %s: answer larger than %d bytes", in.o.URL, maxMetadataBytes)
	}
	var claims map[string]any
	if err := json.Unmarshal(body, &claims); err != nil {
		return nil, fmt.Errorf("auth: introspect at %s: %w", in.o.URL, err)
	}
	if claims == nil {
		return nil, errors.New("auth: introspection answer is not a JSON object")
	}
	return claims, nil
}

// audienceContains reports whether an aud value (a string or a list of
// them) names want.
func audienceContains(aud json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(aud, &many) == nil {
		return slices.Contains(many, want)
	}
	return false
}
