package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// TestOAuthClusterBehindOnePublicURL: two `mcpgrain node` processes
// configured by their flags (--oauth-issuer, --oauth-resource) as they
// would run behind a load balancer at one public URL. Both accept the
// access tokens issued for that URL — a session created through one node
// is reachable through the other with the same token — both name the
// public URL (not their own address) in the metadata and challenges, and
// a token of another organization is refused on either.
func TestOAuthClusterBehindOnePublicURL(t *testing.T) {
	const public = "https://mcp.example.test/mcp"
	h := testenv.StartHydra(t, testenv.HydraOptions{})
	for _, c := range []testenv.HydraClient{
		{ID: acmeMember, Scopes: []string{"mcp:read", "mcp:approve"}, Claims: map[string]any{"org": "acme"}},
		{ID: globexMember, Scopes: []string{"mcp:read"}, Claims: map[string]any{"org": "globex"}},
	} {
		c.Secret, c.Audiences = clientSecret, []string{public}
		h.CreateClient(t, c)
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 2, ExtraArgs: []string{
		"--tools", "demo", "--oauth-issuer", h.Issuer(), "--oauth-resource", public,
	}})
	acme := h.Token(t, acmeMember, clientSecret, []string{"mcp:read"}, public)
	globex := h.Token(t, globexMember, clientSecret, []string{"mcp:read"}, public)

	headers := func(token, sid string) map[string]string {
		m := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
		if token != "" {
			m["Authorization"] = "Bearer " + token
		}
		if sid != "" {
			m["Mcp-Session-Id"] = sid
		}
		return m
	}
	opened := raw(t, "POST", c.Node(0).HTTP, headers(acme, ""), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := opened.header.Get("Mcp-Session-Id")
	if opened.status != 200 || sid == "" {
		t.Fatalf("initialize through node 1 with an access token: %d %s", opened.status, opened.body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if r := raw(t, "POST", c.Node(1).HTTP, headers(acme, sid), list); r.status != 200 || !strings.Contains(string(r.body), "tools") {
		t.Fatalf("the session through node 2 with the same token: %d %s", r.status, r.body)
	}
	for i := range 2 {
		if r := raw(t, "POST", c.Node(i).HTTP, headers(globex, sid), list); r.status != 403 {
			t.Fatalf("globex on acme's session through node %d: %d %s", i+1, r.status, r.body)
		}
		r := raw(t, "POST", c.Node(i).HTTP, headers("", ""), list)
		if www := r.header.Get("WWW-Authenticate"); r.status != 401 || !strings.Contains(www, `resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`) {
			t.Fatalf("node %d without a token: %d, WWW-Authenticate %q", i+1, r.status, www)
		}
		resp, err := http.Get("http://" + c.Node(i).HTTP + "/.well-known/oauth-protected-resource/mcp")
		if err != nil {
			t.Fatal(err)
		}
		var meta oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || meta.Resource != public || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != h.Issuer() {
			t.Fatalf("node %d metadata: %+v %v", i+1, meta, err)
		}
	}
	// The static key of the test cluster still works beside OAuth.
	if r := raw(t, "POST", c.Node(1).HTTP, headers(testcluster.Token, ""), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); r.status != 200 {
		t.Fatalf("the static key: %d %s", r.status, r.body)
	}
}
