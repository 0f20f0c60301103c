package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
)

// TestLifecycleFlags: --session-timeout, --paused-lease, --max-paused-idle
// and --approval-window are parsed (flag or environment) into the node's
// idle policy and approval window and checked against each other (issue 27
// edge): --max-paused-idle at least --session-timeout and --approval-window
// (raised to them when not given), otherwise a usage error naming the
// flags.
func TestLifecycleFlags(t *testing.T) {
	def := alarm.DefaultPolicy()
	with := func(f func(*alarm.Policy)) alarm.Policy { p := def; f(&p); return p }
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		want   alarm.Policy
		window time.Duration
		errs   []string // the flags a usage error names; none: valid
	}{
		{"defaults", nil, nil, def, 4 * time.Minute, nil},
		{"all four", nil, []string{"--session-timeout", "1m", "--paused-lease", "30s", "--max-paused-idle", "3m", "--approval-window", "2m"},
			with(func(p *alarm.Policy) {
				p.SessionTimeout, p.PausedLease, p.MaxPausedIdle = time.Minute, 30*time.Second, 3*time.Minute
			}), 2 * time.Minute, nil},
		{"from the environment", map[string]string{"MCPGRAIN_SESSION_TIMEOUT": "2m", "MCPGRAIN_MAX_PAUSED_IDLE": "5m"}, nil,
			with(func(p *alarm.Policy) { p.SessionTimeout, p.MaxPausedIdle = 2*time.Minute, 5*time.Minute }), 4 * time.Minute, nil},
		{"a long session timeout raises max paused idle left unset", nil, []string{"--session-timeout=10m"},
			with(func(p *alarm.Policy) { p.SessionTimeout, p.MaxPausedIdle = 10*time.Minute, 10*time.Minute }), 4 * time.Minute, nil},
		{"a long approval window raises max paused idle left unset", nil, []string{"--approval-window", "15m"},
			with(func(p *alarm.Policy) { p.MaxPausedIdle = 15 * time.Minute }), 15 * time.Minute, nil},
		{"a paused lease shorter than the window", nil, []string{"--paused-lease", "1m"},
			with(func(p *alarm.Policy) { p.PausedLease = time.Minute }), 4 * time.Minute, nil},
		{"max paused idle below the session timeout", nil, []string{"--session-timeout", "10m", "--max-paused-idle", "9m"}, def, 0,
			[]string{"--max-paused-idle", "--session-timeout"}},
		{"max paused idle below the approval window", nil, []string{"--max-paused-idle", "6m", "--approval-window", "8m"}, def, 0,
			[]string{"--max-paused-idle", "--approval-window"}},
		{"max paused idle from the environment below the session timeout", map[string]string{"MCPGRAIN_MAX_PAUSED_IDLE": "1m"}, nil, def, 0,
			[]string{"--max-paused-idle", "--session-timeout"}},
		{"a zero paused lease", nil, []string{"--paused-lease", "0s"}, def, 0, []string{"--paused-lease must be positive"}},
		{"a negative max paused idle", nil, []string{"--max-paused-idle", "-1m"}, def, 0, []string{"--max-paused-idle must be positive"}},
		{"a short approval window", nil, []string{"--approval-window", "500ms"}, def, 0, []string{"--approval-window"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var m mcpFlags
			m.register(fs, defaultPacks, false)
			if err := parse(fs, tc.args); err != nil {
				t.Fatal(err)
			}
			mc, err := m.config()
			if tc.errs == nil {
				if err != nil || mc.Policy != tc.want || mc.Code.Window != tc.window {
					t.Fatalf("policy %+v, window %s, %v; want %+v, %s", mc.Policy, mc.Code.Window, err, tc.want, tc.window)
				}
				return
			}
			if !errors.Is(err, errUsage) {
				t.Fatalf("%v, want a usage error naming %q", err, tc.errs)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
		})
	}
}

// A contradiction between the lifecycle flags ends the command with exit
// 2 and an error naming the flags, before anything starts.
func TestLifecycleFlagContradictionExitsWithUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"dev", "--session-timeout", "10m", "--max-paused-idle", "9m"}, &out, &errOut)
	if got := errOut.String(); code != 2 || !strings.Contains(got, "--max-paused-idle (9m0s) must not be shorter than --session-timeout (10m0s)") {
		t.Fatalf("exit %d, stderr %q; want 2 naming both flags", code, got)
	}
}
