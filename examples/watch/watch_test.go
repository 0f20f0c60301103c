//lint:file-ignore SA1019 the client of a stateful (2025-11-25) session gets the callback's log (SEP-2577 deprecates logging, still served).

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
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/examples/watch/watchtool"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// binary builds examples/watch once per test process.
func binary(t *testing.T) string {
	t.Helper()
	return testcluster.Build(t, "./examples/watch")
}

// node is a running watch binary in dev mode.
type node struct {
	cmd      *exec.Cmd
	endpoint string
	exited   chan struct{}
	err      error
	mu       sync.Mutex
	logs     strings.Builder // its stderr
}

// logged reports whether the node's logs have a line with every part.
func (n *node) logged(parts ...string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for line := range strings.SplitSeq(n.logs.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

type logWriter struct{ n *node }

func (w logWriter) Write(p []byte) (int, error) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	return w.n.logs.Write(p)
}

// start runs `watch dev` with args (and WATCH_DIR=dir); it returns once
// the banner named the MCP endpoint.
func start(t *testing.T, dir string, args ...string) *node {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"dev", "--no-auth", "--http", "127.0.0.1:0", "--grpc", "", "--reminder-poll", "100ms"}, args...)...)
	cmd.Env = append(os.Environ(), "WATCH_DIR="+dir)
	n := &node{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(t.Output(), logWriter{n})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[0]+f[1] == "MCPendpoint:" {
				found <- f[2]
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
		t.Fatalf("watch exited before serving: %v", n.err)
	case <-time.After(60 * time.Second):
		t.Fatal("watch printed no MCP endpoint within 60s")
	}
	return n
}

// stop stops the node gracefully and waits for its exit.
func (n *node) stop(t *testing.T) {
	t.Helper()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not stop within 30s of SIGTERM")
	}
}

// connect opens a stateful go-sdk client session to endpoint.
func connect(t *testing.T, endpoint string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "watch-test", Version: "v0"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool and returns its text, failing the test on an error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s %v: %v %s", tool, args, err, mcpclient.Text(res))
	}
	return mcpclient.Text(res)
}

// waitFired polls dir for the record of key until within has passed.
func waitFired(t *testing.T, dir, key string, within time.Duration) watchtool.Fired {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(filepath.Join(dir, key+".json"))
		if err == nil {
			var f watchtool.Fired
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatalf("record of %s: %v", key, err)
			}
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("reminder %s did not fire within %s", key, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pending lists the session's pending reminders' keys.
func pending(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var list []struct{ Key string }
	if err := json.Unmarshal([]byte(call(t, cs, "list_reminders", nil)), &list); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range list {
		keys = append(keys, s.Key)
	}
	return keys
}

// A reminder fires while its client is connected: the callback records it
// once and logs it to the client; the same key again is idempotent; a
// cancelled reminder never fires; a failing callback is retried.
func TestWatchRemindsAConnectedClient(t *testing.T) {
	dir := t.TempDir()
	n := start(t, dir)
	logs := make(chan string, 8)
	cs := connect(t, n.endpoint, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
		if s, ok := r.Params.Data.(string); ok {
			logs <- s
		}
	}})
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if k := call(t, cs, "remind_me", map[string]any{"after": "1s", "text": "tea", "key": "tea-1"}); k != "tea-1" {
		t.Fatalf("remind_me returned key %q, want tea-1", k)
	}
	if k := call(t, cs, "remind_me", map[string]any{"after": "1h", "text": "other", "key": "tea-1"}); k != "tea-1" {
		t.Fatalf("the same key again returned %q", k)
	}
	cancelled := call(t, cs, "remind_me", map[string]any{"after": "1s", "text": "never"})
	if cancelled == "" {
		t.Fatal("remind_me minted no key")
	}
	if got := strings.Join(pending(t, cs), " "); !strings.Contains(got, "tea-1") || !strings.Contains(got, cancelled) || len(strings.Fields(got)) != 2 {
		t.Fatalf("pending %q, want tea-1 and %s", got, cancelled)
	}
	call(t, cs, "cancel_reminder", map[string]any{"key": cancelled})
	later := call(t, cs, "remind_me", map[string]any{"after": "2s", "text": "retried", "fail_first": 2})

	if f := waitFired(t, dir, "tea-1", 60*time.Second); f.Text != "tea" || f.Attempt != 1 {
		t.Fatalf("fired %+v, want tea at attempt 1 (the first schedule of the key)", f)
	}
	select {
	case s := <-logs:
		if s != "reminder: tea" {
			t.Fatalf("client got log %q", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the connected client got no log of the reminder")
	}
	if f := waitFired(t, dir, later, 90*time.Second); f.Attempt != 3 {
		t.Fatalf("the callback failing twice recorded at attempt %d, want 3", f.Attempt)
	}
	if _, err := os.Stat(filepath.Join(dir, cancelled+".json")); err == nil {
		t.Fatal("a cancelled reminder fired")
	}
	waitMetric(t, n, `outcome="completed"`, "2")
	waitMetric(t, n, `outcome="failed"`, "2")
	if got := pending(t, cs); len(got) != 0 {
		t.Fatalf("pending after they fired: %v", got)
	}
}

// A reminder due after the session hibernated (its runtime disposed by the
// idle alarm) fires: the session is activated and its runtime built to run
// the callback.
func TestWatchFiresAfterPassivation(t *testing.T) {
	dir := t.TempDir()
	n := start(t, dir, "--session-timeout", "1s")
	cs := connect(t, n.endpoint, nil)
	key := call(t, cs, "remind_me", map[string]any{"after": "8s", "text": "after a nap"})
	deadline := time.Now().Add(60 * time.Second)
	for !n.logged("mcp_session_idle_runtime_dispose", "reason=idle") {
		if time.Now().After(deadline) {
			t.Fatal("the session was not passivated within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, key+".json")); err == nil {
		t.Fatal("the reminder fired before the session hibernated: the test proves nothing (a very slow machine?)")
	}
	if f := waitFired(t, dir, key, 60*time.Second); f.Text != "after a nap" {
		t.Fatalf("fired %+v", f)
	}
}

// A reminder pending when the node stops fires once it runs again (dev's
// SQLite store keeps it).
func TestWatchFiresAfterRestart(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	n := start(t, dir, "--data", data)
	cs := connect(t, n.endpoint, nil)
	key := call(t, cs, "remind_me", map[string]any{"after": "3s", "text": "after a restart"})
	n.stop(t) // the client stays: closing it would end (DELETE) the session, and its schedules with it
	if _, err := os.Stat(filepath.Join(dir, key+".json")); err == nil {
		t.Fatal("the reminder fired before the node stopped: the test proves nothing")
	}
	start(t, dir, "--data", data)
	if f := waitFired(t, dir, key, 60*time.Second); f.Text != "after a restart" {
		t.Fatalf("fired %+v", f)
	}
}

// A session that ends (its client's DELETE) takes its pending reminders
// with it: they never fire (a later reminder of another session does).
func TestWatchEndedSessionCancelsItsReminders(t *testing.T) {
	dir := t.TempDir()
	n := start(t, dir)
	ended := connect(t, n.endpoint, nil)
	gone := call(t, ended, "remind_me", map[string]any{"after": "1s", "text": "never"})
	if err := ended.Close(); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, n.endpoint, nil)
	later := call(t, cs, "remind_me", map[string]any{"after": "2s", "text": "later"})
	waitFired(t, dir, later, 60*time.Second)
	if _, err := os.Stat(filepath.Join(dir, gone+".json")); err == nil {
		t.Fatal("a reminder of an ended session fired")
	}
}

func toolParams(name string) *mcp.CallToolParams { return &mcp.CallToolParams{Name: name} }

// A session holds at most 100 pending reminders: the next is refused with
// a clear error, and cancelling one makes room again.
func TestWatchBoundsPendingReminders(t *testing.T) {
	// 100+ calls in a burst: on a quiet machine faster than the default
	// --rate-limit (50/s per principal), whose 429 is not what this tests.
	n := start(t, t.TempDir(), "--rate-limit", "0")
	cs := connect(t, n.endpoint, nil)
	for i := range 100 {
		call(t, cs, "remind_me", map[string]any{"after": "1h", "text": "later", "key": fmt.Sprintf("k%d", i)})
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "remind_me", Arguments: map[string]any{"after": "1h", "text": "one too many"}})
	if err != nil || !res.IsError || !strings.Contains(mcpclient.Text(res), "too many pending schedules") {
		t.Fatalf("the 101st reminder: %v %s, want a tool error saying too many", err, mcpclient.Text(res))
	}
	call(t, cs, "remind_me", map[string]any{"after": "1h", "text": "again", "key": "k7"}) // pending: idempotent, not refused
	call(t, cs, "cancel_reminder", map[string]any{"key": "k7"})
	call(t, cs, "remind_me", map[string]any{"after": "1h", "text": "room again"})
	if got := pending(t, cs); len(got) != 100 {
		t.Fatalf("%d pending, want 100", len(got))
	}
}

// waitMetric polls the node's /metrics until mcpgrain_sdk_schedules_total
// with label has value.
func waitMetric(t *testing.T, n *node, label, value string) {
	t.Helper()
	url := strings.TrimSuffix(n.endpoint, "/mcp") + "/metrics"
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for line := range strings.SplitSeq(string(b), "\n") {
				if strings.HasPrefix(line, "mcpgrain_sdk_schedules_total{") && strings.Contains(line, label) && strings.HasSuffix(line, " "+value) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcpgrain_sdk_schedules_total{%s} is not %s within 60s", label, value)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
