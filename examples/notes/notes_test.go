package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/examples/notes/notestool"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// binary builds examples/notes once per test process (the cluster tests
// need Postgres: without it they skip, or fail in the integration tier,
// before building).
func binary(t *testing.T) string {
	t.Helper()
	if os.Getenv("MCPGRAIN_TEST_POSTGRES_URL") == "" {
		testenv.Unavailable(t, "MCPGRAIN_TEST_POSTGRES_URL is not set: the notes cluster needs Postgres")
	}
	return testcluster.Build(t, "./examples/notes")
}

// call calls a notes tool with the go-sdk client and returns its notes
// (failing the test on an error).
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) []string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %s", tool, err, resultText(res))
	}
	return notesOf(t, res.StructuredContent)
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return mcpclient.Text(res)
}

// notesOf decodes a tool's structured result.
func notesOf(t *testing.T, structured any) []string {
	t.Helper()
	b, _ := json.Marshal(structured)
	var n notestool.Notes
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("result %s: %v", b, err)
	}
	return n.Notes
}

// tsSession is the TypeScript SDK client (tools/tsclient/session-calls.mjs)
// holding one session.
type tsSession struct {
	id    string
	in    io.WriteCloser
	out   *bufio.Scanner
	cmd   *exec.Cmd
	close sync.Once
}

// startTS connects the TypeScript client through addr.
func startTS(t *testing.T, addr string) *tsSession {
	t.Helper()
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
	cmd := exec.CommandContext(t.Context(), nodeBin, filepath.Join(dir, "session-calls.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL=http://"+addr+"/mcp", "MCP_TOKEN="+testcluster.Token)
	cmd.Stderr = t.Output()
	s := &tsSession{cmd: cmd}
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	s.out = bufio.NewScanner(stdout)
	var hello struct{ Session string }
	s.next(t, &hello)
	s.id = hello.Session
	return s
}

// next decodes the client's next line into v.
func (s *tsSession) next(t *testing.T, v any) {
	t.Helper()
	if !s.out.Scan() {
		t.Fatalf("TypeScript client ended: %v", s.out.Err())
	}
	if err := json.Unmarshal(s.out.Bytes(), v); err != nil {
		t.Fatalf("TypeScript client said %q: %v", s.out.Text(), err)
	}
}

// call calls a tool in the TypeScript client's session.
func (s *tsSession) call(t *testing.T, tool string, args map[string]any) []string {
	t.Helper()
	line, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Error  string
		Result struct {
			IsError           bool
			StructuredContent any
		}
	}
	s.next(t, &answer)
	if answer.Error != "" || answer.Result.IsError {
		t.Fatalf("TypeScript client: %s: %s %+v", tool, answer.Error, answer.Result)
	}
	return notesOf(t, answer.Result.StructuredContent)
}

// stop ends the client (its session closes).
func (s *tsSession) stop() {
	s.close.Do(func() {
		_ = s.in.Close()
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	})
}

// tsOwnedBy connects the TypeScript client through node via until its
// session is owned by node owner.
func tsOwnedBy(t *testing.T, c *testcluster.Cluster, via, owner int) *tsSession {
	t.Helper()
	table := c.Placement(session.KindName, 0, 1, 2)
	for range 40 {
		s := startTS(t, c.Node(via).HTTP)
		if o, _ := table.Owner(session.KindName, s.id); o.ID == c.Node(owner).ID {
			return s
		}
		s.stop()
	}
	t.Fatal("could not get a TypeScript session owned by the wanted node")
	return nil
}

// The example as a 3-node cluster (Consul, Postgres): a go-sdk session and
// a TypeScript SDK session, both owned by node 2, add notes; node 2 is
// killed (SIGKILL); each session's next call, on a survivor, finds its
// notes — each exactly once — and adds to them.
func TestNotesSurviveTheOwnersKill(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Binary: binary(t)})
	cs := testcluster.ConnectOwnedBy(t, c, 0, 1, testcluster.Token, nil)
	ts := tsOwnedBy(t, c, 0, 1)
	call(t, cs, "add_note", map[string]any{"text": "a"})
	if got := call(t, cs, "add_note", map[string]any{"text": "b"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("go-sdk session's notes %v", got)
	}
	ts.call(t, "add_note", map[string]any{"text": "x"})
	if got := ts.call(t, "add_note", map[string]any{"text": "y"}); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("TypeScript session's notes %v", got)
	}
	c.Kill(1)
	c.WaitMembersOn([]int{0}, 2, 20*time.Second) // the gateway no longer routes to the dead node
	if got := call(t, cs, "list_notes", nil); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the owner's kill the go-sdk session has %v, want [a b]", got)
	}
	if got := call(t, cs, "add_note", map[string]any{"text": "c"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after the owner's kill add_note gives %v, want [a b c]", got)
	}
	if got := ts.call(t, "add_note", map[string]any{"text": "z"}); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("after the owner's kill the TypeScript session has %v, want [x y z]", got)
	}
	if got := call(t, cs, "clear_notes", nil); len(got) != 0 {
		t.Fatalf("clear_notes gives %v", got)
	}
	if got := ts.call(t, "list_notes", nil); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("clearing one session's notes touched another's: %v", got)
	}
}

// A note that would make the session's notes exceed MaxBytes is refused
// with a clear tool error and saves nothing; an Update that leaves the
// encoding unchanged writes nothing (the session's row in Postgres is not
// rewritten: its xmin stays).
func TestNotesLimitsAndUnchangedWrites(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 1, Binary: binary(t)})
	cs := testcluster.Connect(t, c.Node(0).HTTP, testcluster.Token, "2025-11-25", nil)
	st, err := store.Open(t.Context(), c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := grain.Key(session.KindName, cs.ID())
	rowVersion := func() string {
		var x string
		if err := st.DB().Reader().QueryRowContext(t.Context(), `SELECT xmin::text FROM grains WHERE grain = $1`, key).Scan(&x); err != nil {
			t.Fatalf("read the session's row: %v", err)
		}
		return x
	}
	v0 := rowVersion()
	call(t, cs, "clear_notes", nil) // nothing saved yet: the zero value is unchanged
	if v := rowVersion(); v != v0 {
		t.Fatalf("clear_notes of a session with no notes rewrote its row (%s → %s)", v0, v)
	}
	call(t, cs, "add_note", map[string]any{"text": "keep"})
	v1 := rowVersion()
	if v1 == v0 {
		t.Fatal("add_note did not write the session's row")
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"text": strings.Repeat("x", 5000)}})
	if err != nil || !res.IsError || !strings.Contains(mcpclient.Text(res), "MaxBytes 4096") {
		t.Fatalf("a note over MaxBytes: %v %s; want a tool error naming MaxBytes", err, resultText(res))
	}
	if v := rowVersion(); v != v1 {
		t.Fatal("a refused note rewrote the session's row")
	}
	if got := call(t, cs, "list_notes", nil); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("after a refused note: %v, want [keep]", got)
	}
	call(t, cs, "clear_notes", nil)
	v2 := rowVersion()
	call(t, cs, "clear_notes", nil)
	if v := rowVersion(); v2 == v1 || v != v2 {
		t.Fatalf("clear_notes wrote %v (want a write), clearing again wrote %v (want none)", v2 != v1, v != v2)
	}
}
