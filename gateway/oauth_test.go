package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The OAuth suite: a real authorization server (Ory Hydra, started by
// testenv.StartHydra) issues client-credentials access tokens; a node is
// its resource server. Each client is a principal: its client id is the
// user (sub), the token hook adds its organization, its scopes its role.
const (
	acmeMember   = "acme-member"   // org acme, mcp:read mcp:approve
	acmeGo       = "acme-go"       // org acme, mcp:read (go-sdk's client; client_secret_post)
	acmeViewer   = "acme-viewer"   // org acme, mcp:read
	acmeTS       = "acme-ts"       // org acme, mcp:read (the TypeScript client)
	globexMember = "globex-member" // org globex, mcp:read mcp:approve
	noOrgClient  = "no-org"        // no org claim
	noRoleClient = "no-role"       // org acme, a scope that grants no role
	acmeOpaque   = "acme-opaque"   // org acme, opaque tokens
	clientSecret = "client-secret-0123456789"
	otherAud     = "https://other.example/mcp"
)

// offsetClock is the real clock moved by an offset: tokens Hydra issues
// now are valid on it, and a test expires them by moving it on.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// oauthEnv is a node that accepts Hydra's access tokens.
type oauthEnv struct {
	hydra    *testenv.Hydra
	info     app.Info
	resource string
	clock    *offsetClock
}

// startOAuthNode starts Hydra with the suite's clients and a code-mode node
// (static keys too: alice, bob, carol) that accepts its access tokens for
// the resource http://<node>/mcp.
func startOAuthNode(t *testing.T, tweak func(*app.Config, *oauthEnv)) *oauthEnv {
	t.Helper()
	h := testenv.StartHydra(t, testenv.HydraOptions{})
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	e := &oauthEnv{hydra: h, resource: "http://" + addr + "/mcp", clock: &offsetClock{}}
	both := []string{e.resource, otherAud}
	for _, c := range []testenv.HydraClient{
		{ID: acmeMember, Scopes: []string{"mcp:read", "mcp:approve"}, Claims: map[string]any{"org": "acme"}},
		{ID: acmeViewer, Scopes: []string{"mcp:read"}, Claims: map[string]any{"org": "acme"}},
		{ID: acmeGo, Scopes: []string{"mcp:read"}, Claims: map[string]any{"org": "acme"}, AuthMethod: "client_secret_post"},
		{ID: acmeTS, Scopes: []string{"mcp:read"}, Claims: map[string]any{"org": "acme"}},
		{ID: globexMember, Scopes: []string{"mcp:read", "mcp:approve"}, Claims: map[string]any{"org": "globex"}},
		{ID: noOrgClient, Scopes: []string{"mcp:read"}},
		{ID: noRoleClient, Scopes: []string{"profile"}, Claims: map[string]any{"org": "acme"}},
		{ID: acmeOpaque, Scopes: []string{"mcp:read", "mcp:approve"}, Claims: map[string]any{"org": "acme"}, Opaque: true},
	} {
		c.Secret, c.Audiences = clientSecret, both
		h.CreateClient(t, c)
	}
	e.info = startCodeNode(t, func(c *app.Config) {
		c.HTTP = addr
		c.MCP.OAuth = app.OAuthConfig{Issuers: []string{h.Issuer()}, Resource: e.resource, Now: e.clock.Now}
		if tweak != nil {
			tweak(c, e)
		}
	})
	return e
}

// token gets an access token of client for this node.
func (e *oauthEnv) token(t *testing.T, client string, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{"mcp:read"}
	}
	return e.hydra.Token(t, client, clientSecret, scopes, e.resource)
}

// initialize posts an MCP initialize request with token ("" none).
func (e *oauthEnv) initialize(t *testing.T, token string) rawResponse {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return raw(t, "POST", e.info.HTTPAddr, h, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
}

// challenge is what a refusal must say: the status and the parts of its
// WWW-Authenticate header.
func (e *oauthEnv) expectRefused(t *testing.T, what string, r rawResponse, status int, parts ...string) {
	t.Helper()
	www := r.header.Get("WWW-Authenticate")
	if r.status != status {
		t.Fatalf("%s: %d %s (WWW-Authenticate %s), want %d", what, r.status, r.body, www, status)
	}
	parts = append(parts, `resource_metadata="`+e.metadataURL()+`"`)
	for _, p := range parts {
		if !strings.Contains(www, p) {
			t.Fatalf("%s: WWW-Authenticate %s lacks %s", what, www, p)
		}
	}
}

func (e *oauthEnv) metadataURL() string {
	return "http://" + e.info.HTTPAddr + "/.well-known/oauth-protected-resource/mcp"
}

// TestOAuthClientsAuthorizeThemselves: go-sdk's MCP client (with its
// client-credentials OAuth handler) and the official TypeScript SDK's
// client (with its ClientCredentialsProvider) start without a token, get
// the 401, discover the authorization server through the protected
// resource metadata, get a token and work — as principals of the token's
// organization, visible to a static key of the same organization.
func TestOAuthClientsAuthorizeThemselves(t *testing.T) {
	e := startOAuthNode(t, nil)

	t.Run("go-sdk", func(t *testing.T) {
		h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
			Credentials: &oauthex.ClientCredentials{ClientID: acmeGo, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: clientSecret}},
			HTTPClient:  &http.Client{Transport: e.hydra.AudienceTransport(nil, e.resource)},
		})
		if err != nil {
			t.Fatal(err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-oauth"}, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.resource, OAuthHandler: h}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect through the OAuth flow: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		execID := pause(t, cs, "waiting_for_interaction")
		// alice (a static key, acme) sees the OAuth client's pause: one
		// principal model, whichever way the principal signed in.
		r := api(t, "GET", "http://"+e.info.HTTPAddr+"/api/executions/"+execID, aliceToken, "")
		owner := executionOwner(r)
		if r.status != 200 || owner["user"] != acmeGo || owner["org"] != "acme" {
			t.Fatalf("alice's view of the go-sdk client's pause: %d %v", r.status, r.body)
		}
	})

	t.Run("typescript-sdk", func(t *testing.T) {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(root, "tools", "tsclient", "oauth-client.mjs")
		if _, err := os.Stat(filepath.Join(root, "tools", "tsclient", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
			testenv.Unavailable(t, "the TypeScript SDK is not installed (run: npm ci --prefix tools/tsclient)")
		}
		node, err := exec.LookPath("node")
		if err != nil {
			testenv.Unavailable(t, "no node on PATH")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, script)
		args, _ := json.Marshal(map[string]any{"code": createCode})
		cmd.Env = append(os.Environ(), "MCP_URL="+e.resource, "OAUTH_CLIENT_ID="+acmeTS, "OAUTH_CLIENT_SECRET="+clientSecret, "OAUTH_SCOPE=mcp:read", "OAUTH_ISSUER="+e.hydra.Issuer(),
			"OAUTH_AUDIENCE="+e.resource, "MCP_TOOL=execute", "MCP_ARGS="+string(args))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("TypeScript client: %v\n%s\n%s", err, out, stderr.String())
		}
		var res struct {
			Tools  []string `json:"tools"`
			Result struct {
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
			Scope    string   `json:"scope"`
			Requests []string `json:"requests"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("TypeScript client output %q: %v", out, err)
		}
		if !strings.Contains(strings.Join(res.Tools, ","), "execute") || res.Result.StructuredContent["status"] != "waiting_for_interaction" {
			t.Fatalf("TypeScript client: %s", out)
		}
		if len(res.Requests) == 0 || res.Requests[0] != "POST /mcp 401" || res.Scope != "mcp:read" {
			t.Fatalf("TypeScript client did not go through the challenge (scope %q): %v", res.Scope, res.Requests)
		}
		execID, _ := res.Result.StructuredContent["executionId"].(string)
		r := api(t, "GET", "http://"+e.info.HTTPAddr+"/api/executions/"+execID, aliceToken, "")
		owner := executionOwner(r)
		if r.status != 200 || owner["user"] != acmeTS || owner["org"] != "acme" {
			t.Fatalf("alice's view of the TypeScript client's pause: %d %v", r.status, r.body)
		}
	})
}

// TestOAuthRefusesTokensThatAreNotForThisServer: the metadata names the
// authorization server; tokens for another audience, expired ones, ones
// signed by a key the server rotated out, forged ones, and ones naming no
// organization get 401 invalid_token, a token without a role scope 403
// insufficient_scope — each with the challenge clients act on. Static
// keys keep working beside OAuth.
func TestOAuthRefusesTokensThatAreNotForThisServer(t *testing.T) {
	e := startOAuthNode(t, nil)

	// Discovery: the challenge and the metadata it names.
	e.expectRefused(t, "no token", e.initialize(t, ""), 401, `scope="mcp:read"`)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get("http://" + e.info.HTTPAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		var meta oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || meta.Resource != e.resource || len(meta.AuthorizationServers) != 1 ||
			meta.AuthorizationServers[0] != e.hydra.Issuer() || !strings.Contains(strings.Join(meta.ScopesSupported, " "), "mcp:approve") {
			t.Fatalf("GET %s: %d %+v %v", path, resp.StatusCode, meta, err)
		}
	}

	good := e.token(t, acmeMember)
	if r := e.initialize(t, good); r.status != 200 {
		t.Fatalf("a good token: %d %s", r.status, r.body)
	}
	if r := e.initialize(t, aliceToken); r.status != 200 {
		t.Fatalf("a static key beside OAuth: %d %s", r.status, r.body)
	}
	e.expectRefused(t, "another audience", e.initialize(t, e.hydra.Token(t, acmeMember, clientSecret, []string{"mcp:read"}, otherAud)),
		401, `error="invalid_token"`, "not issued for this resource")
	e.expectRefused(t, "no audience", e.initialize(t, e.hydra.Token(t, acmeMember, clientSecret, []string{"mcp:read"}, "")),
		401, `error="invalid_token"`, "not issued for this resource")
	e.expectRefused(t, "no organization", e.initialize(t, e.token(t, noOrgClient)), 401, `error="invalid_token"`, `no \"org\" claim`)
	e.expectRefused(t, "no role scope", e.initialize(t, e.token(t, noRoleClient, "profile")), 403, `error="insufficient_scope"`, `scope="mcp:read"`)
	forged := good[:len(good)-8] + "AAAAAAAA"
	e.expectRefused(t, "forged signature", e.initialize(t, forged), 401, `error="invalid_token"`, "bad signature")

	// Expiry: Hydra's tokens live an hour.
	e.clock.Advance(time.Hour + time.Minute)
	e.expectRefused(t, "expired", e.initialize(t, good), 401, `error="invalid_token"`, "expired")
	e.clock.Advance(-(time.Hour + time.Minute))

	// Key rotation: Hydra signs with a new key and stops publishing the
	// old one. The first token of the new key makes the node fetch the
	// key set again (the clock moves past the refresh interval, so this
	// does not depend on how many fetches the node made before); the old
	// key's tokens are refused from then on.
	e.hydra.RotateKeys(t)
	fresh := e.token(t, acmeMember)
	e.clock.Advance(auth.DefaultKeysMinRefresh)
	if r := e.initialize(t, fresh); r.status != 200 {
		t.Fatalf("a token of the new key: %d %s", r.status, r.body)
	}
	e.expectRefused(t, "rotated-out key", e.initialize(t, good), 401, `error="invalid_token"`, "signed by a key the issuer does not publish")
}

// TestOAuthOrganizationsAreTenants: a token of another organization is
// refused on every surface exactly as a static key of one is (403 on the
// session, not found for its executions), a viewer token sees but may not
// decide (403 naming the scope that would), a member token decides.
func TestOAuthOrganizationsAreTenants(t *testing.T) {
	e := startOAuthNode(t, nil)
	acme := connectMode(t, e.info.HTTPAddr, e.token(t, acmeMember, "mcp:read", "mcp:approve"), "")
	execID := pause(t, acme, "waiting_for_interaction")
	base := "http://" + e.info.HTTPAddr
	globex := e.token(t, globexMember, "mcp:read", "mcp:approve")

	r := raw(t, "POST", e.info.HTTPAddr, map[string]string{"Authorization": "Bearer " + globex, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": acme.ID(), "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.status != 403 || rpcCode(t, r.body) != -32003 {
		t.Fatalf("globex on acme's session: %d %s", r.status, r.body)
	}
	for what, res := range map[string]apiResponse{
		"get":    api(t, "GET", base+"/api/executions/"+execID, globex, ""),
		"decide": api(t, "POST", base+"/api/executions/"+execID+"/resume", globex, `{"action":"accept"}`),
	} {
		if res.status != 404 || res.body["error"] != "execution_not_found" {
			t.Fatalf("globex %s: %d %v", what, res.status, res.body)
		}
	}
	if l := api(t, "GET", base+"/api/executions", globex, ""); l.status != 200 || len(l.body["executions"].([]any)) != 0 {
		t.Fatalf("globex list: %d %v", l.status, l.body)
	}
	grpcClient := approvalClient(t, e.info.GRPCAddr)
	if _, err := grpcClient.GetPausedExecution(withToken(t, globex), &pb.GetPausedExecutionRequest{ExecutionId: execID}); status.Code(err) != codes.NotFound {
		t.Fatalf("globex over gRPC: %v", err)
	}

	viewer := e.token(t, acmeViewer)
	if l := api(t, "GET", base+"/api/executions", viewer, ""); l.status != 200 || len(l.body["executions"].([]any)) != 1 {
		t.Fatalf("acme viewer list: %d %v", l.status, l.body)
	}
	req, _ := http.NewRequest("POST", base+"/api/executions/"+execID+"/resume", strings.NewReader(`{"action":"accept"}`))
	req.Header.Set("Authorization", "Bearer "+viewer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if www := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 403 || !strings.Contains(www, `error="insufficient_scope"`) || !strings.Contains(www, `scope="mcp:approve"`) {
		t.Fatalf("acme viewer deciding: %d, WWW-Authenticate %q", resp.StatusCode, www)
	}
	if _, err := grpcClient.DecideExecution(withToken(t, viewer), &pb.DecideExecutionRequest{ExecutionId: execID, Action: "accept"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("acme viewer deciding over gRPC: %v", err)
	}

	if d := api(t, "POST", base+"/api/executions/"+execID+"/resume", e.token(t, acmeMember, "mcp:approve"), `{"action":"accept"}`); d.status != 200 {
		t.Fatalf("acme member deciding: %d %v", d.status, d.body)
	}
	if res, _ := callTool(t, acme, "resume", map[string]any{"executionId": execID}); res.IsError {
		t.Fatalf("resume after the decision: %s", mcpclient.Text(res))
	}
	if n := len(todos(t, e.info.HTTPAddr, e.token(t, acmeMember, "mcp:read"))); n != 1 {
		t.Fatalf("%d to-dos, want 1", n)
	}
}

// TestOAuthApprovalSurfacesAcceptAccessTokens: the approval surfaces take
// access tokens like keys: gRPC metadata, the page's sign-in link, and
// the CLI — with a token in MCPGRAIN_TOKEN, or getting one itself with the
// client credentials grant.
func TestOAuthApprovalSurfacesAcceptAccessTokens(t *testing.T) {
	bin := testcluster.Binary(t)
	e := startOAuthNode(t, nil)
	cs := connectMode(t, e.info.HTTPAddr, aliceToken, "")
	first := pause(t, cs, "waiting_for_interaction")
	second := pause(t, cs, "waiting_for_interaction")
	member := e.token(t, acmeMember, "mcp:approve")

	l, err := approvalClient(t, e.info.GRPCAddr).ListPausedExecutions(withToken(t, member), &pb.ListPausedExecutionsRequest{})
	if err != nil || len(l.GetExecutions()) != 2 {
		t.Fatalf("gRPC list with an access token: %v %v", l, err)
	}

	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get("http://" + e.info.HTTPAddr + "/approve/" + first + "?token=" + member)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "createTodo") || !strings.Contains(string(page), "Approve") {
		t.Fatalf("page signed in with an access token: %d\n%s", resp.StatusCode, page)
	}

	// The CLI with a token from the environment.
	cmd := exec.Command(bin, "approve", "list", "-q", "--grpc", e.info.GRPCAddr)
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+e.token(t, acmeViewer))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), first) || !strings.Contains(string(out), second) {
		t.Fatalf("CLI with MCPGRAIN_TOKEN: %v\n%s", err, out)
	}
	// The CLI getting its own token.
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(clientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cc := []string{"--grpc", e.info.GRPCAddr, "--oauth-token-url", e.hydra.TokenURL(), "--oauth-client-id", acmeMember,
		"--oauth-client-secret-file", secretFile, "--oauth-audience", e.resource}
	out2, err := mcpgrainCLI(t, bin, append([]string{"approve", "accept", first}, cc...)...)
	if err != nil || strings.TrimSpace(out2) != first+": accepted" {
		t.Fatalf("CLI accept with the client credentials grant: %v\n%s", err, out2)
	}
	out3, err := mcpgrainCLI(t, bin, append([]string{"approve", "decline", second, "--oauth-scope", "mcp:read"}, cc...)...)
	if err == nil || !strings.Contains(out3, "insufficient_role") {
		t.Fatalf("CLI decline with a read-only token: %v\n%s", err, out3)
	}
	out4, err := mcpgrainCLI(t, bin, "approve", "list", "--grpc", e.info.GRPCAddr, "--oauth-token-url", e.hydra.TokenURL(),
		"--oauth-client-id", acmeMember, "--oauth-client-secret", "wrong-secret", "--oauth-audience", e.resource)
	if err == nil || !strings.Contains(out4, "invalid_client") {
		t.Fatalf("CLI with a wrong client secret: %v\n%s", err, out4)
	}
}

// TestOAuthOpaqueTokensAreIntrospected: with an introspection endpoint,
// opaque access tokens are checked there (Hydra's answers carry the hook's
// claims under "ext", hence --oauth-org-claim ext.org), while JWTs are
// still verified locally.
func TestOAuthOpaqueTokensAreIntrospected(t *testing.T) {
	e := startOAuthNode(t, func(c *app.Config, e *oauthEnv) {
		c.MCP.OAuth.IntrospectionURL = e.hydra.IntrospectionURL()
		c.MCP.OAuth.Claims.OrgClaim = "ext.org"
	})
	opaque := e.token(t, acmeOpaque, "mcp:read", "mcp:approve")
	if strings.Count(opaque, ".") == 2 {
		t.Fatalf("not an opaque token: %s", opaque)
	}
	cs := connectMode(t, e.info.HTTPAddr, opaque, "")
	execID := pause(t, cs, "waiting_for_interaction")
	r := api(t, "GET", "http://"+e.info.HTTPAddr+"/api/executions/"+execID, e.token(t, acmeViewer), "")
	owner := executionOwner(r)
	if r.status != 200 || owner["user"] != acmeOpaque || owner["org"] != "acme" {
		t.Fatalf("the JWT viewer's view of the opaque client's pause: %d %v", r.status, r.body)
	}
	e.expectRefused(t, "unknown opaque token", e.initialize(t, "ory_at_unknown.token"), 401, `error="invalid_token"`, "not active")
	e.expectRefused(t, "opaque token for another audience",
		e.initialize(t, e.hydra.Token(t, acmeOpaque, clientSecret, []string{"mcp:read"}, otherAud)), 401, "not issued for this resource")
}

// executionOwner reads the owner of an API answer for one execution.
func executionOwner(r apiResponse) map[string]any {
	ex, _ := r.body["execution"].(map[string]any)
	owner, _ := ex["owner"].(map[string]any)
	return owner
}
