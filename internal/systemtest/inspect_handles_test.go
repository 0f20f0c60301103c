package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	sdkapp "github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/cli"
	"github.com/mcpgrain/mcpgrain/internal/inspect"
)

// globexBobToken is bob's name in another organization (globex, member).
const globexBobToken = "mcpg_gbob_token_0123456789a"

// handlesPack mints handles (mint) and lists the caller's (mine), on the
// SDK's calls.
func handlesPack() toolpacks.Pack {
	return toolpacks.NewPack("handlelist", func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "mint"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			h, err := sdkapp.NewHandle(ctx)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "mine"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
			l, err := sdkapp.ListHandles(ctx)
			if err != nil {
				return nil, nil, err
			}
			ids := []string{}
			for _, h := range l {
				ids = append(ids, h.ID)
			}
			return nil, map[string]any{"handles": ids}, nil
		})
	})
}

// A principal's handles, listed by the SDK's call in a tool (in both
// eras) and by an admin's inspection (with the tool that minted each): each principal lists exactly its
// own (bob of acme and bob of globex are two principals); an admin lists
// the handles of its own organization's users only; a member, a viewer
// and another organization's admin asking for alice's handles get the
// answer an unknown id gets (404), no token 401; `mcpgrain inspect
// handles USER` prints them.
func TestHandlesAreListedForTheirPrincipalAndItsAdmins(t *testing.T) {
	addr := startNode(t, func(c *app.Config) {
		k, err := c.MCP.Keys.Merge(mustKeys(t, carolToken, "carol", "globex", "admin"))
		for _, more := range [][4]string{{veraToken, "vera", "acme", "viewer"}, {globexBobToken, "bob", "globex", "member"}} {
			if err == nil {
				k, err = k.Merge(mustKeys(t, more[0], more[1], more[2], more[3]))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		c.MCP.Keys = k
		c.MCP.ExtraPacks = append(c.MCP.ExtraPacks, handlesPack())
		c.MCP.Packs = append(c.MCP.Packs, "handlelist")
	})
	alice := connect(t, addr, aliceToken, "2026-07-28", nil)
	bob := connect(t, addr, bobToken, "2025-11-25", nil)
	gbob := connect(t, addr, globexBobToken, "2026-07-28", nil)
	mint := func(cs *mcp.ClientSession) string {
		res, _ := callTool(t, cs, "mint", nil)
		if res.IsError {
			t.Fatalf("mint: %v", res.Content)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	a1, a2, b, gb := mint(alice), mint(alice), mint(bob), mint(gbob)
	mine := func(cs *mcp.ClientSession) []string {
		_, sc := callTool(t, cs, "mine", nil)
		var out []string
		for _, id := range sc["handles"].([]any) {
			out = append(out, id.(string))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	for name, c := range map[string]struct {
		cs   *mcp.ClientSession
		want []string
	}{"alice": {alice, sorted(a1, a2)}, "bob": {bob, []string{b}}, "globex's bob": {gbob, []string{gb}}} {
		if got := mine(c.cs); !slices.Equal(got, c.want) {
			t.Errorf("%s lists %v, want %v", name, got, c.want)
		}
	}

	inspected := func(user, token string) []string {
		st, body := inspectGet(t, addr, "handles/"+user, token)
		var h inspect.Handles
		if st != http.StatusOK || json.Unmarshal(body, &h) != nil {
			t.Fatalf("inspect %s's handles: %d %s", user, st, body)
		}
		var out []string
		for _, x := range h.Handles {
			if !x.Expires.After(x.LastUsed) || x.Created.IsZero() || x.Tool != "mint" {
				t.Errorf("inspected handle %+v", x)
			}
			out = append(out, x.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := inspected("alice", aliceToken); !slices.Equal(got, sorted(a1, a2)) {
		t.Errorf("alice inspects her own: %v", got)
	}
	if got := inspected("bob", aliceToken); !slices.Equal(got, []string{b}) {
		t.Errorf("acme's admin inspects bob's: %v, want acme's bob's %s only", got, b)
	}
	if got := inspected("bob", carolToken); !slices.Equal(got, []string{gb}) {
		t.Errorf("globex's admin inspects bob's: %v, want globex's bob's %s only", got, gb)
	}
	if got := inspected("alice", carolToken); len(got) != 0 {
		t.Errorf("globex's admin sees acme's alice's handles: %v", got)
	}
	_, unknown := inspectGet(t, addr, "sessions/no-such-session", aliceToken)
	for name, token := range map[string]string{"member": bobToken, "viewer": veraToken, "globex's member": globexBobToken} {
		for _, user := range []string{"alice", "bob"} {
			if st, body := inspectGet(t, addr, "handles/"+user, token); st != http.StatusNotFound || !bytes.Equal(body, unknown) {
				t.Errorf("%s lists %s's handles: %d %s, want the unknown id's 404", name, user, st, body)
			}
		}
	}
	if st, _ := inspectGet(t, addr, "handles/alice", ""); st != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", st)
	}

	var out, errOut bytes.Buffer
	err := cli.Program{}.Run(t.Context(), []string{"inspect", "handles", "bob", "--url", "http://" + addr, "--token", aliceToken}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), b) || !strings.Contains(out.String(), "mint") || strings.Contains(out.String(), gb) {
		t.Fatalf("mcpgrain inspect handles bob: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	err = cli.Program{}.Run(t.Context(), []string{"inspect", "handles", "alice", "--url", "http://" + addr, "--token", bobToken}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "may not list") {
		t.Fatalf("bob's mcpgrain inspect handles alice: %v", err)
	}
}
