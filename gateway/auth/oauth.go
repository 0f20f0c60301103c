package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// wellKnownPRM is RFC 9728's well-known path of protected resource
// metadata.
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// OAuthOptions configure an [OAuth] resource server.
type OAuthOptions struct {
	// Resource is this server's canonical resource URI, e.g.
	// https://mcp.example.com/mcp (required): the resource identifier of
	// its protected resource metadata and the audience every access token
	// must name.
	Resource string
	// AuthorizationServers are the issuer identifiers listed in the
	// metadata (at least one).
	AuthorizationServers []string
	// JWT verifies JWT access tokens locally (nil: JWTs are not verified
	// locally; with Introspection they are introspected).
	JWT *JWTVerifier
	// Introspection verifies tokens that are not JWTs (or every token,
	// without JWT) by asking the authorization server (nil: opaque tokens
	// are refused).
	Introspection *Introspector
	// Claims maps a verified token to a principal.
	Claims ClaimMapping
	// LocalIssuers are the authorization servers whose tokens name
	// principals as the static keys do (sub "alice" with org "acme" is the
	// key's alice in acme). Every other issuer's principals are keyed by
	// issuer: user and organization become "<issuer>#<sub>" and
	// "<issuer>#<org>", so no issuer's token is ever another issuer's
	// principal or a key's ([QualifiedName]). nil: the only authorization
	// server when there is one (a single-issuer deployment's names stay as
	// they are), none when there are several. Each must be one of
	// AuthorizationServers.
	LocalIssuers []string
	// ResourceName, if set, is the metadata's human-readable
	// resource_name.
	ResourceName string
	// Documentation, if set, is the metadata's resource_documentation URL.
	Documentation string
	// Logger logs why tokens could not be checked (the authorization
	// server could not be reached), at most every 10 s. Default
	// slog.Default().
	Logger *slog.Logger
}

// OAuth is the OAuth 2.1 resource server side of the MCP authorization
// spec: it verifies access tokens (a [JWTVerifier], an [Introspector] or
// both), maps them to principals ([ClaimMapping]) and serves the
// protected resource metadata (RFC 9728) that tells clients which
// authorization server issues them. It does not issue tokens. An
// [Authenticator] uses it for bearer tokens that are not static keys
// ([AuthOptions.OAuth]).
type OAuth struct {
	o        OAuthOptions
	issuers  issuerScope
	metaURL  string
	metaPath string
	meta     *oauthex.ProtectedResourceMetadata
	// unreachable spaces out the log lines of an authorization server
	// outage (every request would log one).
	unreachable rate.Sometimes
}

// NewOAuth returns the resource server o describes.
func NewOAuth(o OAuthOptions) (*OAuth, error) {
	if err := checkResourceURI(o.Resource); err != nil {
		return nil, fmt.Errorf("auth: OAuth resource: %w", err)
	}
	if len(o.AuthorizationServers) == 0 {
		return nil, errors.New("auth: OAuth needs at least one authorization server")
	}
	for _, as := range o.AuthorizationServers {
		if err := checkIssuer(as); err != nil {
			return nil, err
		}
	}
	if o.JWT == nil && o.Introspection == nil {
		return nil, errors.New("auth: OAuth needs JWT verification, introspection or both")
	}
	issuers, err := newIssuerScope(o.AuthorizationServers, o.LocalIssuers)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	u, _ := url.Parse(o.Resource) // checked above
	path := strings.TrimRight(u.EscapedPath(), "/")
	meta := &oauthex.ProtectedResourceMetadata{
		Resource:               o.Resource,
		AuthorizationServers:   o.AuthorizationServers,
		ScopesSupported:        o.Claims.Scopes.List(),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           o.ResourceName,
		ResourceDocumentation:  o.Documentation,
	}
	return &OAuth{
		o:           o,
		issuers:     issuers,
		metaPath:    wellKnownPRM + path,
		metaURL:     u.Scheme + "://" + u.Host + wellKnownPRM + path,
		meta:        meta,
		unreachable: rate.Sometimes{Interval: 10 * time.Second},
	}, nil
}

// Resource returns the canonical resource URI.
func (o *OAuth) Resource() string { return o.o.Resource }

// MetadataURL returns the URL of the protected resource metadata: the
// well-known path with the resource's path appended (RFC 9728 §3.1), e.g.
// https://mcp.example.com/.well-known/oauth-protected-resource/mcp. It is
// what 401 challenges name as resource_metadata.
func (o *OAuth) MetadataURL() string { return o.metaURL }

// MetadataPaths returns the paths [OAuth.MetadataHandler] answers: the
// path-suffixed form ([OAuth.MetadataURL]'s path) and, for a resource
// with a path, also the bare well-known path, for clients that only look
// at the root (both serve the same document).
func (o *OAuth) MetadataPaths() []string {
	if o.metaPath == wellKnownPRM {
		return []string{wellKnownPRM}
	}
	return []string{o.metaPath, wellKnownPRM}
}

// Metadata returns the protected resource metadata document.
func (o *OAuth) Metadata() *oauthex.ProtectedResourceMetadata { return o.meta }

// MetadataHandler serves the metadata (go-sdk's
// [sdkauth.ProtectedResourceMetadataHandler]: GET, CORS for browser
// clients).
func (o *OAuth) MetadataHandler() http.Handler {
	return sdkauth.ProtectedResourceMetadataHandler(o.meta)
}

// Scopes returns the scope of each role.
func (o *OAuth) Scopes() RoleScopes { return o.o.Claims.Scopes.withDefaults() }

// Verify checks an access token and returns its principal, keyed by the
// token's issuer ([OAuthOptions.LocalIssuers]). Errors are
// *[Error] without a challenge (the [Authenticator] adds it): 401
// invalid_token for a token that is not valid here (with why), 403
// insufficient_scope for one that grants no role, 503 when the
// authorization server's keys or introspection endpoint could not be
// reached.
func (o *OAuth) Verify(ctx context.Context, token string) (*pb.Principal, error) {
	var verify sdkauth.TokenVerifier
	switch {
	case o.o.JWT != nil && (looksLikeJWT(token) || o.o.Introspection == nil):
		verify = o.o.JWT.Verify
	case o.o.Introspection != nil:
		verify = o.o.Introspection.Verify
	}
	info, err := verify(ctx, token, nil)
	if err != nil {
		var te *tokenError
		if errors.As(err, &te) {
			return nil, &Error{Status: http.StatusUnauthorized, Code: CodeInvalidToken, Message: "access token " + te.msg}
		}
		o.unreachable.Do(func() {
			o.o.Logger.Warn("OAuth: cannot check access tokens: the authorization server could not be reached (answering 503)", "err", err)
		})
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeTemporarilyUnavailable,
			Message: "the authorization server could not be reached to verify the token; retry later", cause: err}
	}
	p, err := o.o.Claims.Principal(info)
	if err != nil {
		return nil, err
	}
	return o.issuers.principal(p, info)
}

// checkResourceURI accepts an absolute http(s) URI without a fragment (a
// canonical resource URI, an issuer identifier or an endpoint).
func checkResourceURI(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("empty")
	case err != nil:
		return err
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%q is not an http(s) URL", s)
	case u.Host == "":
		return fmt.Errorf("%q has no host", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%q has a fragment", s)
	}
	return nil
}
