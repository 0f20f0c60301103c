package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
)

// The session lifecycle settings are checked against each other (issue 27
// edge): each positive, --max-paused-idle at least --session-timeout and
// --approval-window; the paused lease is free. The error names the flags.
func TestCheckLifecycle(t *testing.T) {
	def := alarm.DefaultPolicy()
	with := func(f func(*alarm.Policy)) alarm.Policy { p := def; f(&p); return p }
	for _, tc := range []struct {
		name   string
		policy alarm.Policy
		window time.Duration
		want   []string // the flags the error names; none: valid
	}{
		{"zero: the defaults", alarm.Policy{}, 0, nil},
		{"defaults", def, 4 * time.Minute, nil},
		{"a short session timeout", with(func(p *alarm.Policy) { p.SessionTimeout = time.Second }), 4 * time.Second, nil},
		{"a paused lease shorter than the window", with(func(p *alarm.Policy) { p.PausedLease = time.Minute }), 0, nil},
		{"a paused lease longer than max paused idle", with(func(p *alarm.Policy) { p.PausedLease = time.Hour }), 0, nil},
		{"max paused idle equal to both", with(func(p *alarm.Policy) { p.SessionTimeout, p.MaxPausedIdle = 4*time.Minute, 4*time.Minute }), 4 * time.Minute, nil},
		{"max paused idle below the session timeout", with(func(p *alarm.Policy) { p.SessionTimeout = 10 * time.Minute }), 0,
			[]string{"--max-paused-idle", "--session-timeout"}},
		{"max paused idle below the approval window", def, 10 * time.Minute, []string{"--max-paused-idle", "--approval-window"}},
		{"a policy set in part", alarm.Policy{SessionTimeout: time.Minute}, 0, []string{"--paused-lease must be positive"}},
		{"a negative window", def, -time.Second, []string{"--approval-window must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLifecycle(tc.policy, tc.window)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckLifecycle: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrLifecycle) {
				t.Fatalf("CheckLifecycle: %v, want an ErrLifecycle naming %q", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckLifecycle: %q does not name %q", err, w)
				}
			}
		})
	}
}

// A node configured from Go with contradicting lifecycle settings does not
// start: Run fails before it listens.
func TestRunRefusesContradictingLifecycleSettings(t *testing.T) {
	p := alarm.DefaultPolicy()
	p.MaxPausedIdle = time.Minute
	err := Run(t.Context(), Config{HTTP: "127.0.0.1:0", MCP: MCPConfig{Policy: p}}, func(Info) { t.Error("the node started") })
	if !errors.Is(err, ErrLifecycle) || !strings.Contains(err.Error(), "--max-paused-idle") {
		t.Fatalf("Run: %v, want the lifecycle error", err)
	}
}
