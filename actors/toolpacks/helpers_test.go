package toolpacks_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Protocol versions the tests run against: the go-sdk client's default
// (2026-07-28, stateless discover) and the last initialize-handshake one.
const (
	latestProtocol = ""
	legacyProtocol = "2025-11-25"
)

// protocols names each protocol variant for subtests.
var protocols = []struct{ name, version string }{
	{"latest", latestProtocol},
	{"2025-11-25", legacyProtocol},
}

// waitTimeout bounds every wait for an asynchronous notification.
const waitTimeout = 10 * time.Second

var testImpl = &mcp.Implementation{Name: "mcpgrain-test", Version: "v0.0.0"}

// newServer builds a server with packs and closes it at the end of the test.
func newServer(t *testing.T, packs ...string) *mcp.Server {
	t.Helper()
	s, closer, err := toolpacks.NewServer(testImpl, packs, toolpacks.Options{})
	if err != nil {
		t.Fatalf("NewServer(%q): %v", packs, err)
	}
	t.Cleanup(closer)
	return s
}

// connect connects a go-sdk client with copts (nil: defaults) to server
// over in-memory transports at protocol version (empty: the client's
// default).
func connect(t *testing.T, server *mcp.Server, copts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.0"}, copts)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		_ = ss.Close()
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// callTool calls a tool and fails the test on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", params.Name, err)
	}
	return res
}

// wantText asserts a successful result with exactly the given text.
func wantText(t *testing.T, res *mcp.CallToolResult, want string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected isError result: %q", mcpclient.Text(res))
	}
	if got := mcpclient.Text(res); got != want {
		t.Fatalf("text = %q, want %q", got, want)
	}
}

// wantToolError asserts an isError result whose text contains each of subs.
func wantToolError(t *testing.T, res *mcp.CallToolResult, subs ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want isError result, got %q", mcpclient.Text(res))
	}
	got := mcpclient.Text(res)
	for _, sub := range subs {
		if !strings.Contains(got, sub) {
			t.Errorf("error text %q does not contain %q", got, sub)
		}
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// receive waits (bounded) for the next value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		panic("unreachable")
	}
}
