package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// upstreamServer is a real go-sdk MCP server with a read-only tool "echo"
// and an unannotated tool "plain".
func upstreamServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("echoed"), nil })
	s.AddTool(&mcp.Tool{Name: "plain", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("plain ran"), nil
		})
	return s
}

// TestToolSourceFailuresExitClearly: every tool source that cannot be used
// stops the start with its name, where it was configured and why: exit 2
// for what the command line says (a spec file that is not there, an unset
// ${VAR}, a bad URL or name), exit 1 for what loading finds (an upstream
// refusing, a spec that does not parse). Never a panic. The upstreams are
// real go-sdk servers over HTTP behind a bearer check.
func TestToolSourceFailuresExitClearly(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer() }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/mcp":
			http.NotFound(w, r)
		case r.Header.Get("Authorization") == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="up"`)
			http.Error(w, "sign in", http.StatusUnauthorized)
		case r.Header.Get("Authorization") != "Bearer up-secret":
			http.Error(w, "not for you", http.StatusForbidden)
		default:
			handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.yaml", "openapi: [this is not\n")
	unset := write("unset.json", `{"mcp":[{"name":"gh","url":"`+up.URL+`/mcp","headers":{"Authorization":"Bearer ${MCPGRAIN_TEST_UNSET_TOKEN}"}}]}`)
	wrong := write("wrong.json", `{"mcp":[{"name":"gh","url":"`+up.URL+`/mcp","headers":{"Authorization":"Bearer ${MCPGRAIN_TEST_WRONG_TOKEN}"}}]}`)
	t.Setenv("MCPGRAIN_TEST_WRONG_TOKEN", "not-the-secret")
	_ = os.Unsetenv("MCPGRAIN_TEST_UNSET_TOKEN")

	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"missing spec file", []string{"--openapi", "pets=" + filepath.Join(dir, "missing.yaml")}, 2,
			[]string{`tool source "pets" (--openapi)`, "missing.yaml", "no such file or directory"}},
		{"spec that does not parse", []string{"--openapi", "pets=" + garbage}, 1,
			[]string{`tool source "pets" (--openapi)`, "garbage.yaml"}},
		{"--expose-upstream naming no upstream", []string{"--upstream", "gh=" + up.URL + "/mcp", "--expose-upstream", "nope"}, 2,
			[]string{`--expose-upstream "nope": no upstream source has that name`}},
		{"unset variable in --sources", []string{"--sources", unset}, 2,
			[]string{`tool source "gh" (--sources ` + unset + `)`, "MCPGRAIN_TEST_UNSET_TOKEN"}},
		{"upstream answering 401", []string{"--upstream", "gh=" + up.URL + "/mcp"}, 1,
			[]string{`tool source "gh" (--upstream)`, "HTTP 401 Unauthorized", "refused the credentials"}},
		{"upstream answering 403", []string{"--sources", wrong}, 1,
			[]string{`tool source "gh" (--sources ` + wrong + `)`, "HTTP 403 Forbidden"}},
		{"upstream URL that is not its endpoint", []string{"--upstream", "gh=" + up.URL + "/nope"}, 1,
			[]string{`tool source "gh" (--upstream)`, "HTTP 404 Not Found", "MCP endpoint"}},
		{"upstream URL that is not http", []string{"--upstream", "gh=ftp://example.com/mcp"}, 2,
			[]string{`tool source "gh" (--upstream)`, "not an absolute http(s) URL"}},
		{"name taken by the demo API", []string{"--upstream", "demo=" + up.URL + "/mcp"}, 2,
			[]string{`tool source "demo" (--upstream)`, "another tool source has this name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"dev", "--http", "127.0.0.1:0", "--grpc", "", "--data", t.TempDir()}, tc.args...)
			code, out := runBinary(t, 60*time.Second, args...)
			if strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
				t.Fatalf("mcpgrain panicked (exit %d):\n%s", code, out)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "not-the-secret") {
				t.Errorf("output shows the credential:\n%s", out)
			}
		})
	}
}

// TestUpstreamDownAtStartIsConnectedLater: an upstream MCP server that is
// down when the node starts does not stop it: the node serves its other
// sources, says the upstream is not connected yet (log, metric, the code
// calling it), and connects in the background; once the upstream is up,
// its tools are callable, the read-only one without approval and the
// unannotated one paused for it.
func TestUpstreamDownAtStartIsConnectedLater(t *testing.T) {
	const token = "sources-test-token-0001"
	upAddr := "127.0.0.1:" + itoa(testenv.FreePort(t)) // nothing listens yet
	addr := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cmd := exec.Command(testcluster.Binary(t), "dev", "--http", addr, "--grpc", "", "--data", t.TempDir(),
		"--upstream", "up=http://"+upAddr+"/mcp")
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+token)
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 30*time.Second, "the node ready", out, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(out.String(), "upstream MCP server unavailable; connecting in the background") || !strings.Contains(out.String(), "source=up") {
		t.Errorf("no warning naming the upstream:\n%s", out.String())
	}
	if v, ok := metric(t, addr, `mcpgrain_tool_source_connected`); !ok || v != 0 {
		t.Errorf("mcpgrain_tool_source_connected = %v (%v), want 0", v, ok)
	}

	cs := connectMCP(t, addr, token)
	execute := func(code string) (string, map[string]any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatalf("execute %s: %v", code, err)
		}
		sc := mcpclient.Structured(res)
		status, _ := sc["status"].(string)
		return status, sc
	}
	// The other sources serve; the upstream's tools say why they are missing.
	if status, sc := execute(`return (await tools.demo.listTodos({})).length`); status != "completed" {
		t.Fatalf("demo source while the upstream is down: %v", sc)
	}
	if status, sc := execute(`return await tools.up.echo({})`); status != "error" || !strings.Contains(sc["error"].(string), "upstream MCP server not connected") {
		t.Fatalf("calling the upstream while it is down: %v", sc)
	}

	// The upstream comes up; the node connects on its next retry.
	ln, err := net.Listen("tcp", upAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer() }, nil)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	// Retries back off to 30 s at most: two of them are plenty.
	waitFor(t, 2*time.Minute, "the upstream connected", out, func() bool {
		v, ok := metric(t, addr, `mcpgrain_tool_source_connected`)
		return ok && v == 1
	})
	if !strings.Contains(out.String(), "upstream MCP server connected") {
		t.Errorf("no log of the connection:\n%s", out.String())
	}
	if status, sc := execute(`return await tools.up.echo({})`); status != "completed" || sc["result"] != "echoed" {
		t.Fatalf("read-only upstream tool after connecting: %v", sc)
	}
	if status, sc := execute(`return await tools.up.plain({})`); status != "waiting_for_interaction" || !strings.Contains(sc["interaction"].(map[string]any)["message"].(string), "Approve up.plain?") {
		t.Fatalf("unannotated upstream tool after connecting: %v, want a pause", sc)
	}
}

// connectMCP opens an MCP session on the node at addr.
func connectMCP(t *testing.T, addr, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "sources-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: mcpclient.Bearer(token, nil)}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// waitFor polls ok until it holds, failing after limit with the output.
func waitFor(t *testing.T, limit time.Duration, what string, out *testenv.SyncBuffer, ok func() bool) {
	t.Helper()
	for began := time.Now(); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Since(began) > limit {
			t.Fatalf("not %s within %s; output:\n%s", what, limit, out.String())
		}
	}
}
