package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
)

// OAuthConfig makes the node an OAuth 2.1 resource server (the MCP
// authorization spec): bearer tokens that are not static keys are
// verified as access tokens of the Issuers. The zero value is off.
type OAuthConfig struct {
	// Issuers are the trusted authorization servers' issuer identifiers;
	// none turns OAuth off.
	Issuers []string
	// Resource is the canonical resource URI of /mcp as clients reach it
	// (e.g. https://mcp.example.com/mcp): every access token's aud must
	// name it.
	Resource string
	// JWKSURL overrides discovery of the (single) issuer's key set.
	JWKSURL string
	// Algorithms accepted on JWTs (empty: auth.DefaultAlgorithms).
	Algorithms []string
	// Leeway on exp, nbf and iat (zero: auth.DefaultLeeway).
	Leeway time.Duration
	// KeysMaxAge and KeysMinRefresh bound how long a key set is used and
	// how often an unknown key id may make the node fetch it again (zero:
	// the auth defaults).
	KeysMaxAge, KeysMinRefresh time.Duration
	// IntrospectionURL, if set, verifies opaque tokens by RFC 7662
	// introspection, with IntrospectionClientID and
	// IntrospectionClientSecret as the node's credentials there.
	IntrospectionURL                                 string
	IntrospectionClientID, IntrospectionClientSecret string
	// IntrospectionCache is how long an active answer is reused (zero:
	// auth.DefaultIntrospectionCache; negative: not cached).
	IntrospectionCache time.Duration
	// Claims maps tokens to principals.
	Claims auth.ClaimMapping
	// LocalIssuers are the issuers whose tokens name principals as the
	// static keys do; every other issuer's principals are keyed by issuer
	// (auth.OAuthOptions.LocalIssuers). nil: the only issuer when there is
	// one, none when there are several.
	LocalIssuers []string
	// Now is the clock tokens are checked against (nil: time.Now); tests
	// move it to expire tokens.
	Now func() time.Time
}

// Enabled reports whether OAuth is on.
func (c OAuthConfig) Enabled() bool { return len(c.Issuers) > 0 }

// newOAuth builds the resource server of c (nil when off) and, in the
// background, fetches the issuers' keys once so that a wrong issuer shows
// in the log before the first client does.
func newOAuth(ctx context.Context, c OAuthConfig, log *slog.Logger) (*auth.OAuth, error) {
	if !c.Enabled() {
		return nil, nil
	}
	jwt, err := auth.NewJWTVerifier(auth.JWTOptions{
		Issuers: c.Issuers, Audience: c.Resource, JWKSURL: c.JWKSURL, Algorithms: c.Algorithms,
		Leeway: c.Leeway, KeysMaxAge: c.KeysMaxAge, KeysMinRefresh: c.KeysMinRefresh, Now: c.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("OAuth (check --oauth-issuer, --oauth-resource, --oauth-algorithms): %w", err)
	}
	var in *auth.Introspector
	if c.IntrospectionURL != "" {
		in, err = auth.NewIntrospector(auth.IntrospectionOptions{
			URL: c.IntrospectionURL, ClientID: c.IntrospectionClientID, ClientSecret: c.IntrospectionClientSecret,
			Audience: c.Resource, Issuers: c.Issuers, CacheTTL: c.IntrospectionCache, Leeway: c.Leeway, Now: c.Now,
		})
		if err != nil {
			return nil, fmt.Errorf("OAuth introspection (check --oauth-introspection-url): %w", err)
		}
	}
	oa, err := auth.NewOAuth(auth.OAuthOptions{
		Resource: c.Resource, AuthorizationServers: c.Issuers, JWT: jwt, Introspection: in, Claims: c.Claims, ResourceName: "mcpgrain",
		LocalIssuers: c.LocalIssuers,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("OAuth (check --oauth-resource, --oauth-local-issuer): %w", err)
	}
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := jwt.Warm(wctx); err != nil && ctx.Err() == nil {
			log.Warn("OAuth: cannot fetch the authorization server's signing keys yet (access tokens are refused with 503 until it answers)", "issuers", c.Issuers, "err", err)
			return
		}
		log.Info("OAuth resource server ready", "resource", c.Resource, "issuers", c.Issuers, "metadata", oa.MetadataURL(), "introspection", c.IntrospectionURL != "")
	}()
	return oa, nil
}
