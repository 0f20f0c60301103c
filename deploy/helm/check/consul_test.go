package check

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consulAgent starts a Consul dev agent from $MCPGRAIN_CONSUL_BIN (CI
// builds the pinned one: tools/consul/build.sh) on free loopback ports and
// returns its HTTP port, or 0 when the variable is unset (a failure in the
// integration tier, MCPGRAIN_INTEGRATION=1). The agent is stopped when the
// test ends.
func consulAgent(t *testing.T) int {
	t.Helper()
	bin := os.Getenv("MCPGRAIN_CONSUL_BIN")
	if bin == "" {
		if os.Getenv("MCPGRAIN_INTEGRATION") == "1" {
			t.Fatal("MCPGRAIN_CONSUL_BIN is not set (export MCPGRAIN_CONSUL_BIN=$(tools/consul/build.sh))")
		}
		return 0
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports := freeTCPUDPPorts(t, 4)
		dir := t.TempDir()
		cfg, _ := json.Marshal(map[string]any{
			"disable_update_check": true,
			"ports": map[string]int{
				"http": ports[0], "serf_lan": ports[1], "serf_wan": ports[2], "server": ports[3],
				"dns": -1, "https": -1, "grpc": -1, "grpc_tls": -1,
			},
		})
		if err := os.WriteFile(filepath.Join(dir, "consul.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		log, err := os.Create(filepath.Join(dir, "consul.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
			"-node", "helmcheck", "-config-file", filepath.Join(dir, "consul.json"))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
			_ = log.Close()
		}
		if lastErr = waitLeader(ports[0], exited); lastErr == nil {
			t.Cleanup(stop)
			return ports[0]
		}
		stop()
		b, _ := os.ReadFile(log.Name())
		t.Logf("consul agent attempt %d: %v\n%s", attempt+1, lastErr, b)
	}
	t.Fatalf("no consul agent: %v", lastErr)
	return 0
}

// waitLeader waits until the agent on port has elected itself.
func waitLeader(port int, exited <-chan struct{}) error {
	client := http.Client{Timeout: 2 * time.Second}
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			return fmt.Errorf("the agent exited")
		default:
		}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/status/leader", port))
		if err != nil {
			last = err
			continue
		}
		var leader string
		err = json.NewDecoder(resp.Body).Decode(&leader)
		resp.Body.Close()
		if err == nil && leader != "" {
			return nil
		}
		last = fmt.Errorf("no leader yet (%v)", err)
	}
	return last
}

// freeTCPUDPPorts returns n distinct loopback ports free for TCP and UDP
// (Consul's serf ports use both) a moment ago.
func freeTCPUDPPorts(t *testing.T, n int) []int {
	t.Helper()
	var held []func()
	defer func() {
		for _, c := range held {
			c()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, func() { _ = l.Close() })
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			if !strings.Contains(err.Error(), "in use") {
				t.Fatal(err)
			}
			continue
		}
		held = append(held, func() { _ = u.Close() })
		ports = append(ports, port)
	}
	return ports
}
