package mcpgrain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// Schedule is a durable schedule of a session or a handle ([OnHandle]):
// the server's callback Name runs at (never before) At, or After from now,
// at least once — even if the session hibernated meanwhile, the node
// restarted or the node that owned the session (or handle) died. It runs
// on the node that owns the session or handle then, bound to it as a
// handler is.
type Schedule struct {
	// Name is the callback's name, a key of [Server].Schedules.
	Name string
	// At is when it runs. Zero: After from now.
	At time.Time
	// After is how long from now it runs, when At is zero (zero or
	// negative: now).
	After time.Duration
	// Payload is the callback's input: JSON, at most 16 KiB.
	Payload json.RawMessage
	// Key is the schedule's idempotency key (up to 128 letters, digits or
	// -_.:@): scheduling a key that is pending changes nothing and returns
	// it. "": a random key is minted.
	Key string
	// Attempts is, in what [Schedules] lists, how many times its callback
	// was started (ignored by [ScheduleAt]).
	Attempts int
}

// ScheduleCall is what a callback gets: the schedule's Key, Name and
// Payload, when it was Due, the Attempt (from 1), and the session's go-sdk
// Session to notify its client (nil when the runtime has none, and on a
// handle). A
// callback may run more than once for a key (a node lost between its
// effect and the schedule's completion): make effects happen once by Key.
type ScheduleCall = app.ScheduleCall

// ScheduleFunc is a schedule callback. Its ctx is bound to the session (or
// handle) the schedule was made on, so the SDK's calls ([ScheduleAt],
// [State], ...) act on it as in a handler. A nil error completes the
// schedule; an error retries it with backoff (1s, 2s, 4s, ... up to 5
// min), 8 attempts in all, after which it is dropped (logged as
// mcpgrain_sdk_schedule_dropped and counted in
// mcpgrain_sdk_schedules_total{outcome="dropped"}, on a handle
// mcpgrain_handle_schedules_total).
type ScheduleFunc = app.ScheduleFunc

// ErrTooManySchedules refuses a schedule beyond 100 pending on a session
// or handle.
var ErrTooManySchedules = app.ErrTooManySchedules

// scheduler is the schedules of the session ctx is bound to.
func scheduler(ctx context.Context) (app.Scheduler, error) {
	sc, err := app.ScopeOf(ctx)
	if err != nil {
		return nil, err
	}
	s, ok := sc.(app.Scheduler)
	if !ok {
		return nil, app.ErrNoSchedules
	}
	return s, nil
}

// ScheduleAt schedules s on the session (or handle) of the request (or
// callback) ctx belongs to, and returns its key once it is stored
// durably. An error wrapping [ErrNoScope] means ctx belongs to neither.
func ScheduleAt(ctx context.Context, s Schedule) (key string, err error) {
	sch, err := scheduler(ctx)
	if err != nil {
		return "", err
	}
	if len(s.Payload) > 0 && !json.Valid(s.Payload) {
		return "", errors.New("mcpgrain: schedule payload is not JSON")
	}
	due := s.At
	if due.IsZero() {
		due = time.Now().Add(max(s.After, 0))
	}
	key, err = sch.Schedule(ctx, app.Scheduled{Key: s.Key, Name: s.Name, Due: due, Payload: s.Payload})
	if err != nil {
		return "", fmt.Errorf("mcpgrain: schedule %q: %w", s.Name, err)
	}
	return key, nil
}

// CancelSchedule cancels the session's pending schedule key (a key that
// is not pending, e.g. already run, is not an error). A callback already
// running is not stopped.
func CancelSchedule(ctx context.Context, key string) error {
	sch, err := scheduler(ctx)
	if err != nil {
		return err
	}
	if err := sch.CancelSchedule(ctx, key); err != nil {
		return fmt.Errorf("mcpgrain: cancel schedule %q: %w", key, err)
	}
	return nil
}

// Schedules lists the session's pending schedules, by key (At set).
func Schedules(ctx context.Context) ([]Schedule, error) {
	sch, err := scheduler(ctx)
	if err != nil {
		return nil, err
	}
	list, err := sch.Schedules(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpgrain: list schedules: %w", err)
	}
	out := make([]Schedule, 0, len(list))
	for _, s := range list {
		out = append(out, Schedule{Name: s.Name, At: s.Due, Payload: s.Payload, Key: s.Key, Attempts: s.Attempts})
	}
	return out, nil
}
