package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
)

// TestOAuthFlags: the flags become the app's OAuth configuration; the
// resource defaults to --public-url + /mcp; inconsistent combinations are
// usage errors that name the flag.
func TestOAuthFlags(t *testing.T) {
	parseOAuth := func(t *testing.T, env map[string]string, args ...string) (*oauthFlags, error) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o oauthFlags
		o.register(fs)
		return &o, parse(fs, args)
	}
	t.Run("environment and defaults", func(t *testing.T) {
		o, err := parseOAuth(t, map[string]string{"MCPGRAIN_OAUTH_ISSUER": "https://a.example,https://b.example"},
			"--oauth-org-claim", "tenant", "--oauth-member-scope", "approve", "--oauth-leeway", "0s")
		if err != nil {
			t.Fatal(err)
		}
		c, err := o.config("https://mcp.example.com/")
		if err != nil {
			t.Fatal(err)
		}
		if !c.Enabled() || strings.Join(c.Issuers, " ") != "https://a.example https://b.example" || c.Resource != "https://mcp.example.com/mcp" ||
			c.Claims.OrgClaim != "tenant" || c.Claims.UserClaim != auth.DefaultUserClaim || c.Claims.Scopes.For(auth.RoleMember) != "approve" ||
			c.Claims.Scopes.For(auth.RoleViewer) != auth.DefaultViewerScope || c.Leeway >= 0 || len(c.Algorithms) != len(auth.DefaultAlgorithms) {
			t.Fatalf("config %+v", c)
		}
		if c.LocalIssuers != nil {
			t.Fatalf("local issuers %v, want the default (nil)", c.LocalIssuers)
		}
	})
	t.Run("local issuers", func(t *testing.T) {
		o, err := parseOAuth(t, map[string]string{"MCPGRAIN_OAUTH_LOCAL_ISSUER": "https://a.example"},
			"--oauth-issuer", "https://a.example", "--oauth-issuer", "https://b.example", "--oauth-resource", "https://x/mcp")
		if err != nil {
			t.Fatal(err)
		}
		if c, err := o.config(""); err != nil || strings.Join(c.LocalIssuers, " ") != "https://a.example" {
			t.Fatalf("local issuers %v %v", c.LocalIssuers, err)
		}
	})
	if o, _ := parseOAuth(t, nil); mustConfig(t, o).Enabled() {
		t.Fatal("OAuth on without an issuer")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--oauth-issuer", "https://a.example"}, "needs --oauth-resource"},
		{[]string{"--oauth-resource", "https://mcp.example.com/mcp"}, "need --oauth-issuer"},
		{[]string{"--oauth-issuer", "https://a.example", "--oauth-resource", "mcp.example.com/mcp"}, "--oauth-resource"},
		{[]string{"--oauth-local-issuer", "https://a.example"}, "need --oauth-issuer"},
		{[]string{"--oauth-issuer", "https://a.example", "--oauth-resource", "https://x/mcp", "--oauth-local-issuer", "https://b.example"}, "--oauth-local-issuer"},
		{[]string{"--oauth-issuer", "https://a.example", "--oauth-resource", "https://x/mcp", "--oauth-introspection-client-id", "rs"}, "go together"},
		{[]string{"--oauth-issuer", "https://a.example", "--oauth-resource", "https://x/mcp", "--oauth-member-scope", "mcp:read"}, "must differ"},
		{[]string{"--oauth-issuer", "https://a.example", "--oauth-resource", "https://x/mcp", "--oauth-leeway", "1h"}, "--oauth-leeway"},
		{[]string{"--oauth-issuer", "https://a.example", "--oauth-resource", "https://x/mcp", "--oauth-jwks-min-refresh", "1ms"}, "--oauth-jwks-min-refresh"},
	} {
		o, err := parseOAuth(t, nil, tc.args...)
		if err == nil {
			_, err = o.config("")
		}
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

func mustConfig(t *testing.T, o *oauthFlags) interface{ Enabled() bool } {
	t.Helper()
	c, err := o.config("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}
