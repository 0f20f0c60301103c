package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// TestPerPrincipalCapFlags: --max-handles-per-principal and
// --max-pending-asks-per-principal each default to their package's cap,
// take another one, 0 is unlimited (negative in the app's configuration,
// whose zero is the default), and a negative value is a usage error naming
// the flag.
func TestPerPrincipalCapFlags(t *testing.T) {
	for _, f := range []struct {
		flag  string
		def   int
		field func(app.MCPConfig) int
	}{
		{"--max-handles-per-principal", handle.DefaultMaxPerPrincipal, func(c app.MCPConfig) int { return c.MaxHandlesPerPrincipal }},
		{"--max-pending-asks-per-principal", mcpruntime.DefaultMaxPendingAsks, func(c app.MCPConfig) int { return c.MaxPendingAsksPerPrincipal }},
	} {
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
			return f.field(c), err
		}
		for _, tc := range []struct {
			name string
			args []string
			want int
		}{
			{"default", nil, f.def},
			{"set", []string{f.flag, "5"}, 5},
			{"unlimited", []string{f.flag, "0"}, -1},
		} {
			t.Run(f.flag+"/"+tc.name, func(t *testing.T) {
				if got, err := limit(t, tc.args...); err != nil || got != tc.want {
					t.Fatalf("%s: %v, %v; want %v", f.flag, got, err, tc.want)
				}
			})
		}
		if _, err := limit(t, f.flag, "-1"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), f.flag) {
			t.Errorf("%s -1: %v, want a usage error naming the flag", f.flag, err)
		}
	}
}
