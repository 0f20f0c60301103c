package cli

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// TestNodeShutdownTimeoutBoundsTheStop: a graceful stop ends within
// --shutdown-timeout even when an execution would run far longer. A pod's
// terminationGracePeriodSeconds (deploy/helm) is derived from this bound.
func TestNodeShutdownTimeoutBoundsTheStop(t *testing.T) {
	const (
		token   = "shutdown-test-token-0001"
		timeout = 2 * time.Second
	)
	addr := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cmd := exec.Command(testcluster.Binary(t), "node", "--node-id", "s1", "--http", addr, "--grpc", "",
		"--bind", "127.0.0.1:0", "--consul", "", "--store", "sqlite:"+filepath.Join(t.TempDir(), "s.db"),
		"--exec-timeout", "2m", "--shutdown-timeout", timeout.String())
	cmd.Env = append(os.Environ(), "MCPGRAIN_TOKEN="+token, "MCPGRAIN_STATE_KEY="+strings.Repeat("ab", 32))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for began := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(began) > 15*time.Second {
			t.Fatalf("node not ready after 15s:\n%s", out.String())
		}
	}

	post := func(session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatalf("initialize: %s, no session id", resp.Status)
	}
	resp = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()

	// An execution that spins for a minute: it neither finishes nor pauses
	// within the drain.
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"code":"const t = Date.now(); while (Date.now() - t < 60000) {} return 1"}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	for began := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if n, ok := metric(t, addr, "mcpgrain_running_executions"); ok && n == 1 {
			break
		}
		if time.Since(began) > 15*time.Second {
			t.Fatalf("the execution is not running after 15s:\n%s", out.String())
		}
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	stopped := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(stopped)
		t.Logf("stopped %s after SIGTERM (--shutdown-timeout %s)", took.Round(time.Millisecond), timeout)
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
		}
		if took < timeout-500*time.Millisecond {
			t.Errorf("stopped after %s: the running execution was not waited for", took)
		}
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("still running %s after SIGTERM with --shutdown-timeout %s:\n%s", timeout+5*time.Second, timeout, out.String())
	}
	if !strings.Contains(out.String(), `msg="shutting down" timeout=`+timeout.String()) {
		t.Errorf("the stop did not use --shutdown-timeout:\n%s", out.String())
	}
}

// metric returns the value of the first series of a metric on /metrics.
func metric(t *testing.T, addr, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			fields := strings.Fields(line)
			if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
