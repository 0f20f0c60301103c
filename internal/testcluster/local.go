package testcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// Bearer tokens of the in-process nodes StartLocal runs.
const (
	// AliceToken is alice's token: org acme, role admin.
	AliceToken = "mcpg_alice_token_0123456789"
	// BobToken is bob's token: org acme, role member.
	BobToken = "mcpg_bob_token_0123456789ab"
	// CarolToken is carol's token: org globex, role admin (code-mode nodes
	// only: CodeNode adds her).
	CarolToken = "mcpg_carol_token_0123456789"
	// VeraToken is a viewer's token of org acme; a test that needs her adds
	// her with MustKeys.
	VeraToken = "mcpg_vera_token_0123456789ab"
)

// LocalStateKey is the requestState signing key of the in-process nodes.
var LocalStateKey = []byte("0123456789abcdef0123456789abcdef")

// CreateCode is code-mode code that creates a to-do: a write, so it pauses
// for approval.
const CreateCode = `const t = await tools.demo.createTodo({title: "ship it"}); return t;`

// StartLocal runs a real single-node mcpgrain in the test process (the
// app, as `mcpgrain dev` runs it: SQLite, the demo and conformance tool
// packs, alice and bob), applies tweak to its configuration first, and
// returns what the node reports with a stop function: stop ends the node
// gracefully (as on SIGTERM) and returns what app.Run returned. The test's
// cleanup stops it too, once. MCPGRAIN_TEST_LOG=1 prints the node's log.
func StartLocal(t testing.TB, tweak func(*app.Config)) (app.Info, func() error) {
	t.Helper()
	keys, err := auth.NewKeys(
		auth.Entry{Token: AliceToken, User: "alice", Org: "acme", Role: "admin"},
		auth.Entry{Token: BobToken, User: "bob", Org: "acme", Role: "member"},
	)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("MCPGRAIN_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := app.Config{
		NodeID: "t1", Bind: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		Store:  "sqlite:" + filepath.Join(t.TempDir(), "g.db"),
		Logger: logger,
		MCP: app.MCPConfig{Packs: []string{"demo", "conformance"}, Keys: keys, RateLimit: 1000, RateBurst: 1000,
			StateKey: LocalStateKey},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	return runLocal(t, cfg)
}

// runLocal runs app.Run with cfg until the test ends.
func runLocal(t testing.TB, cfg app.Config) (app.Info, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan app.Info, 1)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, func(i app.Info) { ready <- i }) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case i := <-ready:
		return i, stop
	case err := <-done:
		t.Fatalf("node did not start: %v", err)
	case <-time.After(startTimeout()):
		t.Fatalf("node did not start in %v", startTimeout())
	}
	return app.Info{}, nil
}

// startTimeout bounds an in-process node's start: 20s, or
// MCPGRAIN_TEST_START_TIMEOUT (a duration) for a process run much slower
// than usual (tools/instr.sh runs benchmarks under valgrind, ≈ 50×).
func startTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("MCPGRAIN_TEST_START_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}

// CodeNode is the configuration tweak of a code-mode node: the code tool
// pack with the demo API, a gRPC listener and carol (org globex); tweak,
// if set, applies after it.
func CodeNode(t testing.TB, tweak func(*app.Config)) func(*app.Config) {
	return func(c *app.Config) {
		c.GRPC = "127.0.0.1:0"
		c.MCP.Packs = []string{"code"}
		c.MCP.Code.DemoAPI = true
		k, err := c.MCP.Keys.Merge(MustKeys(t, CarolToken, "carol", "globex", "admin"))
		if err != nil {
			t.Fatal(err)
		}
		c.MCP.Keys = k
		if tweak != nil {
			tweak(c)
		}
	}
}

// StartCodeNode runs an in-process node with code mode and the demo API
// (StartLocal with CodeNode).
func StartCodeNode(t testing.TB, tweak func(*app.Config)) app.Info {
	t.Helper()
	info, _ := StartLocal(t, CodeNode(t, tweak))
	return info
}

// MustKeys is the key set of one bearer token.
func MustKeys(t testing.TB, token, user, org, role string) *auth.Keys {
	t.Helper()
	k, err := auth.NewKeys(auth.Entry{Token: token, User: user, Org: org, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// KeysFile writes alice and bob (org acme; admin and member) and carol
// (org globex, admin) with their tokens to a --keys-file for the
// multi-process nodes (Options.ExtraArgs) and returns its path.
func KeysFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	body := fmt.Sprintf(`{"keys":[{"token":%q,"user":"alice","org":"acme","role":"admin"},{"token":%q,"user":"bob","org":"acme","role":"member"},{"token":%q,"user":"carol","org":"globex","role":"admin"}]}`,
		AliceToken, BobToken, CarolToken)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
