package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// node is a running hello binary.
type node struct {
	cmd      *exec.Cmd
	endpoint string
	exited   chan struct{} // closed when the process has exited
	err      error         // its exit, once exited is closed
}

// endpointIn returns the MCP endpoint a line of the node's banner names:
// dev's "MCP endpoint:  URL", node's "... ready: http ADDR, ...".
func endpointIn(line string) string {
	if f := strings.Fields(line); len(f) == 3 && f[0]+f[1] == "MCPendpoint:" {
		return f[2]
	}
	if _, rest, ok := strings.Cut(line, " ready: http "); ok {
		addr, _, _ := strings.Cut(rest, ",")
		return "http://" + addr + "/mcp"
	}
	return ""
}

// start builds examples/hello (once per test process) and runs it with args; it returns once the
// dev banner has named the node's MCP endpoint.
func start(t *testing.T, args ...string) *node {
	t.Helper()
	bin := testcluster.Build(t, "./examples/hello")
	cmd := exec.Command(bin, args...)
	cmd.Stderr = t.Output() // the node's logs, shown when the test fails
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if endpoint := endpointIn(sc.Text()); endpoint != "" {
				found <- endpoint
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		n.err = cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-n.exited })
	select {
	case n.endpoint = <-found:
	case <-n.exited:
		t.Fatalf("hello exited before serving: %v", n.err)
	case <-time.After(60 * time.Second):
		t.Fatal("hello printed no MCP endpoint within 60s")
	}
	return n
}

// connect opens a go-sdk client session to the node in a protocol era
// ("": go-sdk's default, 2026-07-28).
func (n *node) connect(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "hello-test", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: n.endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%q): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// toolNames lists the session's tools.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// The example, built and run as a process (`hello dev`), serves its own
// tool instead of the built-in packs, to a stateful-session client and a
// 2026-07-28 client alike, and stops cleanly on SIGTERM.
func TestHelloDevServesGreetInBothEras(t *testing.T) {
	n := start(t, "dev", "--no-auth", "--http", "127.0.0.1:0", "--grpc", "", "--data", t.TempDir())
	for _, version := range []string{"2025-11-25", ""} {
		cs := n.connect(t, version)
		if got := toolNames(t, cs); !slices.Equal(got, []string{"greet"}) {
			t.Fatalf("era %q: tools %v, want [greet] (the user's server only)", version, got)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
		if err != nil || res.IsError {
			t.Fatalf("era %q: greet: %v %+v", version, err, res)
		}
		if got := mcpclient.Text(res); got != "Hello, Ada!" {
			t.Fatalf("era %q: greet says %q, want %q", version, got, "Hello, Ada!")
		}
		if info := cs.InitializeResult(); version != "" && (info == nil || info.ServerInfo.Name != "hello") {
			t.Fatalf("era %q: server info %+v, want hello", version, info)
		}
	}
	t.Run("typescript-sdk", func(t *testing.T) { callWithTypeScript(t, n) })
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if n.err != nil {
			t.Fatalf("exit after SIGTERM: %v", n.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hello did not stop within 30s of SIGTERM")
	}
}

// callWithTypeScript calls greet with the official TypeScript SDK
// (tools/tsclient/call-tool.mjs).
func callWithTypeScript(t *testing.T, n *node) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tools", "tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "the TypeScript SDK is not installed (run: npm ci --prefix tools/tsclient)")
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join(dir, "call-tool.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL="+n.endpoint, "MCP_TOOL=greet", `MCP_ARGS={"name":"Ada"}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s\n%s", err, out, stderr.String())
	}
	var res struct {
		Tools  []string `json:"tools"`
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("TypeScript client output %q: %v", out, err)
	}
	if !slices.Equal(res.Tools, []string{"greet"}) || len(res.Result.Content) != 1 || res.Result.Content[0].Text != "Hello, Ada!" {
		t.Fatalf("TypeScript client: tools %v, result %+v; want [greet] and Hello, Ada!", res.Tools, res.Result)
	}
}

// The same binary runs a cluster member (`hello node`), here a single one
// (no Consul) on a SQLite store, and serves greet there.
func TestHelloNodeServesGreet(t *testing.T) {
	t.Setenv("MCPGRAIN_STATE_KEY", strings.Repeat("ab", 32))
	n := start(t, "node", "--no-auth", "--http", "127.0.0.1:0", "--bind", "127.0.0.1:0", "--grpc", "", "--consul", "",
		"--store", "sqlite:"+filepath.Join(t.TempDir(), "hello.db"))
	cs := n.connect(t, "2025-11-25")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Grace"}})
	if err != nil || res.IsError {
		t.Fatalf("greet: %v %+v", err, res)
	}
	if got := mcpclient.Text(res); got != "Hello, Grace!" {
		t.Fatalf("greet says %q", got)
	}
}

// --tools serves the user's server alongside a built-in pack.
func TestHelloDevServesBuiltinsAlongside(t *testing.T) {
	n := start(t, "dev", "--no-auth", "--http", "127.0.0.1:0", "--grpc", "", "--data", t.TempDir(), "--tools", "hello,demo")
	cs := n.connect(t, "2025-11-25")
	got := toolNames(t, cs)
	for _, want := range []string{"greet", "echo", "add"} {
		if !slices.Contains(got, want) {
			t.Fatalf("tools %v lack %s", got, want)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
}
