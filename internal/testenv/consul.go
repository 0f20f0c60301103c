package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ConsulVersion is the Consul release pinned by tools/consul/go.mod; the
// cached build lives in a directory named after it.
const ConsulVersion = "1.14.11"

// modulePath is the module whose go.mod marks the repository root.
const modulePath = "github.com/mcpgrain/mcpgrain"

// ConsulCachePath returns where the pinned Consul agent is cached:
// <os.UserCacheDir()>/mcpgrain/consul-<ConsulVersion>/consul (on Linux
// usually ~/.cache/mcpgrain/consul-1.14.11/consul). [BuildConsul] writes it.
func ConsulCachePath() (string, error) { return consulTool.cachePath() }

// ConsulBinary returns the path of a Consul agent binary, looking in order at
// $MCPGRAIN_CONSUL_BIN, `consul` on PATH and the cached build at
// [ConsulCachePath]. If none exists, the integration tier
// (MCPGRAIN_INTEGRATION=1) builds the cached binary from tools/consul (this
// takes minutes the first time); the default tier skips t.
func ConsulBinary(t testing.TB) string {
	t.Helper()
	return consulTool.binary(t)
}

// BuildConsul builds the pinned Consul agent into [ConsulCachePath] unless it
// is already there, and returns its path. It runs `go build` in
// <repo>/tools/consul, where the repository root is found by walking up from
// the working directory; concurrent callers wait for one build.
func BuildConsul(ctx context.Context) (string, error) { return consulTool.build(ctx) }

// RepoRoot returns the directory holding the go.mod of module
// github.com/mcpgrain/mcpgrain, found by walking up from the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// modulePathOf returns the module path declared by the go.mod at path, or ""
// if it cannot be read.
func modulePathOf(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// FreePort returns a port on 127.0.0.1 that was free (TCP and UDP) a moment
// ago. It is chosen outside the kernel's ephemeral range where possible, so
// an outgoing connection cannot take it while a service using it restarts.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct ports as [FreePort] does (all are held open
// together while choosing, so they differ).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freePorts(n)
	if err != nil {
		t.Fatalf("find free ports: %v", err)
	}
	return ports
}

// freePorts picks n ports free for both TCP and UDP on 127.0.0.1 (Consul's
// serf ports use both). It tries random ports below the ephemeral range
// first and falls back to kernel-assigned ones.
func freePorts(n int) ([]int, error) {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	ports := make([]int, 0, n)
	lo, hi := portRange()
	for tries := 0; len(ports) < n && hi > lo && tries < 100*n; tries++ {
		p := lo + mrand.IntN(hi-lo)
		if slices.Contains(ports, p) {
			continue
		}
		if cs, ok := holdPort(p); ok {
			held = append(held, cs...)
			ports = append(ports, p)
		}
	}
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			held = append(held, u)
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// holdPort binds TCP and UDP port p on 127.0.0.1.
func holdPort(p int) ([]io.Closer, bool) {
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, false
	}
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		_ = l.Close()
		return nil, false
	}
	return []io.Closer{l, u}, true
}

// portRange returns [lo, hi) of ports the kernel never hands out on its own:
// from 10000 up to the start of the ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range). Empty if unknown.
func portRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	ephLo, err1 := strconv.Atoi(f[0])
	ephHi, err2 := strconv.Atoi(f[1])
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0
	case ephLo-10000 >= 1000:
		return 10000, ephLo
	case 65536-(ephHi+1) >= 1000:
		return ephHi + 1, 65536
	}
	return 0, 0
}

// consulReadyTimeout bounds how long StartConsul waits for a leader.
const consulReadyTimeout = 30 * time.Second

// consulStopGrace is how long Stop waits after SIGTERM before SIGKILL.
const consulStopGrace = 10 * time.Second

// ConsulAgent is a Consul agent in dev mode (a single in-memory server)
// started by [StartConsul]. It listens only on 127.0.0.1, on ports of its
// own, so several agents can run at once.
type ConsulAgent struct {
	bin      string
	node     string
	dir      string
	logPath  string
	httpPort int
	config   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *os.File
}

// StartConsul starts a dev-mode Consul agent for t and waits until it has a
// leader and answers catalog queries. The agent is stopped when t ends; its
// log is printed (tail) if t failed. Without a consul binary it skips or
// fails t per tier (see [ConsulBinary]).
func StartConsul(t testing.TB) *ConsulAgent {
	t.Helper()
	bin := ConsulBinary(t)
	a := &ConsulAgent{
		bin:  bin,
		node: "mcpgrain-test-" + RandomSuffix(4),
		dir:  t.TempDir(),
	}
	a.logPath = filepath.Join(a.dir, "consul.log")
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("consul agent %s (%s) log tail:\n%s", a.node, a.Addr(), a.LogTail(80))
		}
	})
	var lastErr error
	for attempt := range 3 { // a chosen port may be taken before consul binds it
		ports, err := freePorts(4)
		if err != nil {
			t.Fatalf("find free ports: %v", err)
		}
		if err := a.writeConfig(ports); err != nil {
			t.Fatalf("write consul config: %v", err)
		}
		if lastErr = a.start(); lastErr == nil {
			return a
		}
		t.Logf("consul agent start attempt %d failed: %v", attempt+1, lastErr)
		a.Kill()
	}
	t.Fatalf("start consul agent: %v\nlog tail:\n%s", lastErr, a.LogTail(80))
	return nil
}

func (a *ConsulAgent) writeConfig(ports []int) error {
	a.httpPort = ports[0]
	cfg := map[string]any{
		"disable_update_check": true,
		"ports": map[string]int{
			"http":     ports[0],
			"serf_lan": ports[1],
			"serf_wan": ports[2],
			"server":   ports[3],
			"dns":      -1,
			"https":    -1,
			"grpc":     -1,
			"grpc_tls": -1,
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	a.config = filepath.Join(a.dir, "consul.json")
	return os.WriteFile(a.config, b, 0o644)
}

// start launches the agent on the configured ports and waits until ready.
func (a *ConsulAgent) start() error {
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== %s starting consul agent %s on http 127.0.0.1:%d\n", time.Now().Format(time.RFC3339Nano), a.node, a.httpPort)
	cmd := exec.Command(a.bin, "agent", "-dev",
		"-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-node", a.node, "-config-file", a.config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", a.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	a.mu.Lock()
	a.cmd, a.done, a.log = cmd, done, logf
	a.mu.Unlock()
	return a.waitReady(done)
}

func (a *ConsulAgent) waitReady(exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(consulReadyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("consul agent exited during startup (see log %s)", a.logPath)
		default:
		}
		if lastErr = a.probe(client); lastErr == nil {
			return nil
		}
		select {
		case <-exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("consul agent at %s not ready after %s: %v", a.Addr(), consulReadyTimeout, lastErr)
}

// probe returns nil once the agent has a leader and lists itself in the
// catalog.
func (a *ConsulAgent) probe(client *http.Client) error {
	var leader string
	if err := getJSON(client, "http://"+a.Addr()+"/v1/status/leader", &leader); err != nil {
		return err
	}
	if leader == "" {
		return errors.New("no leader yet")
	}
	var nodes []struct{ Node string }
	if err := getJSON(client, "http://"+a.Addr()+"/v1/catalog/nodes", &nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Node == a.node {
			return nil
		}
	}
	return errors.New("node not yet in catalog")
}

func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, v)
}

// Addr returns the host:port of the agent's HTTP API.
func (a *ConsulAgent) Addr() string { return fmt.Sprintf("127.0.0.1:%d", a.httpPort) }

// Node returns the agent's node name.
func (a *ConsulAgent) Node() string { return a.node }

// LogPath returns the file the agent logs to (all runs, appended).
func (a *ConsulAgent) LogPath() string { return a.logPath }

// LogTail returns the last n lines of the agent's log.
func (a *ConsulAgent) LogTail(n int) string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", a.logPath, err)
	}
	return tail(string(b), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the agent: SIGTERM, then SIGKILL if it has not exited within
// a bound. It returns once the process has exited; calling it on a
// stopped agent does nothing.
func (a *ConsulAgent) Stop() { a.terminate(syscall.SIGTERM, consulStopGrace) }

// Kill stops the agent with SIGKILL and waits for it to exit.
func (a *ConsulAgent) Kill() { a.terminate(syscall.SIGKILL, 0) }

func (a *ConsulAgent) terminate(sig syscall.Signal, grace time.Duration) {
	a.mu.Lock()
	cmd, done, logf := a.cmd, a.done, a.log
	a.cmd, a.done, a.log = nil, nil, nil
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	} else {
		_ = cmd.Process.Kill()
	}
	<-done
	fmt.Fprintf(logf, "==== %s consul agent stopped (%v)\n", time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
	_ = logf.Close()
}

// Restart stops the agent (if it is running) and starts it again on the
// same ports, waiting until it is ready. A dev-mode agent keeps nothing
// across a restart: every registration is lost, which is the "Consul agent
// restart" fault. Like t.Fatal, call it from the test's goroutine.
func (a *ConsulAgent) Restart(t testing.TB) {
	t.Helper()
	a.Stop()
	if err := a.start(); err != nil {
		a.Kill()
		t.Fatalf("restart consul agent: %v\nlog tail:\n%s", err, a.LogTail(80))
	}
}
