package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
)

// clientCredentials are the flags with which a CLI command gets its own
// OAuth access token (RFC 6749 §4.4, the client credentials grant) instead
// of being given one.
type clientCredentials struct {
	tokenURL, clientID, secret string
	scope, audience, resource  string
}

func (c *clientCredentials) register(fs *flag.FlagSet) {
	fs.StringVar(&c.tokenURL, "oauth-token-url", "", "get an access token from this OAuth token endpoint with the client credentials grant (instead of --token)")
	fs.StringVar(&c.clientID, "oauth-client-id", "", "OAuth client id for --oauth-token-url")
	fs.StringVar(&c.secret, "oauth-client-secret", "", "OAuth client secret for --oauth-client-id; prefer --oauth-client-secret-file or MCPGRAIN_OAUTH_CLIENT_SECRET")
	fs.StringVar(&c.scope, "oauth-scope", auth.DefaultMemberScope, "scopes to ask for, space-separated (with a node's default scopes "+auth.DefaultViewerScope+" only sees; "+auth.DefaultMemberScope+" also decides)")
	fs.StringVar(&c.audience, "oauth-audience", "", "audience parameter to send (authorization servers such as Hydra and Auth0 put it in the token's aud): the node's --oauth-resource")
	fs.StringVar(&c.resource, "oauth-resource", "", "RFC 8707 resource parameter to send (the node's --oauth-resource), for authorization servers that read it")
}

// set reports whether the grant was asked for.
func (c *clientCredentials) set() bool { return c.tokenURL != "" }

// token gets an access token.
func (c *clientCredentials) token(ctx context.Context, timeout time.Duration) (string, error) {
	if c.clientID == "" || c.secret == "" {
		return "", fmt.Errorf("%w: --oauth-token-url needs --oauth-client-id and --oauth-client-secret-file (or MCPGRAIN_OAUTH_CLIENT_SECRET)", errUsage)
	}
	if u, err := url.Parse(c.tokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("%w: --oauth-token-url %q: want an http(s) URL", errUsage, c.tokenURL)
	}
	params := url.Values{}
	if c.audience != "" {
		params.Set("audience", c.audience)
	}
	if c.resource != "" {
		params.Set("resource", c.resource)
	}
	cfg := clientcredentials.Config{ClientID: c.clientID, ClientSecret: c.secret, TokenURL: c.tokenURL,
		Scopes: strings.Fields(c.scope), EndpointParams: params}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: timeout})
	tok, err := cfg.Token(ctx)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return "", fmt.Errorf("client credentials grant at %s refused: %s %s", c.tokenURL, re.ErrorCode, re.ErrorDescription)
		}
		return "", fmt.Errorf("client credentials grant at %s: %w", c.tokenURL, err)
	}
	return tok.AccessToken, nil
}
