package gateway_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// The official conformance suite (@modelcontextprotocol/conformance@0.1.12,
// pinned in tools/conformance) against a 3-node cluster, through a fourth,
// gateway-only node: every session lives on another node.
func TestConformanceSuiteThroughAGatewayOnlyNode(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "tools", "conformance", "node_modules", ".bin", "conformance")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "conformance suite not installed (run: npm ci --prefix tools/conformance)")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, GatewayNodes: 1, ExtraArgs: []string{"--tools", "conformance", "--no-auth"}})
	gw := c.Node(3)
	cmd := exec.Command(bin, "server", "--url", "http://"+gw.HTTP+"/mcp",
		"--expected-failures", filepath.Join(root, "tools", "conformance", "baseline.yml"),
		"-o", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance suite failed: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Total: (\d+) passed, (\d+) failed`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in conformance output:\n%s", out)
	}
	passed, _ := strconv.Atoi(string(m[1]))
	if string(m[2]) != "0" || passed < 40 {
		t.Fatalf("conformance: %s passed, %s failed (want >= 40 passed, 0 failed)\n%s", m[1], m[2], out)
	}
	t.Logf("conformance through a gateway-only node: %d passed, 0 failed", passed)
	// Every session was served by another node.
	if v, _ := gw.Metric("mcpgrain_session_activations_total"); v != 0 {
		t.Fatalf("the gateway-only node built %v session runtimes", v)
	}
}
