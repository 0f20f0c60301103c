package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var (
	buildMu  sync.Mutex
	built    = map[string]string{} // package → binary
	binDir   string
	buildErr error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// nodeBinary builds mcpgrain from this repository once per test process
// (the Go build cache makes it quick after the first time).
func nodeBinary(t *testing.T) string {
	t.Helper()
	return programBinary(t, "./cmd/mcpgrain")
}

// programBinary builds the program of the repository's package pkg (e.g.
// ./examples/hello, an SDK program) once per test process.
func programBinary(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	if buildErr == nil && binDir == "" {
		binDir, buildErr = os.MkdirTemp("", "mcpgrain-helmcheck-")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

// nodeFlags returns the flags `mcpgrain node -h` lists.
func nodeFlags(t *testing.T) map[string]bool {
	t.Helper()
	return programNodeFlags(t, nodeBinary(t))
}

// programNodeFlags returns the flags `<bin> node -h` lists.
func programNodeFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, "node", "-h").CombinedOutput() // -h exits non-zero
	line := regexp.MustCompile(`^  --?([a-z][a-z0-9-]*)( |$)`) // "  --name type" (grouped help) or "  -name" (flag.PrintDefaults)
	flags := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = true
		}
	}
	if !flags["store-file"] || !flags["shutdown-timeout"] || len(flags) < 30 {
		t.Fatalf("could not read the flags of `%s node -h` (%d found):\n%s", filepath.Base(bin), len(flags), out)
	}
	return flags
}

// TestArgsAreNodeFlags: every argument the pods pass is a flag of
// `mcpgrain node` (a typo would stop every member at start).
func TestArgsAreNodeFlags(t *testing.T) {
	known := nodeFlags(t)
	c := loadChart(t)
	for name, vals := range cases(t) {
		t.Run(name, func(t *testing.T) {
			for flag := range nodeOf(t, render(t, c, vals)).flags(t) {
				if !known[flag] {
					t.Errorf("--%s is no flag of `mcpgrain node` (mcpgrain node -h)", flag)
				}
			}
		})
	}
}

// TestRenderedNodeStarts runs the rendered container's command line as the
// kubelet would: the downward-API variables filled in (the pod's and its
// host's IP are 127.0.0.1), every Secret item written where its volume is
// mounted (with the volume's mode), and $(VAR)s expanded. The Consul agent
// "on the host" is a dev agent ($MCPGRAIN_CONSUL_BIN; without it the node
// runs with --consul=, alone), the store DSN in the Secret is SQLite, and
// listen addresses use 127.0.0.1 instead of every interface. The probes'
// paths and ports must then answer, the keys file must authenticate, the
// node must not warn about a secret on its command line, and SIGTERM must
// stop it within the pod's grace period less the preStop sleep. It runs
// mcpgrain's image (the default values) and an SDK program's
// (examples/hello/values.yaml, the hello binary), whose rendered --tools
// must serve the program's own tool beside code mode's.
func TestRenderedNodeStarts(t *testing.T) {
	t.Run("mcpgrain", func(t *testing.T) {
		renderedNodeStarts(t, nodeBinary(t), valuesFile(t, ""), nil)
	})
	t.Run(programCase, func(t *testing.T) {
		renderedNodeStarts(t, programBinary(t, programPkg), programValues(t), func(t *testing.T, mcpURL, bearer string) {
			tools := toolNames(t, mcpURL, bearer)
			for _, want := range []string{"greet", "execute"} {
				if !slices.Contains(tools, want) {
					t.Errorf("tools/list on the rendered node: %q, want %s (--tools=hello,code)", tools, want)
				}
			}
			t.Logf("the rendered hello node serves %q", tools)
		})
	})
}

// renderedNodeStarts renders the chart with base (plus created secrets and
// free ports), runs bin with the rendered command line as the kubelet
// would, checks it, calls serving (if any) with its MCP endpoint and a
// bearer token of its keys file, and stops it.
func renderedNodeStarts(t *testing.T, bin string, base map[string]any, serving func(t *testing.T, mcpURL, bearer string)) {
	c := loadChart(t)
	root := t.TempDir()
	consulPort := consulAgent(t)
	if consulPort == 0 {
		t.Log("MCPGRAIN_CONSUL_BIN is not set: the node runs without Consul (--consul=)")
	}
	const bearer = "helmcheck-bearer-token-0001"
	vals := withValues(base, map[string]any{
		"secrets.create":          true,
		"secrets.token.key":       "token",
		"secrets.values.keysJson": `{"keys":[{"token":"` + bearer + `","user":"alice","org":"acme","role":"admin"}]}`,
		"secrets.values.stateKey": strings.Repeat("ab", 32),
		"secrets.values.storeDSN": "sqlite:" + filepath.Join(root, "store.db"),
		"secrets.values.token":    "helmcheck-dev-token-0001",
		"gateway.httpPort":        freePort(t),
		"gateway.grpcPort":        freePort(t),
		"cluster.port":            freePort(t),
		"consul.hostAgentPort":    consulPort,
	})
	r := render(t, c, vals)
	n := nodeOf(t, r)
	secret := only[*corev1.Secret](t, r)

	// The files of the secret volumes, with their modes.
	for _, m := range n.container.VolumeMounts {
		for _, v := range n.pod.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.Secret == nil || src.Secret.Name != secret.Name {
					t.Fatalf("volume %s reads Secret %+v, not the chart's", v.Name, src)
				}
				for _, it := range src.Secret.Items {
					file := filepath.Join(root, m.MountPath, it.Path)
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					data, ok := secret.Data[it.Key]
					if !ok {
						t.Fatalf("Secret %s has no key %s", secret.Name, it.Key)
					}
					if err := os.WriteFile(file, data, os.FileMode(deref(v.Projected.DefaultMode))); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	downward := map[string]string{"POD_NAME": "mcpgrain-0", "POD_IP": "127.0.0.1", "HOST_IP": "127.0.0.1"}
	var args []string
	for _, a := range n.container.Args {
		a = n.expand(t, a, downward)
		a = strings.Replace(a, "=/etc/mcpgrain/", "="+filepath.Join(root, "etc/mcpgrain")+"/", 1)
		a = strings.Replace(a, "=0.0.0.0:", "=127.0.0.1:", 1)
		if strings.HasPrefix(a, "--consul=") && consulPort == 0 {
			a = "--consul="
		}
		args = append(args, a)
	}
	cmd := exec.Command(bin, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MCPGRAIN_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	for _, e := range n.container.Env {
		if e.ValueFrom == nil {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()

	httpPort := n.port(t, "http")
	probe := func(p *corev1.Probe) (int, error) {
		port := httpPort
		if p.HTTPGet.Port.String() != "http" {
			port = int32(p.HTTPGet.Port.IntValue())
		}
		client := http.Client{Timeout: time.Duration(p.TimeoutSeconds) * time.Second}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, p.HTTPGet.Path))
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	sp := n.container.StartupProbe
	deadline := time.Now().Add(time.Duration(sp.PeriodSeconds*sp.FailureThreshold) * time.Second)
	for {
		if code, _ := probe(sp); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the startup probe (%s) never passed:\n%s", sp.HTTPGet.Path, out.String())
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the node exited (%v) before its startup probe passed:\n%s", err, out.String())
		default:
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": n.container.LivenessProbe, "readiness": n.container.ReadinessProbe} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, err := probe(p)
			if code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s probe %s: %d %v\n%s", name, p.HTTPGet.Path, code, err, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// What Consul publishes is what peers dial (and Prometheus scrapes):
	// the pod's name as id, the advertised pod IP and cluster port, the
	// gateway address in meta "http".
	if consulPort != 0 {
		var entries []struct {
			Service struct {
				ID, Address string
				Port        int
				Meta        map[string]string
			}
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/health/service/%s?passing=1", consulPort, valueAt(t, c, vals, "cluster.name")))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&entries)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("mcpgrain-0 127.0.0.1:%d", n.port(t, "cluster"))
		if len(entries) != 1 || fmt.Sprintf("%s %s:%d", entries[0].Service.ID, entries[0].Service.Address, entries[0].Service.Port) != want {
			t.Errorf("Consul lists %+v, want one member %s", entries, want)
		} else if _, port, _ := strings.Cut(entries[0].Service.Meta["http"], ":"); port != strconv.Itoa(int(httpPort)) {
			t.Errorf("Consul meta http %q: want the --http port %d", entries[0].Service.Meta["http"], httpPort)
		} else {
			t.Logf("Consul lists member %s", want)
		}
	}

	// The keys file from the Secret authenticates.
	for token, want := range map[string]int{bearer: http.StatusOK, "not-a-token-of-the-keys-file": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/executions", httpPort), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /api/executions with token %q: %d, want %d (%s)", token, resp.StatusCode, want, body)
		}
	}

	if serving != nil {
		serving(t, fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort), bearer)
	}

	// The pod's stop: SIGTERM after the preStop sleep; the node must be
	// gone before the kubelet's SIGKILL.
	grace := time.Duration(deref64(n.pod.TerminationGracePeriodSeconds)-n.container.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	_ = cmd.Process.Signal(syscall.SIGTERM)
	stopped := time.Now()
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
		t.Logf("stopped %s after SIGTERM (grace after preStop: %s)", time.Since(stopped).Round(time.Millisecond), grace)
	case <-time.After(grace):
		t.Fatalf("still running %s after SIGTERM: the kubelet would kill it\n%s", grace, out.String())
	}
	if strings.Contains(out.String(), "warning:") {
		t.Errorf("the node warns about its command line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `"msg":"node stopped"`) {
		t.Errorf("no clean stop in the node's log:\n%s", out.String())
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, _ := strconv.Atoi(strings.TrimPrefix(l.Addr().String(), "127.0.0.1:"))
	return p
}

// toolNames lists the tools of the MCP endpoint with a bearer token, as a
// plain HTTP client: initialize, initialized, tools/list (each response
// JSON or one server-sent event).
func toolNames(t *testing.T, mcpURL, bearer string) []string {
	t.Helper()
	session := ""
	post := func(body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s %s: %d %s", mcpURL, body, resp.StatusCode, data)
		}
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "data: "); ok {
				return []byte(rest)
			}
		}
		return data
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"helmcheck","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var list struct {
		Result struct {
			Tools []struct{ Name string }
		}
	}
	data := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("tools/list: %v: %s", err, data)
	}
	var names []string
	for _, tool := range list.Result.Tools {
		names = append(names, tool.Name)
	}
	return names
}
