package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// Defaults of [JWTOptions].
const (
	// DefaultLeeway is the clock skew tolerated on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// DefaultKeysMaxAge is how long a fetched key set is used before it is
	// fetched again.
	DefaultKeysMaxAge = 15 * time.Minute
	// DefaultKeysMinRefresh is the least time between two fetches of one
	// issuer's key set, past a first few (for tokens naming a key id the
	// set lacks).
	DefaultKeysMinRefresh = 10 * time.Second
	// DefaultHTTPTimeout bounds one call to an authorization server
	// (metadata, keys, introspection) when no HTTPClient of the options
	// sets a timeout.
	DefaultHTTPTimeout = 10 * time.Second
)

// DefaultAlgorithms are the signature algorithms a [JWTVerifier] accepts
// unless told otherwise: the asymmetric ones. "none" and the HMAC
// algorithms (whose key would be a secret shared with every resource
// server) are never accepted.
var DefaultAlgorithms = []string{
	string(jose.RS256), string(jose.RS384), string(jose.RS512),
	string(jose.PS256), string(jose.PS384), string(jose.PS512),
	string(jose.ES256), string(jose.ES384), string(jose.ES512),
	string(jose.EdDSA),
}

// JWTOptions configure a [JWTVerifier].
type JWTOptions struct {
	// Issuers are the issuer identifiers of the trusted authorization
	// servers (at least one). A token's iss claim picks the server whose
	// keys must have signed it.
	Issuers []string
	// Audience is this server's canonical resource URI (required): a
	// token's aud claim must contain it (RFC 8707, RFC 9068).
	Audience string
	// JWKSURL, for a single issuer, is where its key set is; default: the
	// jwks_uri of the issuer's metadata ([DiscoverAuthServer]).
	JWKSURL string
	// Algorithms are the accepted signature algorithms. Default
	// [DefaultAlgorithms]; HMAC algorithms and "none" are refused.
	Algorithms []string
	// Leeway is the clock skew tolerated on exp, nbf and iat. Default
	// [DefaultLeeway]; negative: none.
	Leeway time.Duration
	// KeysMaxAge is how long a key set is used before it is fetched again.
	// Default [DefaultKeysMaxAge].
	KeysMaxAge time.Duration
	// KeysMinRefresh limits fetches of one issuer's keys: a token naming
	// an unknown key id makes the verifier fetch the set again (the server
	// rotated its keys) — three times in a row at most, then once per
	// KeysMinRefresh. Default [DefaultKeysMinRefresh].
	KeysMinRefresh time.Duration
	// HTTPClient fetches metadata and keys. Default: a client with a
	// [DefaultHTTPTimeout] timeout.
	HTTPClient *http.Client
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// JWTVerifier verifies JWT access tokens (RFC 9068) locally: the
// signature against the issuer's published keys, with an algorithm
// allow-list; iss (one of the trusted issuers), aud (this server's
// resource URI), exp (required), nbf and iat, with a small leeway. Its
// [JWTVerifier.Verify] has the shape of go-sdk's [sdkauth.TokenVerifier],
// so it also plugs into [sdkauth.RequireBearerToken].
//
// It does not decide who the token's principal is; [ClaimMapping] does.
// It is safe for concurrent use.
type JWTVerifier struct {
	audience string
	algs     []jose.SignatureAlgorithm
	leeway   time.Duration
	now      func() time.Time
	issuers  map[string]*keySet
}

// NewJWTVerifier returns a verifier configured by o. It fetches nothing
// yet: keys are fetched at the first token (see [JWTVerifier.Warm]).
func NewJWTVerifier(o JWTOptions) (*JWTVerifier, error) {
	if len(o.Issuers) == 0 {
		return nil, errors.New("auth: JWT verification needs at least one issuer")
	}
	if err := checkResourceURI(o.Audience); err != nil {
		return nil, fmt.Errorf("auth: JWT audience: %w", err)
	}
	if o.JWKSURL != "" && len(o.Issuers) > 1 {
		return nil, errors.New("auth: a JWKS URL can only be given for a single issuer")
	}
	if len(o.Algorithms) == 0 {
		o.Algorithms = DefaultAlgorithms
	}
	v := &JWTVerifier{audience: o.Audience, leeway: o.Leeway, now: o.Now, issuers: map[string]*keySet{}}
	for _, a := range o.Algorithms {
		if !slices.Contains(DefaultAlgorithms, a) {
			return nil, fmt.Errorf("auth: signature algorithm %q is not accepted (known: %s)", a, strings.Join(DefaultAlgorithms, ", "))
		}
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	if v.leeway == 0 {
		v.leeway = DefaultLeeway
	}
	v.leeway = max(v.leeway, 0)
	if v.now == nil {
		v.now = time.Now
	}
	if o.KeysMaxAge <= 0 {
		o.KeysMaxAge = DefaultKeysMaxAge
	}
	if o.KeysMinRefresh <= 0 {
		o.KeysMinRefresh = DefaultKeysMinRefresh
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	for _, iss := range o.Issuers {
		if _, dup := v.issuers[iss]; dup {
			return nil, fmt.Errorf("auth: issuer %q given twice", iss)
		}
		if err := checkIssuer(iss); err != nil {
			return nil, err
		}
		v.issuers[iss] = newKeySet(iss, o.JWKSURL, client, v.now, o.KeysMaxAge, o.KeysMinRefresh)
	}
	return v, nil
}

// Warm fetches every issuer's keys now (at startup, so a wrong issuer
// shows in the logs before the first client), returning the errors.
// Verification works without it.
func (v *JWTVerifier) Warm(ctx context.Context) error {
	var errs []error
	for _, ks := range v.issuers {
		if _, err := ks.lookup(ctx, ""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// looksLikeJWT reports whether token has the shape of a JWS compact
// serialization (three dot-separated parts): such tokens are verified as
// JWTs, anything else is opaque.
func looksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// tokenError is a token the verifier refuses; its message is safe to send
// the client (RFC 6750's error_description). It unwraps to
// [sdkauth.ErrInvalidToken].
type tokenError struct {
	msg   string
	cause error
}

func (e *tokenError) Error() string { return "invalid token: " + e.msg }

// Unwrap returns [sdkauth.ErrInvalidToken] and the cause.
func (e *tokenError) Unwrap() []error { return []error{sdkauth.ErrInvalidToken, e.cause} }

func invalid(msg string, cause error) error { return &tokenError{msg: msg, cause: cause} }

// Verify checks a JWT access token and returns what it says: its scopes
// ("scope" or "scp"), its expiry, its subject as UserID and every claim in
// Extra. A token that fails verification gives an error that wraps
// [sdkauth.ErrInvalidToken]; keys that could not be fetched give one that
// does not (the token may be fine: try later).
func (v *JWTVerifier) Verify(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	tok, err := jwt.ParseSigned(token, v.algs)
	if err != nil {
		return nil, invalid("not a JWT signed with an accepted algorithm", err)
	}
	if len(tok.Headers) != 1 {
		return nil, invalid("not a JWT with one signature", nil)
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, invalid("malformed claims", err)
	}
	ks, ok := v.issuers[unverified.Issuer]
	if !ok {
		return nil, invalid("the token's issuer is not trusted here", nil)
	}
	h := tok.Headers[0]
	keys, err := ks.lookup(ctx, h.KeyID)
	if err != nil {
		return nil, fmt.Errorf("auth: verify token of %s: %w", ks.issuer, err)
	}
	var claims jwt.Claims
	var extra map[string]any
	verified := false
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if tok.Claims(k.Key, &claims, &extra) == nil {
			verified = true
			break
		}
	}
	if !verified {
		if len(keys) == 0 {
			return nil, invalid("signed by a key the issuer does not publish", nil)
		}
		return nil, invalid("bad signature", nil)
	}
	if claims.Expiry == nil {
		return nil, invalid("no exp claim", nil)
	}
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: ks.issuer, AnyAudience: jwt.Audience{v.audience}, Time: v.now()}, v.leeway)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return nil, invalid("expired", err)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, invalid("not issued for this resource (aud must name "+v.audience+")", err)
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, invalid("not valid yet", err)
	case err != nil:
		return nil, invalid("claims not valid", err)
	}
	return &sdkauth.TokenInfo{Scopes: scopesOf(extra), Expiration: claims.Expiry.Time(), UserID: claims.Subject, Extra: extra}, nil
}

// checkIssuer accepts an issuer identifier (RFC 8414 §2: an https URL
// without query or fragment; http is allowed for development).
func checkIssuer(iss string) error {
	if err := checkResourceURI(iss); err != nil {
		return fmt.Errorf("auth: issuer %q: %w", iss, err)
	}
	return nil
}
