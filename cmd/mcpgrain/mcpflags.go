package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/gateway/requeststate"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// mcpFlags are the flags of the MCP endpoint and session lifecycle.
type mcpFlags struct {
	tools, keysFile, token, origins string
	stateKey                        string
	noAuth                          bool
	rate                            float64
	burst, softCap                  int
	policy                          alarm.Policy
	ttl                             time.Duration
}

func (m *mcpFlags) register(fs *flag.FlagSet, toolsDefault string) {
	d := alarm.DefaultPolicy()
	fs.StringVar(&m.tools, "tools", toolsDefault, "comma-separated tool packs every MCP session gets (known: "+strings.Join(toolpacks.Names(), ", ")+")")
	fs.StringVar(&m.keysFile, "keys-file", "", `bearer tokens: JSON file {"keys":[{"token":"…","user":"…","org":"…","role":"admin|member"}]} (chmod 600); MCPGRAIN_KEYS="token=user:org:role;…" adds more`)
	fs.StringVar(&m.token, "token", "", "a bearer token for user dev in org local (admin)")
	fs.BoolVar(&m.noAuth, "no-auth", false, "accept requests without a token as user anonymous (only on a loopback --http)")
	fs.Float64Var(&m.rate, "rate-limit", 50, "MCP requests per second per principal (0: unlimited)")
	fs.IntVar(&m.burst, "rate-burst", 100, "burst size of the per-principal rate limit")
	fs.StringVar(&m.origins, "trusted-origins", "", "comma-separated browser origins allowed to call /mcp (e.g. https://app.example.com)")
	fs.DurationVar(&m.policy.SessionTimeout, "session-timeout", d.SessionTimeout, "idle time after which a session's runtime is passivated (record kept)")
	fs.DurationVar(&m.policy.PausedLease, "paused-lease", d.PausedLease, "longest single extension while an execution waits for approval")
	fs.DurationVar(&m.policy.MaxPausedIdle, "max-paused-idle", d.MaxPausedIdle, "idle time after which a session with paused executions is passivated anyway")
	fs.DurationVar(&m.policy.RunningLease, "running-lease", d.RunningLease, "longest single extension while work runs or a response streams")
	fs.DurationVar(&m.policy.MaxRunningIdle, "max-running-idle", d.MaxRunningIdle, "idle time after which a session with running work is passivated anyway")
	fs.DurationVar(&m.ttl, "session-ttl", 30*24*time.Hour, "idle time after which a session ends for good (404 afterwards)")
	fs.IntVar(&m.softCap, "resident-soft-cap", 32, "resident session runtimes per node before the least recently active idle one is evicted")
	fs.StringVar(&m.stateKey, "state-key", "", "hex key (at least 32 bytes) that signs 2026-07-28 requestState tokens; every node of a cluster needs the same")
}

func (m *mcpFlags) config() (app.MCPConfig, error) {
	packs := splitList(m.tools)
	if err := toolpacks.Validate(packs); err != nil {
		return app.MCPConfig{}, fmt.Errorf("%w: --tools: %v", errUsage, err)
	}
	for name, d := range map[string]time.Duration{"--session-timeout": m.policy.SessionTimeout, "--paused-lease": m.policy.PausedLease,
		"--max-paused-idle": m.policy.MaxPausedIdle, "--running-lease": m.policy.RunningLease, "--max-running-idle": m.policy.MaxRunningIdle, "--session-ttl": m.ttl} {
		if d <= 0 {
			return app.MCPConfig{}, fmt.Errorf("%w: %s must be positive", errUsage, name)
		}
	}
	if m.softCap < 1 {
		return app.MCPConfig{}, fmt.Errorf("%w: --resident-soft-cap must be at least 1", errUsage)
	}
	if m.rate < 0 || m.burst < 1 {
		return app.MCPConfig{}, fmt.Errorf("%w: --rate-limit must not be negative and --rate-burst must be at least 1", errUsage)
	}
	keys, err := auth.NewKeys()
	if err != nil {
		return app.MCPConfig{}, err
	}
	if m.keysFile != "" {
		fk, err := auth.LoadKeysFile(m.keysFile)
		if err != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: --keys-file: %v", errUsage, err)
		}
		if keys, err = keys.Merge(fk); err != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: --keys-file: %v", errUsage, err)
		}
	}
	if v := os.Getenv(auth.EnvVar); v != "" {
		ek, err := auth.ParseKeysEnv(v)
		if err != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: %v", errUsage, err)
		}
		if keys, err = keys.Merge(ek); err != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: %s: %v", errUsage, auth.EnvVar, err)
		}
	}
	if m.token != "" {
		tk, err := auth.NewKeys(auth.Entry{Token: m.token, User: "dev", Org: "local", Role: auth.RoleAdmin})
		if err != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: --token: %v", errUsage, err)
		}
		if keys, err = keys.Merge(tk); err != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: --token: %v", errUsage, err)
		}
	}
	var stateKey []byte
	if m.stateKey != "" {
		k, err := hex.DecodeString(m.stateKey)
		if err != nil || requeststate.CheckKey(k) != nil {
			return app.MCPConfig{}, fmt.Errorf("%w: --state-key must be hex for at least %d bytes (e.g. openssl rand -hex 32)", errUsage, requeststate.MinKeyLen)
		}
		stateKey = k
	}
	return app.MCPConfig{
		StateKey: stateKey,
		Packs:    packs, Keys: keys, NoAuth: m.noAuth, RateLimit: m.rate, RateBurst: m.burst,
		TrustedOrigins: splitList(m.origins), Policy: m.policy, SessionTTL: m.ttl, SoftCap: m.softCap,
	}, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// devStateKey reads the dev node's requestState key from dir, creating it
// on first use, so restarts keep accepting the tokens it issued.
func devStateKey(dir string) (string, error) {
	path := filepath.Join(dir, "state.key")
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	key := hex.EncodeToString(k)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return key, nil
}
