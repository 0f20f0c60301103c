package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
)

// TestMaxPendingAsksPerPrincipalFlag: --max-pending-asks-per-principal
// defaults to mcpruntime's cap, takes another one, 0 is unlimited
// (negative in the app's configuration, whose zero is the default), and a
// negative value is a usage error naming the flag.
func TestMaxPendingAsksPerPrincipalFlag(t *testing.T) {
	limit := func(t *testing.T, args ...string) (int, error) {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var m mcpFlags
		m.register(fs, "demo", false)
		if err := parse(fs, args); err != nil {
			return 0, err
		}
		c, err := m.config()
		return c.MaxPendingAsksPerPrincipal, err
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"default", nil, mcpruntime.DefaultMaxPendingAsks},
		{"set", []string{"--max-pending-asks-per-principal", "5"}, 5},
		{"unlimited", []string{"--max-pending-asks-per-principal", "0"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := limit(t, tc.args...); err != nil || got != tc.want {
				t.Fatalf("MaxPendingAsksPerPrincipal %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := limit(t, "--max-pending-asks-per-principal", "-1"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--max-pending-asks-per-principal") {
		t.Errorf("--max-pending-asks-per-principal -1: %v, want a usage error naming the flag", err)
	}
}
