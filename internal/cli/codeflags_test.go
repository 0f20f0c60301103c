package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/sandbox"
)

// TestExecutionCapFlags: the running caps and the slot wait become the node's pool options (the
// flags' defaults are the pool's; --exec-slot-wait 0 is "refuse at once"), from the command line or
// the environment; a negative value is a usage error naming the flag.
func TestExecutionCapFlags(t *testing.T) {
	pool := func(t *testing.T, env map[string]string, args ...string) (sandbox.PoolOptions, error) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c codeFlags
		c.register(fs, false)
		if err := parse(fs, args); err != nil {
			return sandbox.PoolOptions{}, err
		}
		cc, err := c.config()
		return cc.Pool, err
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want sandbox.PoolOptions
	}{
		{"defaults", nil, nil, sandbox.PoolOptions{MaxRunning: sandbox.DefaultMaxRunning(),
			MaxRunningPerTenant: sandbox.DefaultMaxRunningPerTenant, SlotWait: sandbox.DefaultSlotWait}},
		{"set", nil, []string{"--exec-max-running", "16", "--exec-max-running-per-org", "10", "--exec-slot-wait", "2s"},
			sandbox.PoolOptions{MaxRunning: 16, MaxRunningPerOrg: 10, MaxRunningPerTenant: 4, SlotWait: 2 * time.Second}},
		{"no wait", map[string]string{"MCPGRAIN_EXEC_SLOT_WAIT": "0s"}, nil,
			sandbox.PoolOptions{MaxRunning: sandbox.DefaultMaxRunning(), MaxRunningPerTenant: 4, SlotWait: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pool(t, tc.env, tc.args...)
			if err != nil || got != tc.want {
				t.Fatalf("pool options %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, args := range [][]string{{"--exec-max-running-per-org", "-1"}, {"--exec-slot-wait", "-1s"}} {
		if _, err := pool(t, nil, args...); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v, want a usage error naming the flag", args, err)
		}
	}
}

// TestExecuteAPIBytesFlag: --execute-api-bytes becomes the code config's
// declaration budget (its default the package's; 0 is "none", a negative
// budget; a negative value is a usage error naming the flag).
func TestExecuteAPIBytesFlag(t *testing.T) {
	budget := func(t *testing.T, args ...string) (int, error) {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c codeFlags
		c.register(fs, false)
		if err := parse(fs, args); err != nil {
			return 0, err
		}
		cc, err := c.config()
		return cc.APIBudget, err
	}
	for _, tc := range []struct {
		args []string
		want int
	}{{nil, 8 << 10}, {[]string{"--execute-api-bytes", "2048"}, 2048}, {[]string{"--execute-api-bytes", "0"}, -1}} {
		if got, err := budget(t, tc.args...); err != nil || got != tc.want {
			t.Errorf("%v: APIBudget %d, %v; want %d", tc.args, got, err, tc.want)
		}
	}
	if _, err := budget(t, "--execute-api-bytes", "-1"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--execute-api-bytes") {
		t.Errorf("--execute-api-bytes -1: %v, want a usage error naming the flag", err)
	}
}
