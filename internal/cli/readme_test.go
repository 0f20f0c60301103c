package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// readmeBlocks returns the shell blocks of README.md that follow a
// `<!-- readme-test: NAME -->` marker, by name.
func readmeBlocks(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- readme-test: ([a-z0-9-]+) -->\n```sh\n(.*?)```")
	blocks := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks[m[1]] = m[2]
	}
	return blocks
}

// readmeWorkdir returns a directory that looks like the repository root
// (a symbolic link to each of its entries) but has no bin/: README blocks
// run there build bin/mcpgrain into it, not into the checkout.
func readmeWorkdir(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "bin", ".git", ".mcpgrain":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReadmeQuickstartLiterally runs README's quickstart blocks as written,
// in bash from the repository root, like a newcomer with three terminals
// after building the binary: the dev node, `bin/mcpgrain try` (pauses and
// waits), then the CLI approval. Only the addresses and the data directory
// come from the environment (MCPGRAIN_HTTP, MCPGRAIN_GRPC, MCPGRAIN_URL,
// MCPGRAIN_DATA — the commands' own env fallbacks) so the test never
// collides with a port in use, and the root is a stand-in of links to the
// checkout's files (readmeWorkdir) so bin/mcpgrain is not built into the
// checkout. It checks the approval went end to end within five minutes
// of the build, and that the banner and try name the binary the README
// builds.
func TestReadmeQuickstartLiterally(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	blocks := readmeBlocks(t)
	for _, name := range []string{"build", "terminal-1", "terminal-2", "terminal-3"} {
		if strings.TrimSpace(blocks[name]) == "" {
			t.Fatalf("README.md has no readme-test block %q", name)
		}
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := readmeWorkdir(t, checkout)
	buildStart := time.Now()
	build := exec.Command("bash", "-euo", "pipefail", "-c", blocks["build"])
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("README's build block: %v\n%s", err, out)
	}
	t.Logf("build block in %s", time.Since(buildStart).Round(time.Millisecond))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	env := append(os.Environ(),
		"MCPGRAIN_HTTP="+httpAddr, "MCPGRAIN_GRPC="+grpcAddr,
		"MCPGRAIN_URL=http://"+httpAddr+"/mcp", "MCPGRAIN_DATA="+t.TempDir())
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// start runs a block in the background; done yields its exit error
	// once, then is closed.
	start := func(name string) (*exec.Cmd, *testenv.SyncBuffer, <-chan error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", blocks[name])
		cmd.Dir, cmd.Env = root, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // go run's child goes with it
		out := &testenv.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done, exited := make(chan error, 1), make(chan struct{})
		go func() { done <- cmd.Wait(); close(done); close(exited) }()
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		})
		return cmd, out, done
	}
	waitUntil := func(what string, out *testenv.SyncBuffer, done <-chan error, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case err := <-done:
				t.Fatalf("%s: exited early (%v); output:\n%s", what, err, out.String())
			case <-ctx.Done():
				t.Fatalf("%s: not within 5 minutes; output:\n%s", what, out.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	// Terminal 1: the dev node, ready when /readyz says so.
	_, devOut, devDone := start("terminal-1")
	waitUntil("terminal 1 (mcpgrain dev)", devOut, devDone, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(devOut.String(), "press Ctrl-C to stop")
	})
	for _, want := range []string{"MCP endpoint:  http://" + httpAddr + "/mcp", "bearer token:  quickstart-token-0001", `"Authorization": "Bearer quickstart-token-0001"`,
		"try it:        MCPGRAIN_TOKEN=quickstart-token-0001 bin/mcpgrain try", "bin/mcpgrain approve list",
		"approvals:     http://" + httpAddr + "/approvals  (inbox)"} {
		if !strings.Contains(devOut.String(), want) {
			t.Errorf("dev banner lacks %q:\n%s", want, devOut.String())
		}
	}

	t.Logf("terminal 1 ready after %s", time.Since(began).Round(time.Millisecond))
	// Terminal 2: the agent's execute pauses and waits for a decision.
	_, tryOut, tryDone := start("terminal-2")
	waitUntil("terminal 2 (mcpgrain try) pausing", tryOut, tryDone, func() bool {
		return strings.Contains(tryOut.String(), "waiting for the decision")
	})
	if !strings.Contains(tryOut.String(), "or from a shell:       bin/mcpgrain approve accept exec_") {
		t.Errorf("try does not name the README's binary:\n%s", tryOut.String())
	}
	link := regexp.MustCompile(`approve in a browser:\s+(http://\S+/approve/exec_[0-9a-f]+\S*)`).FindStringSubmatch(tryOut.String())
	if link == nil {
		t.Fatalf("try printed no approval link:\n%s", tryOut.String())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar} // the link's token moves into a cookie, then a redirect
	resp, err := browser.Get(link[1]) // the page the newcomer would open
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approval page %s: %d", link[1], resp.StatusCode)
	}

	// Terminal 3: list and accept from the CLI.
	cmd3 := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", blocks["terminal-3"])
	cmd3.Dir, cmd3.Env = root, env
	cmd3.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd3.Cancel = func() error { return syscall.Kill(-cmd3.Process.Pid, syscall.SIGKILL) }
	cmd3.WaitDelay = 5 * time.Second
	t.Logf("terminal 2 paused after %s", time.Since(began).Round(time.Millisecond))
	out3, err := cmd3.CombinedOutput()
	if err != nil {
		t.Fatalf("terminal 3: %v\n%s", err, out3)
	}
	if !regexp.MustCompile(`exec_[0-9a-f]+: accepted`).Match(out3) || !bytes.Contains(out3, []byte("demo.createTodo")) {
		t.Fatalf("terminal 3 did not list and approve the pause:\n%s", out3)
	}

	// Terminal 2 finishes with the created to-do.
	select {
	case err := <-tryDone:
		if err != nil {
			t.Fatalf("terminal 2 failed: %v\n%s", err, tryOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("terminal 2 still waiting after the approval:\n%s", tryOut.String())
	}
	if !strings.Contains(tryOut.String(), "completed:") || !strings.Contains(tryOut.String(), `"title": "try mcpgrain"`) {
		t.Fatalf("terminal 2 did not print the completed to-do:\n%s", tryOut.String())
	}
	// The README's curl, at the test's address: the quickstart token's
	// organization's list (without the token the demo API refuses).
	const readmeCurl = "`curl -H \"Authorization: Bearer $MCPGRAIN_TOKEN\" http://127.0.0.1:8080/demo/todos`"
	if readme, _ := os.ReadFile("../../README.md"); !bytes.Contains(readme, []byte(readmeCurl)) {
		t.Fatalf("README.md no longer shows the to-do with %s", readmeCurl)
	}
	if resp, err := http.Get("http://" + httpAddr + "/demo/todos"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("demo API without a token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", "http://"+httpAddr+"/demo/todos", nil)
	req.Header.Set("Authorization", "Bearer quickstart-token-0001")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var body strings.Builder
	for sc.Scan() {
		body.WriteString(sc.Text())
	}
	resp.Body.Close()
	if strings.Count(body.String(), `"title":"try mcpgrain"`) != 1 {
		t.Fatalf("demo API holds %s, want exactly one new to-do", body.String())
	}
	t.Logf("quickstart end to end in %s after the build", time.Since(began).Round(time.Millisecond))
}
