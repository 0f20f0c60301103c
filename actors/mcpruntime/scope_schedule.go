package mcpruntime

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/session"
)

// The SDK's schedules on a session runtime (docs/sdk.md §3): the scope
// stores them through the session grain (BuildInput.Schedules), and the
// grain runs a due one's callback here, bound to the same scope.

var (
	_ app.Scheduler          = (*sessionScope)(nil)
	_ session.ScheduleRunner = (*Runtime)(nil)
)

// callbacks are the schedule callbacks of the shared server's packs.
func (r *Runtime) callbacks() map[string]app.ScheduleFunc { return app.SchedulesOf(r.b.server) }

// continuations are the continuations of the shared server's packs.
func (r *Runtime) continuations() map[string]app.ContinueFunc {
	return app.ContinuationsOf(r.b.server)
}

// Schedule implements app.Scheduler: the callback must be registered on
// the node's server.
func (s *sessionScope) Schedule(ctx context.Context, sc app.Scheduled) (string, error) {
	if s.r.sched == nil {
		return "", app.ErrNoSchedules
	}
	if _, ok := s.r.callbacks()[sc.Name]; !ok {
		return "", fmt.Errorf("mcpgrain: no schedule callback named %q on this server", sc.Name)
	}
	return s.r.sched.Schedule(ctx, sc)
}

// CancelSchedule implements app.Scheduler.
func (s *sessionScope) CancelSchedule(ctx context.Context, key string) error {
	if s.r.sched == nil {
		return app.ErrNoSchedules
	}
	return s.r.sched.CancelSchedule(ctx, key)
}

// Schedules implements app.Scheduler.
func (s *sessionScope) Schedules(ctx context.Context) ([]app.Scheduled, error) {
	if s.r.sched == nil {
		return nil, app.ErrNoSchedules
	}
	return s.r.sched.Schedules(ctx)
}

// RunSchedule implements session.ScheduleRunner: the callback named
// c.Name runs with ctx bound to the session's scope, given the session's
// go-sdk session (its client's notifications) if the runtime has one.
func (r *Runtime) RunSchedule(ctx context.Context, c app.ScheduleCall) error {
	f, ok := r.callbacks()[c.Name]
	if !ok {
		return fmt.Errorf("mcpgrain: no schedule callback named %q on this server (removed from the program?)", c.Name)
	}
	c.Session = r.serverSession()
	return f(app.WithScope(ctx, r.scope), c)
}

// serverSession is the go-sdk session of the runtime on the shared server
// (nil if it has none yet).
func (r *Runtime) serverSession() *mcp.ServerSession {
	r.mu.Lock()
	id := r.sdkID
	r.mu.Unlock()
	if id == "" {
		return nil
	}
	for ss := range r.b.server.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}
