package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// devNode runs the notebook binary as `notebook dev` (SQLite, alice an
// admin and bob a member of acme) with the flags extra, and returns its
// address.
func devNode(t *testing.T, extra ...string) string {
	t.Helper()
	ports := testenv.FreePorts(t, 2)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	body := `{"keys":[{"token":"` + testcluster.AliceToken + `","user":"alice","org":"acme","role":"admin"},{"token":"` + testcluster.BobToken + `","user":"bob","org":"acme","role":"member"}]}`
	if err := os.WriteFile(keys, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(testcluster.Build(t, "./examples/notebook"), "dev", "--http", addr,
		"--grpc", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--data", filepath.Join(dir, "data"), "--keys-file", keys)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stderr = t.Output()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		sc, once := bufio.NewScanner(stdout), sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "MCP endpoint:") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	select {
	case <-ready:
	case <-exited:
		t.Fatal("notebook exited before serving")
	case <-time.After(60 * time.Second):
		t.Fatal("notebook printed no MCP endpoint within 60s")
	}
	return addr
}

// decide polls the node's approval API (as bob) until the publication of
// h is listed, and decides it with action.
func decide(t *testing.T, addr, h, action string) {
	t.Helper()
	url := "http://" + addr + "/api/executions"
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := testcluster.API(t, http.MethodGet, url, testcluster.BobToken, "")
		b, _ := json.Marshal(r.Body)
		var got struct {
			Executions []struct {
				ID      string `json:"executionId"`
				Message string `json:"message"`
			} `json:"executions"`
		}
		_ = json.Unmarshal(b, &got)
		for _, e := range got.Executions {
			if e.Message == "Publish notebook "+h+"?" {
				if r := testcluster.API(t, http.MethodPost, url+"/"+e.ID+"/resume", testcluster.BobToken, `{"action":"`+action+`"}`); r.Status != http.StatusOK {
					t.Fatalf("bob's %s: %d %v", action, r.Status, r.Body)
				}
				return
			}
		}
	}
	t.Fatalf("the publication of %s was not listed within 60s", h)
}

// count is how many of notes equal note.
func count(notes []string, note string) int {
	n := 0
	for _, s := range notes {
		if s == note {
			n++
		}
	}
	return n
}

const published = "published, approved by bob"

// In a 2025-11-25 session, publish_notebook's Ask on a handle-bound
// context pauses the call for approval on the node's surfaces: bob's
// accept over HTTP lets the call's Step add the publication note to the
// notebook once; bob's decline of another's publication adds nothing.
func TestPublishNotebookInASession(t *testing.T) {
	addr := devNode(t)
	alice := testcluster.Connect(t, addr, testcluster.AliceToken, "2025-11-25", nil)
	publish := func(h, action string) *mcp.CallToolResult {
		var res *mcp.CallToolResult
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "publish_notebook", Arguments: map[string]any{"notebook": h}})
		}()
		decide(t, addr, h, action)
		<-done
		if err != nil || res.IsError {
			t.Fatalf("publish_notebook: %v %q", err, mcpclient.Text(res))
		}
		return res
	}
	h := newNote(t, alice, "draft")
	publish(h, "accept")
	if got := mustNotes(t, alice, "list_notes", map[string]any{"notebook": h}); count(got, published) != 1 || len(got) != 2 {
		t.Fatalf("notes after the approved publication: %v, want [draft %q]", got, published)
	}
	d := newNote(t, alice, "secret")
	if res := publish(d, "decline"); !strings.HasPrefix(mcpclient.Text(res), `publication declined by "bob"`) {
		t.Fatalf("declined publication: %q", mcpclient.Text(res))
	}
	if got := mustNotes(t, alice, "list_notes", map[string]any{"notebook": d}); len(got) != 1 {
		t.Fatalf("notes after the declined publication: %v, want [secret]", got)
	}
}

// newNote mints a notebook through cs with one note.
func newNote(t *testing.T, cs *mcp.ClientSession, text string) string {
	t.Helper()
	res, _ := call(t, cs, "new_notebook", nil)
	if res.IsError {
		t.Fatalf("new_notebook: %s", mcpclient.Text(res))
	}
	h := mcpclient.Text(res)
	mustNotes(t, cs, "add_note", map[string]any{"notebook": h, "text": text})
	return h
}

// publishCall calls publish_notebook at 2026-07-28 (state "": a first
// request; else the retry with the requestState).
func publishCall(t *testing.T, cs *mcp.ClientSession, h, state string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "publish_notebook", Arguments: map[string]any{"notebook": h}, RequestState: state})
	if err != nil {
		t.Fatalf("publish_notebook: %v", err)
	}
	return res
}

// In the sessionless 2026-07-28 era, publish_notebook's Ask on a
// handle-bound context is the call's input_required round (the call's
// continuation grain): bob accepts over HTTP, alice's retry adds the
// publication note once, and retrying the same call again returns the
// journaled step without adding it again; a declined publication adds
// nothing.
func TestPublishNotebookSessionless(t *testing.T) {
	addr := devNode(t)
	alice := testcluster.MRTRClient(t, addr, testcluster.AliceToken)
	asked := func(h string) string {
		res := publishCall(t, alice, h, "")
		if !res.NeedsInput() || res.RequestState == "" {
			t.Fatalf("publish_notebook %s: %+v %q, want input_required", h, res, mcpclient.Text(res))
		}
		return res.RequestState
	}
	h := newNote(t, alice, "draft")
	state := asked(h)
	decide(t, addr, h, "accept")
	for range 2 { // the retry, and a retry of the same call again
		if res := publishCall(t, alice, h, state); res.IsError || res.NeedsInput() {
			t.Fatalf("the retry: %+v %q", res, mcpclient.Text(res))
		}
	}
	if got := mustNotes(t, alice, "list_notes", map[string]any{"notebook": h}); count(got, published) != 1 || len(got) != 2 {
		t.Fatalf("notes after the approved publication: %v, want [draft %q]", got, published)
	}
	d := newNote(t, alice, "secret")
	state = asked(d)
	decide(t, addr, d, "decline")
	if res := publishCall(t, alice, d, state); !strings.HasPrefix(mcpclient.Text(res), `publication declined by "bob"`) {
		t.Fatalf("declined publication: %q", mcpclient.Text(res))
	}
	if got := mustNotes(t, alice, "list_notes", map[string]any{"notebook": d}); len(got) != 1 {
		t.Fatalf("notes after the declined publication: %v, want [secret]", got)
	}
}

// A node run with --max-handles-per-principal 2: alice's third notebook
// is refused with a clear error while bob mints his; after alice drops
// one she mints again.
func TestNotebooksCappedPerPrincipal(t *testing.T) {
	addr := devNode(t, "--max-handles-per-principal", "2")
	alice := testcluster.Connect(t, addr, testcluster.AliceToken, sessionless, nil)
	bob := testcluster.Connect(t, addr, testcluster.BobToken, sessionless, nil)
	first := newNote(t, alice, "one")
	newNote(t, alice, "two")
	if res, _ := call(t, alice, "new_notebook", nil); !res.IsError || !strings.Contains(mcpclient.Text(res), "too many live handles") {
		t.Fatalf("alice's third notebook: %q, want the cap's error", mcpclient.Text(res))
	}
	newNote(t, bob, "bob's")
	newNote(t, bob, "bob's too")
	if res, _ := call(t, alice, "drop_notebook", map[string]any{"notebook": first}); res.IsError {
		t.Fatalf("drop_notebook: %s", mcpclient.Text(res))
	}
	newNote(t, alice, "three")
}
