package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// sessionless is the protocol version without sessions: state lives
// behind handles.
const sessionless = "2026-07-28"

// binary builds examples/notebook once per test process (the cluster test
// needs Postgres: without it it skips, or fails in the integration tier,
// before building).
func binary(t *testing.T) string {
	t.Helper()
	if os.Getenv("MCPGRAIN_TEST_POSTGRES_URL") == "" {
		testenv.Unavailable(t, "MCPGRAIN_TEST_POSTGRES_URL is not set: the notebook cluster needs Postgres")
	}
	return testcluster.Build(t, "./examples/notebook")
}

// call calls a notebook tool and returns its result and notes.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, []string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var n Notes
	_ = json.Unmarshal(b, &n)
	return res, n.Notes
}

// mustNotes calls a notes tool that must succeed and returns the notes.
func mustNotes(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) []string {
	t.Helper()
	res, n := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s: %s", tool, mcpclient.Text(res))
	}
	return n
}

// notebookOwnedBy mints notebooks through cs until one's grain is owned
// by node owner (the placement of nodes 0, 1 and 2).
func notebookOwnedBy(t *testing.T, c *testcluster.Cluster, cs *mcp.ClientSession, owner int) string {
	t.Helper()
	table := c.Placement(handle.KindName, 0, 1, 2)
	for range 40 {
		res, _ := call(t, cs, "new_notebook", nil)
		if res.IsError {
			t.Fatalf("new_notebook: %s", mcpclient.Text(res))
		}
		h := mcpclient.Text(res)
		if o, _ := table.Owner(handle.KindName, h); o.ID == c.Node(owner).ID {
			return h
		}
	}
	t.Fatal("could not mint a notebook owned by the wanted node")
	return ""
}

// The example as a 3-node cluster (Consul, Postgres) in the sessionless
// era: alice mints a notebook whose handle grain node 1 owns and adds
// notes to it through every node; bob (another principal) can neither
// read, add to nor drop it; a reminder is scheduled on it and node 1 is
// killed (SIGKILL) before it is due; the next calls, through the
// survivors, find every note exactly once and add to them, and the
// reminder runs on the handle's new owner and adds its note once.
func TestNotebookSurvivesTheOwnersKill(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	body := `{"keys":[{"token":"` + testcluster.AliceToken + `","user":"alice","org":"acme","role":"admin"},{"token":"` + testcluster.BobToken + `","user":"bob","org":"acme","role":"member"}]}`
	if err := os.WriteFile(keys, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Binary: binary(t), ExtraArgs: []string{"--keys-file", keys, "--reminder-poll", "200ms"}})
	var alice []*mcp.ClientSession
	for i := range 3 {
		alice = append(alice, testcluster.Connect(t, c.Node(i).HTTP, testcluster.AliceToken, sessionless, nil))
	}
	h := notebookOwnedBy(t, c, alice[0], 1)
	for i, text := range []string{"a", "b", "c"} {
		mustNotes(t, alice[(i*2)%3], "add_note", map[string]any{"notebook": h, "text": text}) // through nodes 0, 2, 1
	}
	if got := mustNotes(t, alice[2], "list_notes", map[string]any{"notebook": h}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("notes %v, want [a b c]", got)
	}

	bob := testcluster.Connect(t, c.Node(0).HTTP, testcluster.BobToken, sessionless, nil)
	for _, tool := range []string{"list_notes", "add_note", "drop_notebook"} {
		args := map[string]any{"notebook": h}
		if tool == "add_note" {
			args["text"] = "bob's"
		}
		res, n := call(t, bob, tool, args)
		if !res.IsError || mcpclient.Text(res) != "no such notebook" || len(n) != 0 {
			t.Errorf("bob's %s of alice's notebook: %s %v", tool, mcpclient.Text(res), n)
		}
	}

	res, _ := call(t, alice[2], "remind", map[string]any{"notebook": h, "text": "e", "after": "6s"})
	if res.IsError {
		t.Fatalf("remind: %s", mcpclient.Text(res))
	}
	reminder := "reminder " + mcpclient.Text(res) + ": e"

	c.Kill(1)
	c.WaitMembersOn([]int{0, 2}, 2, 30*time.Second) // the survivors no longer route to the dead node
	if got := mustNotes(t, alice[2], "list_notes", map[string]any{"notebook": h}); !slices.Equal(got[:3], []string{"a", "b", "c"}) {
		t.Fatalf("after the owner's kill the notebook has %v, want [a b c] first", got)
	}
	mustNotes(t, alice[0], "add_note", map[string]any{"notebook": h, "text": "d"})
	// The reminder, due after the kill, runs on the handle's new owner.
	start := time.Now()
	var got []string
	for !slices.Contains(got, reminder) {
		if time.Since(start) > 120*time.Second {
			t.Fatalf("the reminder did not fire within 120s of the kill: %v", got)
		}
		time.Sleep(200 * time.Millisecond) // polling the client's view, not synchronisation
		got = mustNotes(t, alice[0], "list_notes", map[string]any{"notebook": h})
	}
	t.Logf("the reminder's note appeared %v after the kill", time.Since(start))
	slices.Sort(got)
	want := []string{"a", "b", "c", "d", reminder}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("notes %v, want each of %v once", got, want)
	}
	if res, _ := call(t, alice[2], "drop_notebook", map[string]any{"notebook": h}); res.IsError {
		t.Fatalf("drop_notebook: %s", mcpclient.Text(res))
	}
	if res, _ := call(t, alice[0], "list_notes", map[string]any{"notebook": h}); !res.IsError || mcpclient.Text(res) != "no such notebook" {
		t.Fatalf("a dropped notebook: %s", mcpclient.Text(res))
	}
}
