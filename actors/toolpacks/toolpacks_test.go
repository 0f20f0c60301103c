package toolpacks_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

func TestNames(t *testing.T) {
	if got, want := toolpacks.Names(), []string{"code", "demo", "conformance"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	// The result is a copy.
	toolpacks.Names()[0] = "changed"
	if got := toolpacks.Names()[0]; got != "code" {
		t.Fatalf("Names() shares its slice: first name now %q", got)
	}
}

func TestValidate(t *testing.T) {
	for _, ok := range [][]string{nil, {}, {"demo"}, {"conformance"}, {"demo", "conformance"}, {"demo", "demo"}} {
		if err := toolpacks.Validate(ok); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", ok, err)
		}
	}

	err := toolpacks.Validate([]string{"demo", "nope"})
	if err == nil {
		t.Fatal(`Validate([demo nope]) = nil, want error`)
	}
	if got, want := err.Error(), `unknown tool pack "nope" (known: code, demo, conformance)`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}

	err = toolpacks.Validate([]string{"x", "demo", "", "x", "Demo"})
	if err == nil {
		t.Fatal("Validate with several unknown packs = nil, want error")
	}
	if got, want := err.Error(), `unknown tool packs "x", "", "Demo" (known: code, demo, conformance)`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestCodePackDelegatesToTheRuntime(t *testing.T) {
	if _, _, err := toolpacks.NewServer(testImpl, []string{"code"}, toolpacks.Options{}); err == nil {
		t.Fatal("code pack without CodeMode accepted")
	}
	called := 0
	srv, closer, err := toolpacks.NewServer(testImpl, []string{"code", "demo"}, toolpacks.Options{CodeMode: func(*mcp.Server) { called++ }})
	if err != nil || srv == nil {
		t.Fatal(err)
	}
	closer()
	if called != 1 {
		t.Fatalf("CodeMode called %d times, want 1", called)
	}
}

func TestNewServerUnknownPack(t *testing.T) {
	s, closer, err := toolpacks.NewServer(testImpl, []string{"conformance", "bogus"}, toolpacks.Options{})
	if err == nil {
		t.Fatal("NewServer with an unknown pack succeeded")
	}
	if !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("error %q does not name the unknown pack", err)
	}
	if s != nil || closer != nil {
		t.Errorf("NewServer returned a server or closer with an error")
	}
}

func TestNewServerNilImplementation(t *testing.T) {
	if _, _, err := toolpacks.NewServer(nil, []string{"demo"}, toolpacks.Options{}); err == nil {
		t.Fatal("NewServer(nil impl) succeeded")
	}
}

func TestNewServerToolNames(t *testing.T) {
	for _, tc := range []struct {
		packs []string
		want  []string
	}{
		{[]string{"demo"}, demoTools},
		{[]string{"conformance"}, conformanceTools},
		{[]string{"demo", "conformance"}, append(slices.Clone(demoTools), conformanceTools...)},
		{[]string{"conformance", "demo", "demo"}, append(slices.Clone(demoTools), conformanceTools...)},
	} {
		t.Run(strings.Join(tc.packs, "+"), func(t *testing.T) {
			for _, p := range protocols {
				cs := connect(t, newServer(t, tc.packs...), nil, p.version)
				if got, want := toolNames(t, cs), sorted(tc.want); !slices.Equal(got, want) {
					t.Errorf("%s: tools/list = %q, want %q", p.name, got, want)
				}
			}
		})
	}
}

func TestNewServerNoPacks(t *testing.T) {
	s, closer, err := toolpacks.NewServer(testImpl, nil, toolpacks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer()
	cs := connect(t, s, nil, legacyProtocol)
	if caps := cs.InitializeResult().Capabilities; caps.Tools != nil || caps.Resources != nil || caps.Prompts != nil {
		t.Errorf("server without packs advertises features: %+v", caps)
	}
}

func TestDuplicatePackRegisteredOnce(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	s, closer, err := toolpacks.NewServer(testImpl, []string{"conformance", "conformance"}, toolpacks.Options{Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	defer closer()
	cs := connect(t, s, nil, legacyProtocol)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	if n := fake.Pending(); n != 1 {
		t.Errorf("%d watched-resource timers, want 1", n)
	}
}

func TestNewServerHandlerConflict(t *testing.T) {
	complete := func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{}, nil
	}
	opts := toolpacks.Options{ServerOptions: &mcp.ServerOptions{CompletionHandler: complete}}

	// No pack sets a completion handler: the base one is used.
	s, closer, err := toolpacks.NewServer(testImpl, []string{"demo"}, opts)
	if err != nil {
		t.Fatalf("demo with a base CompletionHandler: %v", err)
	}
	defer closer()
	cs := connect(t, s, nil, legacyProtocol)
	if cs.InitializeResult().Capabilities.Completions == nil {
		t.Error("base CompletionHandler did not enable completions")
	}

	// The conformance pack sets one too: a conflict.
	_, _, err = toolpacks.NewServer(testImpl, []string{"demo", "conformance"}, opts)
	if err == nil {
		t.Fatal("conflicting CompletionHandler accepted")
	}
	for _, sub := range []string{"CompletionHandler", "Options.ServerOptions", `"conformance"`} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error %q does not mention %s", err, sub)
		}
	}
	if opts.ServerOptions.SubscribeHandler != nil {
		t.Error("NewServer modified Options.ServerOptions")
	}
}

func TestNewServerInvalidServerOptionsIsAnError(t *testing.T) {
	for name, so := range map[string]*mcp.ServerOptions{
		"subscribe without unsubscribe": {SubscribeHandler: func(context.Context, *mcp.SubscribeRequest) error { return nil }},
		"negative page size":            {PageSize: -1},
		"unknown protocol version":      {SupportedProtocolVersions: []string{"1999-01-01"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := toolpacks.NewServer(testImpl, []string{"demo"}, toolpacks.Options{ServerOptions: so}); err == nil {
				t.Fatal("NewServer accepted invalid server options")
			}
		})
	}
}

func TestServersAreIndependent(t *testing.T) {
	// A list change on one server reaches its own sessions only.
	changed := make(chan struct{}, 4)
	watch := func(s *mcp.Server) *mcp.ClientSession {
		return connect(t, s, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			changed <- struct{}{}
		}}, legacyProtocol)
	}
	a, b := newServer(t, "conformance"), newServer(t, "conformance")
	watch(b)
	wantText(t, callTool(t, watch(a), &mcp.CallToolParams{Name: "test_trigger_tool_change"}), "The tool list changed: notifications/tools/list_changed was sent.")
	receive(t, changed, "the list change on server a")
	select {
	case <-changed:
		t.Error("a session of server b heard server a's list change")
	case <-time.After(100 * time.Millisecond):
	}
}
