package cli

import (
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// oauthFlags are the flags of the OAuth resource server (the MCP
// authorization spec): which authorization servers' access tokens a node
// accepts, and how their claims become principals.
type oauthFlags struct {
	issuers, localIssuers                listFlag
	resource, jwksURL, algorithms        string
	leeway, keysMaxAge, keysMinRefresh   time.Duration
	introURL, introClient, introSecret   string
	introCache                           time.Duration
	userClaim, orgClaim, roleClaim       string
	defaultOrg                           string
	adminScope, memberScope, viewerScope string
}

func (o *oauthFlags) register(fs *flag.FlagSet) {
	fs.Var(&o.issuers, "oauth-issuer", "issuer URL of an OAuth authorization server whose access tokens are accepted besides the static keys (repeatable; its metadata and keys are found by discovery); none: OAuth off")
	fs.Var(&o.localIssuers, "oauth-local-issuer", "an --oauth-issuer whose tokens name principals as the static keys do (sub alice, org acme is the key's alice in acme); other issuers' principals are keyed by issuer (<issuer>#<sub>, <issuer>#<org>). Repeatable; default: the only --oauth-issuer when there is one, none when there are several")
	fs.StringVar(&o.resource, "oauth-resource", "", "canonical resource URI of /mcp as clients reach it, e.g. https://mcp.example.com/mcp: access tokens must name it in aud (default: --public-url + /mcp)")
	fs.StringVar(&o.jwksURL, "oauth-jwks-url", "", "JWKS URL of the (single) issuer, if it publishes no discovery metadata")
	fs.StringVar(&o.algorithms, "oauth-algorithms", strings.Join(auth.DefaultAlgorithms, ","), "JWT signature algorithms accepted (never none or HMAC)")
	fs.DurationVar(&o.leeway, "oauth-leeway", auth.DefaultLeeway, "clock skew tolerated on a token's exp, nbf and iat")
	fs.DurationVar(&o.keysMaxAge, "oauth-jwks-max-age", auth.DefaultKeysMaxAge, "fetch an issuer's signing keys again when they are this old (a removed key stops working within this time)")
	fs.DurationVar(&o.keysMinRefresh, "oauth-jwks-min-refresh", auth.DefaultKeysMinRefresh, "least time between two fetches of an issuer's keys (a token naming an unknown key id triggers one: key rotation)")
	fs.StringVar(&o.introURL, "oauth-introspection-url", "", "RFC 7662 introspection endpoint: opaque (non-JWT) access tokens are checked there")
	fs.StringVar(&o.introClient, "oauth-introspection-client-id", "", "client id this node authenticates with at the introspection endpoint (HTTP Basic)")
	fs.StringVar(&o.introSecret, "oauth-introspection-secret", "", "client secret for --oauth-introspection-client-id; prefer --oauth-introspection-secret-file or MCPGRAIN_OAUTH_INTROSPECTION_SECRET")
	fs.DurationVar(&o.introCache, "oauth-introspection-cache", auth.DefaultIntrospectionCache, "reuse an active token's introspection answer this long (a revoked token works this much longer); negative: ask every time")
	fs.StringVar(&o.userClaim, "oauth-user-claim", auth.DefaultUserClaim, "claim naming the user (dots follow nested objects, e.g. ext.email)")
	fs.StringVar(&o.orgClaim, "oauth-org-claim", auth.DefaultOrgClaim, "claim naming the organization (tenant); tokens without it are refused unless --oauth-default-org")
	fs.StringVar(&o.defaultOrg, "oauth-default-org", "", "organization of tokens without the org claim (single-organization deployments)")
	fs.StringVar(&o.roleClaim, "oauth-role-claim", "", "claim holding a role (admin, member, viewer) or a list of them; the principal gets the highest role it or the scopes grant")
	fs.StringVar(&o.adminScope, "oauth-admin-scope", auth.DefaultAdminScope, "scope that grants the admin role")
	fs.StringVar(&o.memberScope, "oauth-member-scope", auth.DefaultMemberScope, "scope that grants the member role (decides paused executions)")
	fs.StringVar(&o.viewerScope, "oauth-viewer-scope", auth.DefaultViewerScope, "scope that grants the viewer role (uses /mcp, sees paused executions, never decides); the scope a 401 asks for")
}

// config returns the app's OAuth configuration (zero without
// --oauth-issuer). publicURL is --public-url (the default resource's
// origin).
func (o *oauthFlags) config(publicURL string) (app.OAuthConfig, error) {
	if len(o.issuers) == 0 {
		if o.resource != "" || o.introURL != "" || o.jwksURL != "" || len(o.localIssuers) > 0 {
			return app.OAuthConfig{}, fmt.Errorf("%w: --oauth-resource, --oauth-jwks-url, --oauth-introspection-url and --oauth-local-issuer need --oauth-issuer", errUsage)
		}
		return app.OAuthConfig{}, nil
	}
	for _, iss := range o.localIssuers {
		if !slices.Contains(o.issuers, iss) {
			return app.OAuthConfig{}, fmt.Errorf("%w: --oauth-local-issuer %q is not one of the --oauth-issuer values", errUsage, iss)
		}
	}
	resource, err := o.resourceURI(publicURL)
	if err != nil {
		return app.OAuthConfig{}, err
	}
	if err := o.checkTimesAndIntrospection(); err != nil {
		return app.OAuthConfig{}, err
	}
	scopes := auth.RoleScopes{Admin: o.adminScope, Member: o.memberScope, Viewer: o.viewerScope}
	if l := scopes.List(); l[0] == l[1] || l[1] == l[2] || l[0] == l[2] {
		return app.OAuthConfig{}, fmt.Errorf("%w: --oauth-admin-scope, --oauth-member-scope and --oauth-viewer-scope must differ", errUsage)
	}
	leeway := o.leeway
	if leeway == 0 {
		leeway = -1 // auth: negative is none; zero would be the default
	}
	return app.OAuthConfig{
		Issuers: o.issuers, Resource: resource, JWKSURL: o.jwksURL, Algorithms: splitList(o.algorithms),
		Leeway: leeway, KeysMaxAge: o.keysMaxAge, KeysMinRefresh: o.keysMinRefresh,
		IntrospectionURL: o.introURL, IntrospectionClientID: o.introClient, IntrospectionClientSecret: o.introSecret,
		IntrospectionCache: o.introCache,
		Claims:             auth.ClaimMapping{UserClaim: o.userClaim, OrgClaim: o.orgClaim, RoleClaim: o.roleClaim, DefaultOrg: o.defaultOrg, Scopes: scopes},
		LocalIssuers:       o.localIssuers,
	}, nil
}

// resourceURI is --oauth-resource, or else --public-url + /mcp: an
// absolute http(s) URL without fragment.
func (o *oauthFlags) resourceURI(publicURL string) (string, error) {
	resource := o.resource
	if resource == "" && publicURL != "" {
		resource = strings.TrimRight(publicURL, "/") + "/mcp"
	}
	if resource == "" {
		return "", fmt.Errorf("%w: --oauth-issuer needs --oauth-resource (the URL clients reach /mcp at, e.g. https://mcp.example.com/mcp) or --public-url", errUsage)
	}
	if u, err := url.Parse(resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: --oauth-resource %q: want an absolute http(s) URL without fragment", errUsage, resource)
	}
	return resource, nil
}

// checkTimesAndIntrospection checks the token and key times, and that the
// introspection flags go together.
func (o *oauthFlags) checkTimesAndIntrospection() error {
	switch {
	case o.leeway < 0 || o.leeway > 5*time.Minute:
		return fmt.Errorf("%w: --oauth-leeway must be between 0 and 5m", errUsage)
	case o.keysMaxAge < time.Second || o.keysMinRefresh < time.Second:
		return fmt.Errorf("%w: --oauth-jwks-max-age and --oauth-jwks-min-refresh must be at least 1s", errUsage)
	case (o.introClient == "") != (o.introSecret == ""):
		return fmt.Errorf("%w: --oauth-introspection-client-id and --oauth-introspection-secret go together", errUsage)
	case o.introClient != "" && o.introURL == "":
		return fmt.Errorf("%w: --oauth-introspection-client-id needs --oauth-introspection-url", errUsage)
	}
	return nil
}
