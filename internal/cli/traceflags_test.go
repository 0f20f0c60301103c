package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/tracing/otlp"
)

// TestTraceToolArgumentsFlag: --trace-tool-arguments is off (0) by
// default, takes a byte count from the command line or
// MCPGRAIN_TRACE_TOOL_ARGUMENTS into the node's configuration, and a
// negative count is a usage error naming the flag.
func TestTraceToolArgumentsFlag(t *testing.T) {
	parsed := func(t *testing.T, env map[string]string, args ...string) (int, error) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c common
		c.register(fs, "127.0.0.1:0", "127.0.0.1:0")
		if err := parse(fs, args); err != nil {
			return 0, err
		}
		if err := c.validate(); err != nil {
			return 0, err
		}
		return c.appConfig(io.Discard).TraceToolArguments, nil
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want int
	}{
		{"default", nil, nil, otlp.DefaultToolArguments},
		{"set", nil, []string{"--trace-tool-arguments", "4096"}, 4096},
		{"environment", map[string]string{"MCPGRAIN_TRACE_TOOL_ARGUMENTS": "512"}, nil, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := parsed(t, tc.env, tc.args...); err != nil || got != tc.want {
				t.Fatalf("TraceToolArguments %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if otlp.DefaultToolArguments != 0 {
		t.Errorf("tool arguments on by default (%d bytes)", otlp.DefaultToolArguments)
	}
	if _, err := parsed(t, nil, "--trace-tool-arguments", "-1"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--trace-tool-arguments") {
		t.Errorf("--trace-tool-arguments -1: %v, want a usage error naming the flag", err)
	}
}
