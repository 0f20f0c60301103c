package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// TestReadmeOAuthWalkthrough runs the README's OAuth walkthrough (Deploy,
// OAuth) as written, in bash from the repository root, like a newcomer
// with four terminals: Hydra, the dev node, the agent (which pauses and
// waits), the approver's CLI. Only the ports (4444, 4445, 8080 and the
// gRPC default, through MCPGRAIN_GRPC) and Hydra's database name are
// changed, so the test never collides with a port in use or a database
// someone has; the data directory comes from MCPGRAIN_DATA.
func TestReadmeOAuthWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testenv.HydraBinary(t) // the block's tools/hydra/build.sh then finds it built
	base := os.Getenv("MCPGRAIN_TEST_POSTGRES_URL")
	if base == "" {
		testenv.Unavailable(t, "MCPGRAIN_TEST_POSTGRES_URL is not set (the walkthrough keeps Hydra's state in Postgres on 127.0.0.1:5432)")
	}
	for _, tool := range []string{"createdb", "curl", "jq", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "the walkthrough needs %s", tool)
		}
	}
	blocks := readmeBlocks(t)
	ports := testenv.FreePorts(t, 4)
	db := "hydra_readme_" + testenv.RandomSuffix(4)
	t.Cleanup(func() { dropDatabase(t, base, db) })
	rewrite := strings.NewReplacer(
		"4444", fmt.Sprint(ports[0]), "4445", fmt.Sprint(ports[1]), "8080", fmt.Sprint(ports[2]),
		"-U postgres hydra", "-U postgres "+db, "5432/hydra?", "5432/"+db+"?")
	for _, name := range []string{"oauth-hydra", "oauth-node", "oauth-agent", "oauth-approver"} {
		if strings.TrimSpace(blocks[name]) == "" {
			t.Fatalf("README.md has no readme-test block %q", name)
		}
		blocks[name] = rewrite.Replace(blocks[name])
	}
	issuer := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[2])
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := readmeWorkdir(t, checkout) // bin/mcpgrain is built there, as the Quickstart's build block does
	build := exec.Command("bash", "-euo", "pipefail", "-c", blocks["build"])
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("README's build block: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPGRAIN_TOKEN=") && !strings.HasPrefix(kv, "MCPGRAIN_OAUTH_") && !strings.HasPrefix(kv, "DSN=") {
			env = append(env, kv)
		}
	}
	env = append(env, "MCPGRAIN_HTTP="+httpAddr, fmt.Sprintf("MCPGRAIN_GRPC=127.0.0.1:%d", ports[3]),
		"MCPGRAIN_URL=http://"+httpAddr+"/mcp", "MCPGRAIN_DATA="+t.TempDir())
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	start := func(name string) (*testenv.SyncBuffer, <-chan error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", blocks[name])
		cmd.Dir, cmd.Env = root, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children (the node, hydra) go with it
		out := &testenv.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done, exited := make(chan error, 1), make(chan struct{})
		go func() { done <- cmd.Wait(); close(done); close(exited) }()
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			if t.Failed() {
				t.Logf("%s output:\n%s", name, tailLines(out.String(), 40))
			}
		})
		return out, done
	}
	waitUntil := func(what string, out *testenv.SyncBuffer, done <-chan error, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case err := <-done:
				t.Fatalf("%s: exited early (%v); output:\n%s", what, err, out.String())
			case <-ctx.Done():
				t.Fatalf("%s: not within 6 minutes; output:\n%s", what, tailLines(out.String(), 40))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	answers := func(url string) bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	// Terminal 1: Hydra, ready when its discovery document answers.
	hydraOut, hydraDone := start("oauth-hydra")
	waitUntil("terminal 1 (hydra)", hydraOut, hydraDone, func() bool { return answers(issuer + "/.well-known/openid-configuration") })
	// Terminal 2: the node.
	nodeOut, nodeDone := start("oauth-node")
	waitUntil("terminal 2 (mcpgrain dev)", nodeOut, nodeDone, func() bool {
		return answers("http://"+httpAddr+"/readyz") && strings.Contains(nodeOut.String(), "press Ctrl-C to stop")
	})
	if want := "auth:          OAuth access tokens of " + issuer; !strings.Contains(nodeOut.String(), want) {
		t.Errorf("dev banner lacks %q:\n%s", want, nodeOut.String())
	}
	t.Logf("terminals 1 and 2 ready after %s", time.Since(began).Round(time.Millisecond))

	// Terminal 3: what a client discovers, then the agent's pause.
	agentOut, agentDone := start("oauth-agent")
	waitUntil("terminal 3 (the agent) pausing", agentOut, agentDone, func() bool {
		return strings.Contains(agentOut.String(), "waiting for the decision")
	})
	for _, want := range []string{
		fmt.Sprintf(`resource_metadata="http://%s/.well-known/oauth-protected-resource/mcp", scope="mcp:read"`, httpAddr),
		fmt.Sprintf(`"resource":"http://%s/mcp","authorization_servers":["%s"]`, httpAddr, issuer),
		"paused for approval: execution exec_",
	} {
		if !strings.Contains(agentOut.String(), want) {
			t.Fatalf("terminal 3 lacks %q:\n%s", want, agentOut.String())
		}
	}

	// Terminal 4: the approver's CLI gets its own token and accepts.
	cmd4 := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", blocks["oauth-approver"])
	cmd4.Dir, cmd4.Env = root, env
	cmd4.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd4.Cancel = func() error { return syscall.Kill(-cmd4.Process.Pid, syscall.SIGKILL) }
	cmd4.WaitDelay = 5 * time.Second
	out4, err := cmd4.CombinedOutput()
	if err != nil {
		t.Fatalf("terminal 4: %v\n%s", err, out4)
	}
	if !regexp.MustCompile(`exec_[0-9a-f]+: accepted`).Match(out4) || !strings.Contains(string(out4), "agent") {
		t.Fatalf("terminal 4 did not list and approve the agent's pause:\n%s", out4)
	}

	select {
	case err := <-agentDone:
		if err != nil {
			t.Fatalf("terminal 3 failed: %v\n%s", err, agentOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("terminal 3 still waiting after the approval:\n%s", agentOut.String())
	}
	if !strings.Contains(agentOut.String(), "completed:") || !strings.Contains(agentOut.String(), `"title": "try mcpgrain"`) {
		t.Fatalf("terminal 3 did not print the completed to-do:\n%s", agentOut.String())
	}
	t.Logf("OAuth walkthrough end to end in %s (after the build)", time.Since(began).Round(time.Millisecond))
}

// dropDatabase drops a database the walkthrough created.
func dropDatabase(t *testing.T, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Logf("drop database %s: %v", name, err)
		return
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Logf("drop database %s: %v", name, err)
	}
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
