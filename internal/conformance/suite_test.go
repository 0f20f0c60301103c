package conformance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/conformance"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// The requirement sets of the pinned suite that mcpgrain is run against,
// each with its expected-failures baseline in tools/conformance (every
// entry is explained in tools/conformance/FAILURES.md).
var requirementSets = []string{"2025-11-25", "2026-07-28"}

// The official conformance suite (pinned in tools/conformance) against a
// 3-node cluster, through a fourth, gateway-only node: every session and
// every continuation lives on another node. Each requirement set runs in
// full, scored and not-scored scenarios alike, and its failing checks must
// be exactly its baseline's: a new failure fails the test, and so does an
// expected failure that stopped failing (remove it from the baseline).
//
// MCPGRAIN_CONFORMANCE_OUT=DIR keeps the suite's results (DIR/<set>/).
func TestConformanceSuiteThroughAGatewayOnlyNode(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tools", "conformance")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		testenv.Unavailable(t, "conformance suite not installed (run: npm ci --prefix tools/conformance)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "node not found: %v", err)
	}
	// One principal (anonymous) sends every request of a set, faster than
	// the default per-principal rate limit (50/s, bursts of 100) on a fast
	// run: a 429 would fail checks that have nothing to do with MCP.
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, GatewayNodes: 1, ExtraArgs: []string{"--tools", "conformance", "--no-auth", "--rate-limit", "0"}})
	gw := c.Node(3)
	url := "http://" + gw.HTTP + "/mcp"

	for _, set := range requirementSets {
		t.Run(set, func(t *testing.T) {
			out := t.TempDir()
			if keep := os.Getenv("MCPGRAIN_CONFORMANCE_OUT"); keep != "" {
				out = filepath.Join(keep, set)
				if err := os.RemoveAll(out); err != nil {
					t.Fatal(err)
				}
			}
			baselinePath := filepath.Join(dir, "baseline-"+set+".yml")
			baseline, err := conformance.LoadBaseline(baselinePath)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// The suite checks the baseline for the scored scenarios (its
			// exit code); Judge checks it for all of them.
			cmd := exec.Command(node, "--import", "./node20-fs-glob.mjs", suite, "server",
				"--url", url, "--requirements", set, "--expected-failures", baselinePath, "-o", out)
			cmd.Dir = dir
			output, runErr := cmd.CombinedOutput()
			if err := os.WriteFile(filepath.Join(out, "suite.log"), output, 0o644); err != nil {
				t.Fatal(err)
			}
			checks, err := conformance.ReadResults(out)
			if err != nil || len(checks) == 0 {
				t.Fatalf("no results from the suite (exit: %v, results: %v):\n%s", runErr, err, output)
			}
			v := conformance.Judge(checks, baseline)
			t.Logf("requirements %s through a gateway-only node in %s: %d passed, %d failed, %d warnings; %d expected failures (suite exit: %v)",
				set, time.Since(start).Round(time.Second), v.Passed, v.Failed, v.Warned, len(v.Expected), runErr)
			if !v.OK() || runErr != nil {
				var b strings.Builder
				for _, c := range checks {
					if c.Failing() {
						fmt.Fprintf(&b, "  %s %s: %s\n", c.Status, c.Key(), firstLine(c.ErrorMessage))
					}
				}
				t.Errorf("requirements %s: the failing checks differ from %s (suite exit: %v)\nunexpected failures: %q\nstale entries (now not failing: remove them): %q\nfailing checks:\n%s\nthe suite's output ends (MCPGRAIN_CONFORMANCE_OUT=DIR keeps it all):\n%s",
					set, baselinePath, runErr, v.Unexpected, v.Stale, b.String(), tail(output, 40))
			}
		})
	}
	// Every session and every continuation was served by another node.
	if v, _ := gw.Metric("mcpgrain_session_activations_total"); v != 0 {
		t.Errorf("the gateway-only node built %v session runtimes", v)
	}
	if v, _ := gw.Metric("mcpgrain_continuation_exchanges_total"); v != 0 {
		t.Errorf("the gateway-only node served %v sessionless requests itself", v)
	}
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	return line
}
