package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/engine"
)

// ErrLifecycle marks an error of [CheckLifecycle]: session lifecycle
// settings that contradict each other (the commands report it as a usage
// error).
var ErrLifecycle = errors.New("session lifecycle")

// CheckLifecycle checks the session lifecycle settings against each other:
// the idle policy p (zero: alarm.DefaultPolicy()) and the approval window
// (zero: engine.DefaultApprovalWindow). What must hold (the executor
// relations; docs/operations.md, the idle policy):
//
//   - every threshold of the policy is positive;
//   - --max-paused-idle is not shorter than --session-timeout: a session
//     with a paused execution is kept at least as long as an idle one
//     (executor: MAX_PAUSED = SESSION_TIMEOUT + PAUSED_LEASE); below it
//     --max-paused-idle and --paused-lease would do nothing;
//   - --max-paused-idle is not shorter than --approval-window: a pause
//     that keeps its session resident (one that lives only in memory)
//     keeps it until it can no longer be decided, so a decision within
//     the window never finds it gone.
//
// The paused lease has no relation of its own: it is the longest single
// extension, each one cut to what is left of --max-paused-idle, so any
// positive value keeps the session exactly until --max-paused-idle. The
// error names the flags (and wraps ErrLifecycle).
func CheckLifecycle(p alarm.Policy, window time.Duration) error {
	if p == (alarm.Policy{}) {
		p = alarm.DefaultPolicy()
	}
	if window == 0 {
		window = engine.DefaultApprovalWindow
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--session-timeout", p.SessionTimeout},
		{"--paused-lease", p.PausedLease},
		{"--max-paused-idle", p.MaxPausedIdle},
		{"--running-lease", p.RunningLease},
		{"--max-running-idle", p.MaxRunningIdle},
		{"--approval-window", window},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%w: %s must be positive", ErrLifecycle, d.flag)
		}
	}
	switch {
	case p.MaxPausedIdle < p.SessionTimeout:
		return fmt.Errorf("%w: --max-paused-idle (%s) must not be shorter than --session-timeout (%s): a session with a paused execution is kept at least as long as an idle one",
			ErrLifecycle, p.MaxPausedIdle, p.SessionTimeout)
	case p.MaxPausedIdle < window:
		return fmt.Errorf("%w: --max-paused-idle (%s) must not be shorter than --approval-window (%s): a paused execution's session is kept until the pause can no longer be decided",
			ErrLifecycle, p.MaxPausedIdle, window)
	}
	return nil
}

// checkLifecycle is Run's first step: a configuration whose lifecycle
// settings contradict each other does not start.
func (p *process) checkLifecycle(context.Context) error {
	return CheckLifecycle(p.cfg.MCP.Policy, p.cfg.MCP.Code.Window)
}
