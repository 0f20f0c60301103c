package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/exchange"
)

// TestStreamKeepaliveFlag: --stream-keepalive defaults to the exchange
// package's interval, takes another one from the command line or the
// environment, 0 turns the keepalive off (negative in the app's
// configuration), and a negative value is a usage error naming the flag.
func TestStreamKeepaliveFlag(t *testing.T) {
	keepalive := func(t *testing.T, env map[string]string, args ...string) (time.Duration, error) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var m mcpFlags
		m.register(fs, "demo", false)
		if err := parse(fs, args); err != nil {
			return 0, err
		}
		c, err := m.config()
		return c.StreamKeepalive, err
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want time.Duration
	}{
		{"default", nil, nil, exchange.DefaultStreamKeepalive},
		{"set", nil, []string{"--stream-keepalive", "5s"}, 5 * time.Second},
		{"environment", map[string]string{"MCPGRAIN_STREAM_KEEPALIVE": "15s"}, nil, 15 * time.Second},
		{"off", nil, []string{"--stream-keepalive", "0"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := keepalive(t, tc.env, tc.args...); err != nil || got != tc.want {
				t.Fatalf("StreamKeepalive %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := keepalive(t, nil, "--stream-keepalive", "-1s"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--stream-keepalive") {
		t.Errorf("--stream-keepalive -1s: %v, want a usage error naming the flag", err)
	}
}
