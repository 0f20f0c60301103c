// Package testcluster runs real mcpgrain clusters for tests: it builds the
// mcpgrain binary, starts a real Consul agent and N `mcpgrain node`
// processes on 127.0.0.1 with distinct ports, and can kill, stop, freeze
// and restart nodes. Every process is cleaned up when the test ends; node
// logs are printed when it fails.
//
// Set MCPGRAIN_TEST_RACE=1 to build the node binary with -race: the test
// then fails if any node reports a data race.
//
// It is also the harness the system tests (internal/systemtest) and the
// gateway's tests share: a single node in the test process ([StartLocal],
// [StartCodeNode]), MCP clients ([Connect], [ConnectMode], [MRTRClient],
// [ConnectOwnedBy]), code mode and HTTP API calls ([CallTool], [Pause],
// [API], [Todos], [Raw]), the approval service and CLI ([ApprovalClient],
// [CLI]) and a node's metrics ([ScrapeMetrics], [MetricsProbe]).
//
//	c := testcluster.Start(t, testcluster.Options{Nodes: 3})
//	res := c.Node(0).Probe(t, "grain-1", 1)
//	c.Kill(1)
package testcluster

import (
	"bufio"
	"bytes"
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

	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/placement"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// Token is the bearer token every test cluster node accepts (user dev, org
// local).
const Token = "mcpg_testcluster_token_0123456789"

// StateKey is the requestState signing key every test cluster node shares.
const StateKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// Options configure a test cluster.
type Options struct {
	// Nodes is the number of node processes. Default 3.
	Nodes int
	// ConsulTTL is the membership TTL given to nodes. Default 2s.
	ConsulTTL time.Duration
	// ProbeIdle passivates idle probe grains (0: never).
	ProbeIdle time.Duration
	// SQLite uses a shared SQLite file instead of Postgres.
	SQLite bool
	// ExtraArgs are appended to every node's command line.
	ExtraArgs []string
	// GatewayNodes adds this many nodes, after the others, that host no
	// grains (--gateway-only): every request through them is remote.
	GatewayNodes int
	// Hosts, when set, gives node i the IP Hosts[i]: it listens there
	// (HTTP on port 8080, cluster traffic on 7070) instead of on loopback.
	Hosts []string
	// Wrap, when set, is the command prefix node i is started with (e.g.
	// "ip netns exec NS" to run it in its own network namespace).
	Wrap func(i int) []string
	// Rewrite, when set, turns the Consul address and store DSN into ones
	// the nodes can reach (e.g. proxies on a bridge address).
	Rewrite func(consulAddr, dsn string) (string, string)
	// Binary is the node program: an SDK program's binary built by the
	// test (its `node` command takes mcpgrain's flags). "": the mcpgrain
	// command ([Binary]).
	Binary string
	// GRPC gives every node a gRPC listener (the ApprovalService) at
	// Node.GRPC; otherwise gRPC is disabled.
	GRPC bool
}

// Cluster is a running test cluster.
type Cluster struct {
	t      testing.TB
	opts   Options
	Consul *testenv.ConsulAgent
	// DSN is the store every node uses.
	DSN   string
	bin   string
	dir   string
	nodes []*Node
}

// Node is one node process.
type Node struct {
	c     *Cluster
	Index int
	// ID is the node id (stable across restarts).
	ID string
	// HTTP and Bind are the node's gateway and cluster addresses.
	HTTP, Bind string
	// GRPC is the node's gRPC address (empty unless Options.GRPC).
	GRPC    string
	logPath string
	gateway bool
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	starts  int
}

// builds are the programs built by this test process, by package.
var builds sync.Map // string -> *build

// build is one program built once per test process.
type build struct {
	once sync.Once
	bin  string
	err  error
}

// Binary builds the mcpgrain binary once per test process and returns its
// path. With MCPGRAIN_TEST_RACE=1 it is built with -race.
func Binary(t testing.TB) string {
	t.Helper()
	return Build(t, "./cmd/mcpgrain")
}

// Build builds the main package pkg (a path relative to the module root,
// e.g. "./examples/notes": an SDK program) once per test process and
// returns its binary's path. With MCPGRAIN_TEST_RACE=1 it is built with
// -race.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &build{})
	bd := v.(*build)
	bd.once.Do(func() { bd.bin, bd.err = goBuild(pkg) })
	if bd.err != nil {
		t.Fatalf("build %s: %v", pkg, bd.err)
	}
	return bd.bin
}

// goBuild builds pkg into a fresh temporary directory.
func goBuild(pkg string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "mcpgrain-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if os.Getenv("MCPGRAIN_TEST_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// Start builds the binary, starts Consul and opts.Nodes nodes, and waits
// until every node is ready and sees every other.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.ConsulTTL == 0 {
		opts.ConsulTTL = 2 * time.Second
	}
	c := &Cluster{t: t, opts: opts, bin: opts.Binary, dir: t.TempDir()}
	if c.bin == "" {
		c.bin = Binary(t)
	}
	if opts.SQLite {
		c.DSN = "sqlite:" + filepath.Join(c.dir, "mcpgrain.db")
	} else {
		c.DSN = testenv.Postgres(t)
	}
	c.Consul = testenv.StartConsul(t)
	total := opts.Nodes + opts.GatewayNodes
	ports := testenv.FreePorts(t, 3*total)
	for i := range total {
		httpAddr, bind := fmt.Sprintf("127.0.0.1:%d", ports[2*i]), fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		if i < len(opts.Hosts) {
			httpAddr, bind = opts.Hosts[i]+":8080", opts.Hosts[i]+":7070"
		}
		grpcAddr := ""
		if opts.GRPC {
			grpcAddr = fmt.Sprintf("127.0.0.1:%d", ports[2*total+i])
		}
		n := &Node{
			GRPC:    grpcAddr,
			c:       c,
			Index:   i,
			ID:      fmt.Sprintf("n%d", i+1),
			HTTP:    httpAddr,
			Bind:    bind,
			logPath: filepath.Join(c.dir, fmt.Sprintf("n%d.log", i+1)),
			gateway: i >= opts.Nodes,
		}
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		n.start()
	}
	for _, n := range c.nodes {
		n.WaitReady(30 * time.Second)
	}
	c.WaitMembers(total, 30*time.Second)
	return c
}

// Placement is the placement table the given nodes compute for kind when
// they are the running members, built independently of the nodes (to
// check they agree).
func (c *Cluster) Placement(kind string, nodes ...int) *placement.Table {
	var ms []membership.Member
	for _, i := range nodes {
		n := c.nodes[i]
		ms = append(ms, membership.Member{ID: n.ID, Address: n.Bind, Kinds: []string{kind}})
	}
	return placement.NewTable(membership.NewView(ms...))
}

// Node returns node i.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Nodes returns every node.
func (c *Cluster) Nodes() []*Node { return c.nodes }

func (c *Cluster) cleanup() {
	for _, n := range c.nodes {
		n.signal(syscall.SIGCONT)
		n.terminate(syscall.SIGKILL)
	}
	raced := false
	for _, n := range c.nodes {
		b, _ := os.ReadFile(n.logPath)
		if strings.Contains(string(b), "WARNING: DATA RACE") {
			raced = true
			c.t.Errorf("node %s reported a data race; log tail:\n%s", n.ID, tail(string(b), 80))
		}
	}
	if c.t.Failed() && !raced {
		for _, n := range c.nodes {
			b, _ := os.ReadFile(n.logPath)
			c.t.Logf("---- %s log (tail) ----\n%s", n.ID, tail(string(b), 40))
		}
		c.t.Logf("---- consul log (tail) ----\n%s", c.Consul.LogTail(20))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (n *Node) args() []string {
	c := n.c
	consulAddr, dsn := c.Consul.Addr(), c.DSN
	if c.opts.Rewrite != nil {
		consulAddr, dsn = c.opts.Rewrite(consulAddr, dsn)
	}
	args := []string{"node",
		"--node-id", n.ID,
		"--http", n.HTTP,
		"--bind", n.Bind,
		"--grpc", n.GRPC,
		"--consul", consulAddr,
		"--consul-ttl", c.opts.ConsulTTL.String(),
		"--store", dsn,
		"--enable-probe",
		"--probe-rate-limit", "0", // the load tests drive probes as fast as they can
		"--probe-idle", c.opts.ProbeIdle.String(),
		"--log-level", "debug",
		// Tests choose which node owns a session (by retrying the connect
		// until the hash places it there); pass "--session-placement",
		// "local" in ExtraArgs for the production default.
		"--session-placement", "hash",
	}
	if n.gateway {
		args = append(args, "--gateway-only")
	}
	return append(args, c.opts.ExtraArgs...)
}

func (n *Node) start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.c.t.Fatalf("open node log: %v", err)
	}
	n.starts++
	fmt.Fprintf(logf, "==== start #%d: %s %s\n", n.starts, n.c.bin, strings.Join(n.args(), " "))
	argv := append([]string{n.c.bin}, n.args()...)
	if n.c.opts.Wrap != nil {
		argv = append(n.c.opts.Wrap(n.Index), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Secrets through the environment, not the command line (a node warns
	// about those).
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=0", "MCPGRAIN_TOKEN="+Token, "MCPGRAIN_STATE_KEY="+StateKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		n.c.t.Fatalf("start node %s: %v", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
}

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

// terminate sends sig and waits for the process to exit (SIGKILL after 30s).
func (n *Node) terminate(sig syscall.Signal) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	n.mu.Lock()
	n.cmd = nil
	n.mu.Unlock()
}

// Kill sends SIGKILL to node i and waits for it to die.
func (c *Cluster) Kill(i int) { c.nodes[i].terminate(syscall.SIGKILL) }

// Stop stops node i gracefully (SIGTERM) and waits for it to exit.
func (c *Cluster) Stop(i int) { c.nodes[i].terminate(syscall.SIGTERM) }

// Start starts a stopped or killed node i again with the same id and
// addresses, without waiting for it (see [Node.WaitReady]).
func (c *Cluster) Start(i int) { c.nodes[i].start() }

// Freeze suspends node i (SIGSTOP), like a long GC pause or a VM stall,
// and returns once the process is stopped (state T in /proc, where there
// is one): a stop is asynchronous, and a request sent right after the
// signal must not be served by the node on its way down.
func (c *Cluster) Freeze(i int) {
	n := c.nodes[i]
	n.signal(syscall.SIGSTOP)
	n.mu.Lock()
	var pid int
	if n.cmd != nil && n.cmd.Process != nil {
		pid = n.cmd.Process.Pid
	}
	n.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for pid != 0 && time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // no /proc: trust the signal
		}
		// "pid (comm) S ...": the state follows the last ')'.
		if j := bytes.LastIndexByte(b, ')'); j > 0 && j+2 < len(b) && (b[j+2] == 'T' || b[j+2] == 't') {
			return
		}
		time.Sleep(time.Millisecond)
	}
	c.t.Fatalf("node %s did not stop within 10s of SIGSTOP", n.ID)
}

// Thaw resumes a frozen node (SIGCONT).
func (c *Cluster) Thaw(i int) { c.nodes[i].signal(syscall.SIGCONT) }

// Restart starts node i again with the same id and addresses and waits
// until it is ready.
func (c *Cluster) Restart(i int) {
	n := c.nodes[i]
	n.terminate(syscall.SIGKILL)
	n.start()
	n.WaitReady(30 * time.Second)
}

// WaitMembers waits until every running node's /readyz reports want members.
func (c *Cluster) WaitMembers(want int, timeout time.Duration) {
	c.t.Helper()
	var idx []int
	for i, n := range c.nodes {
		if n.Running() {
			idx = append(idx, i)
		}
	}
	c.WaitMembersOn(idx, want, timeout)
}

// WaitMembersOn waits until the given nodes' /readyz report want members.
func (c *Cluster) WaitMembersOn(nodes []int, want int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for _, i := range nodes {
		n := c.nodes[i]
		for {
			r, err := n.Ready()
			if err == nil && r.Members == want {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("node %s: members %d (err %v), want %d", n.ID, r.Members, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// RegisteredMembers returns how many members are registered and passing
// in Consul under the cluster's service name.
func (c *Cluster) RegisteredMembers() (int, error) {
	var entries []json.RawMessage
	resp, err := client.Get("http://" + c.Consul.Addr() + "/v1/health/service/mcpgrain?passing=true")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("consul health query: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
		return 0, err
	}
	return len(entries), nil
}

// WaitRegistered waits until want members are registered and passing in Consul.
func (c *Cluster) WaitRegistered(want int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := c.RegisteredMembers()
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("consul has %d passing members (err %v), want %d", n, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the node process is alive (frozen counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// ReadyState is the /readyz body.
type ReadyState struct {
	Status  string `json:"status"`
	Members int    `json:"members"`
	Node    string `json:"node"`
}

var client = &http.Client{Timeout: 10 * time.Second}

// Ready reads the node's /readyz.
func (n *Node) Ready() (ReadyState, error) {
	var r ReadyState
	resp, err := client.Get("http://" + n.HTTP + "/readyz")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, err
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("readyz %d: %s", resp.StatusCode, r.Status)
	}
	return r, nil
}

// WaitReady waits until the node answers /readyz with 200.
func (n *Node) WaitReady(timeout time.Duration) {
	n.c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := n.Ready()
		if err == nil {
			return
		}
		select {
		case <-n.exited:
			n.c.t.Fatalf("node %s exited while starting; log:\n%s", n.ID, n.LogTail(40))
		default:
		}
		if time.Now().After(deadline) {
			n.c.t.Fatalf("node %s not ready after %s: %v", n.ID, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LogTail returns the last n lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, _ := os.ReadFile(n.logPath)
	return tail(string(b), lines)
}

// LogContains reports whether the node's log contains s.
func (n *Node) LogContains(s string) bool {
	f, err := os.Open(n.logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}

// LogLines returns the last max lines of the node's log that contain s.
func (n *Node) LogLines(s string, max int) []string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
			if len(out) > max {
				out = out[1:]
			}
		}
	}
	return out
}

// ProbeResult is a /debug/probe reply.
type ProbeResult struct {
	Node      string `json:"node"`
	Epoch     uint64 `json:"epoch"`
	Count     int64  `json:"count"`
	Served    int64  `json:"served"`
	Via       string `json:"via"`
	Error     string `json:"error"`
	Retryable bool   `json:"retryable"`
	Status    int    `json:"-"`
}

// Probe calls the probe grain id through this node, adding delta.
func (n *Node) Probe(ctx context.Context, id string, delta int64) (ProbeResult, error) {
	var r ProbeResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/debug/probe/%s?delta=%d", n.HTTP, id, delta), nil)
	if err != nil {
		return r, err
	}
	req.Header.Set("Authorization", "Bearer "+Token) // the probe needs the admin role
	resp, err := client.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return r, err
	}
	r.Status = resp.StatusCode
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("probe %s via %s: status %d, body %q: %w", id, n.ID, resp.StatusCode, body, err)
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("probe %s via %s: status %d: %s", id, n.ID, resp.StatusCode, r.Error)
	}
	return r, nil
}

// ReminderSpec is one reminder for [Node.Remind].
type ReminderSpec struct {
	Name     string `json:"name"`
	DueAtMs  int64  `json:"due_at_ms"`
	PeriodMs int64  `json:"period_ms"`
}

// Remind makes the probe grain id register reminders, through this node.
func (n *Node) Remind(ctx context.Context, id string, rs []ReminderSpec) error {
	body, err := json.Marshal(map[string]any{"reminders": rs})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/debug/probe/%s/reminders", n.HTTP, id), strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("remind %s via %s: status %d: %s", id, n.ID, resp.StatusCode, b)
	}
	return nil
}

// Metric returns the sum of the node's metric samples whose exposition line
// starts with prefix (a name, optionally with labels), and whether any did.
func (n *Node) Metric(prefix string) (float64, bool) {
	resp, err := client.Get("http://" + n.HTTP + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				sum += v
				found = true
			}
		}
	}
	return sum, found
}
