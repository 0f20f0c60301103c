package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// pinnedTool is a program the integration tests run, built from the Go
// module proxy at a version pinned in tools/<name>/go.mod and cached in
// the user's cache directory, as tools/<name>/build.sh builds it.
type pinnedTool struct {
	name    string // the binary and the tools/ folder
	version string // in the cache path
	pkg     string // the main package to build
	env     string // the variable that names a binary to use instead
	onPath  bool   // a binary of that name on PATH will do
	hint    string // how to get one, for the message that skips a test
}

var (
	consulTool = pinnedTool{name: "consul", version: ConsulVersion, pkg: "github.com/hashicorp/consul", env: "MCPGRAIN_CONSUL_BIN", onPath: true,
		hint: "set MCPGRAIN_CONSUL_BIN, put consul on PATH, or build it with tools/consul/build.sh (a few minutes)"}
	hydraTool = pinnedTool{name: "hydra", version: HydraVersion, pkg: "github.com/ory/hydra/v2", env: "MCPGRAIN_HYDRA_BIN",
		hint: "set MCPGRAIN_HYDRA_BIN or build it with tools/hydra/build.sh"}
)

// cachePath is <os.UserCacheDir()>/mcpgrain/<name>-<version>/<name>.
func (p pinnedTool) cachePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locate user cache dir: %w", err)
	}
	return filepath.Join(dir, "mcpgrain", p.name+"-"+p.version, p.name), nil
}

// binary returns the tool's path: $env, else (onPath) the one on PATH,
// else the cached build. If none exists, the integration tier builds the
// cache; the default tier skips t.
func (p pinnedTool) binary(t testing.TB) string {
	t.Helper()
	if path := os.Getenv(p.env); path != "" {
		if err := checkExecutable(path); err != nil {
			Unavailable(t, "%s=%s: %v", p.env, path, err)
		}
		return path
	}
	if path, err := exec.LookPath(p.name); p.onPath && err == nil {
		return path
	}
	cache, err := p.cachePath()
	if err != nil {
		Unavailable(t, "no %s binary (%s): %v", p.name, p.hint, err)
	}
	if checkExecutable(cache) == nil {
		return cache
	}
	if !Integration() {
		Unavailable(t, "no %s binary: %s", p.name, p.hint)
	}
	t.Logf("building %s %s into %s (first run only; takes minutes)", p.name, p.version, cache)
	start := time.Now()
	path, err := p.build(context.Background())
	if err != nil {
		Unavailable(t, "build %s: %v", p.name, err)
	}
	t.Logf("built %s in %s", p.name, time.Since(start).Round(time.Second))
	return path
}

// build builds the tool into its cache path unless it is there, and
// returns that path. It runs `go build` in <repo>/tools/<name>.
// Concurrent callers (several test packages) wait for one build: the
// build holds a lock file and writes a temporary file that is renamed
// into place, so nobody ever sees a partial binary.
func (p pinnedTool) build(ctx context.Context) (string, error) {
	cache, err := p.cachePath()
	if err != nil {
		return "", err
	}
	if checkExecutable(cache) == nil {
		return cache, nil
	}
	dir := filepath.Dir(cache)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(dir, ".build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if checkExecutable(cache) == nil { // another process built it while we waited
		return cache, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s-build-%d", p.name, os.Getpid()))
	defer os.Remove(tmp) // no-op after the rename
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", tmp, p.pkg)
	cmd.Dir = filepath.Join(root, "tools", p.name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", p.pkg, cmd.Dir, err, tail(out.String(), 40))
	}
	if err := os.Rename(tmp, cache); err != nil {
		return "", err
	}
	return cache, nil
}
