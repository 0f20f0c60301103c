package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Schedules: durable callbacks of a grain (docs/sdk.md §3). A program's
// server registers callbacks by name (toolpacks.Handlers.Schedules); a
// handler schedules one on its grain ([Scheduler], which a [Scope] may
// implement); the grain runs it when it is due, at least once, on
// whichever node owns the grain then.

// Bounds of schedules.
const (
	// MaxSchedules bounds the pending schedules of one grain.
	MaxSchedules = 100
	// MaxSchedulePayload bounds a schedule's payload, in bytes.
	MaxSchedulePayload = 16 << 10
	// MaxScheduleKey bounds a schedule's key, in bytes.
	MaxScheduleKey = 128
)

// Scheduled is one pending schedule of a grain.
type Scheduled struct {
	// Key is the schedule's idempotency key.
	Key string
	// Name is the callback's name.
	Name string
	// Due is when it runs (not before).
	Due time.Time
	// Payload is the callback's payload (JSON or empty).
	Payload []byte
	// Attempts is how many times its callback was started.
	Attempts int
}

// Scheduler is the schedules side of a [Scope] (a Scope that has none
// does not implement it). Its methods are safe for concurrent use.
type Scheduler interface {
	// Schedule stores s durably (a durable reminder of the grain, its
	// payload in the grain's record) and returns its key ("" in s.Key:
	// one is minted). A key already pending returns it unchanged.
	Schedule(ctx context.Context, s Scheduled) (key string, err error)
	// CancelSchedule cancels the pending schedule key (an unknown key is
	// not an error).
	CancelSchedule(ctx context.Context, key string) error
	// Schedules lists the pending schedules, by key.
	Schedules(ctx context.Context) ([]Scheduled, error)
}

// ScheduleCall is what a callback gets: the schedule that is due.
type ScheduleCall struct {
	// Key is the schedule's key: a callback may run again for the same
	// key (at least once), so it makes its effects happen once by it.
	Key string
	// Name is the callback's name.
	Name string
	// Payload is the schedule's payload.
	Payload []byte
	// Due is when it was due.
	Due time.Time
	// Attempt counts the runs of this schedule's callback, from 1.
	Attempt int
	// Session is the go-sdk session of the grain's client, if the runtime
	// has one (nil otherwise): a callback notifies the client through it
	// (Log, ResourceUpdated on the server), delivered on the client's
	// standalone stream when it is connected.
	Session *mcp.ServerSession
}

// ScheduleFunc is a registered callback. Its ctx is bound to the grain
// ([ScopeOf] works, as in a handler); a nil error completes the schedule,
// an error retries it with backoff, up to a bounded number of attempts.
type ScheduleFunc func(ctx context.Context, c ScheduleCall) error

// ErrTooManySchedules refuses a schedule beyond [MaxSchedules].
var ErrTooManySchedules = errors.New("mcpgrain: too many pending schedules on this session (at most 100)")

// ErrNoSchedules is returned by the schedule calls on a grain whose scope
// has no schedules.
var ErrNoSchedules = errors.New("mcpgrain: this request's grain has no schedules")

// CheckSchedule checks a schedule to be stored: a name, a key (if set) of
// at most [MaxScheduleKey] bytes of letters, digits and "-_.:@", a payload
// of at most [MaxSchedulePayload] bytes.
func CheckSchedule(s Scheduled) error {
	switch {
	case s.Name == "":
		return errors.New("mcpgrain: a schedule needs the name of its callback")
	case len(s.Payload) > MaxSchedulePayload:
		return fmt.Errorf("mcpgrain: schedule payload of %d bytes: at most %d", len(s.Payload), MaxSchedulePayload)
	case s.Key != "" && !validKey(s.Key):
		return fmt.Errorf("mcpgrain: schedule key %q: want 1 to %d letters, digits or -_.:@", s.Key, MaxScheduleKey)
	}
	return nil
}

func validKey(k string) bool {
	if len(k) > MaxScheduleKey {
		return false
	}
	for _, c := range k {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("-_.:@", c):
		default:
			return false
		}
	}
	return true
}

// servers holds the schedule callbacks of the live servers
// ([BindSchedules]).
var servers sync.Map // *mcp.Server -> map[string]ScheduleFunc

// BindSchedules records the schedule callbacks of the packs on s (what
// toolpacks.NewServer does for the server it builds), until unbind.
func BindSchedules(s *mcp.Server, fs map[string]ScheduleFunc) (unbind func()) {
	servers.Store(s, fs)
	return func() { servers.Delete(s) }
}

// SchedulesOf returns the schedule callbacks bound to s, by name (nil:
// none). The caller must not modify the map.
func SchedulesOf(s *mcp.Server) map[string]ScheduleFunc {
	v, ok := servers.Load(s)
	if !ok {
		return nil
	}
	return v.(map[string]ScheduleFunc)
}
