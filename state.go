package mcpgrain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// ErrNoScope is returned by an SDK call (state, schedules) made outside a
// request or schedule callback bound to a stateful session or a handle: a
// sessionless (2026-07-28) request or a task's run whose handler did not
// bind its context to a handle ([OnHandle]), or a context that did not
// come from a handler.
var ErrNoScope = app.ErrNoScope

// ErrRetry marks a save that stored nothing because the session moved to
// another node (its owner's save was fenced) or the store failed. The
// client should retry the call: the retry reaches the session's owner,
// which has every value saved before.
var ErrRetry = app.ErrRetry

// ErrStateTooLarge is returned by [State.Update] when the new value's
// encoding exceeds [StateOptions.MaxBytes]; nothing is saved.
var ErrStateTooLarge = errors.New("mcpgrain: state value too large")

// ErrStateVersion is returned when a saved value's version is not the
// State's and it cannot be migrated: a newer version (a rollback of the
// program), or an older one without [StateOptions.Migrate].
var ErrStateVersion = errors.New("mcpgrain: saved state has another version")

// Bounds of [StateOptions.MaxBytes].
const (
	DefaultStateMaxBytes = 64 << 10
	MaxStateMaxBytes     = 1 << 20
)

// StateOptions configures [NewState]. The zero value is the default.
type StateOptions[T any] struct {
	// Version is the schema version written with every save. 0: 1.
	Version int
	// Migrate turns a value saved at an older version into T. Nil: a
	// saved value of an older version is an error ([ErrStateVersion]).
	Migrate func(version int, raw json.RawMessage) (T, error)
	// MaxBytes bounds a value's JSON encoding. 0: 64 KiB; at most 1 MiB.
	// A larger value is not saved: [State.Update] fails with
	// [ErrStateTooLarge].
	MaxBytes int
}

// State is a handler's typed, durable per-session state, encoded as JSON.
// It is saved in the session's record on the node that owns the session,
// with the session's own fenced commit: after the session hibernates, its
// node restarts or is lost (kill -9), the next call (on any node) finds
// the value saved last. With a context bound to a handle ([OnHandle]) it
// is the handle's state instead, saved in the handle's grain. Declare one per kind of state with [NewState], at
// package level, and use it from handlers with the handler's context.
type State[T any] struct {
	name     string
	version  int
	migrate  func(version int, raw json.RawMessage) (T, error)
	maxBytes int
}

var stateNames sync.Map // name → struct{}: names declared in the program

// NewState declares a state named name, which must be non-empty and
// unique in the program. It panics on an invalid name or options (a
// programming error, like declaring a flag twice).
func NewState[T any](name string, opts StateOptions[T]) *State[T] {
	s := &State[T]{name: name, version: opts.Version, migrate: opts.Migrate, maxBytes: opts.MaxBytes}
	if s.version == 0 {
		s.version = 1
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultStateMaxBytes
	}
	switch {
	case name == "":
		panic("mcpgrain: NewState: empty name")
	case s.version < 0:
		panic(fmt.Sprintf("mcpgrain: NewState(%q): negative Version %d", name, opts.Version))
	case s.maxBytes < 0 || s.maxBytes > MaxStateMaxBytes:
		panic(fmt.Sprintf("mcpgrain: NewState(%q): MaxBytes %d: want 0 (64 KiB) up to %d", name, opts.MaxBytes, MaxStateMaxBytes))
	}
	if _, dup := stateNames.LoadOrStore(name, struct{}{}); dup {
		panic(fmt.Sprintf("mcpgrain: NewState: state %q declared twice", name))
	}
	return s
}

// Name is the state's name.
func (s *State[T]) Name() string { return s.name }

// Get returns the value saved in the session of ctx (a handler's context),
// or the zero T if none was saved. It reads the owner's memory: no store
// round trip. Outside a stateful session it fails with [ErrNoScope].
func (s *State[T]) Get(ctx context.Context) (T, error) {
	sc, err := s.scope(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	v, _, _, err := s.load(sc)
	return v, err
}

// Update applies f to the session's current value (the zero T if none was
// saved) and saves the result before it returns: a tool's result sent
// after Update returned reports a stored value. An unchanged encoding
// writes nothing. Concurrent Updates of one session's State run one after
// the other, so none is lost. If f fails, nothing is saved and its error
// is returned. A value whose encoding exceeds MaxBytes fails with
// [ErrStateTooLarge]; a save that was fenced (the session moved) or failed
// stores nothing and fails with an error wrapping [ErrRetry]. On a handle,
// Updates from any node are compare-and-sets on the handle's grain: one
// that lost to another applies f again to the value stored meanwhile (so
// f may run more than once), up to 16 times before [ErrRetry].
func (s *State[T]) Update(ctx context.Context, f func(*T) error) (T, error) {
	var zero T
	sc, err := s.scope(ctx)
	if err != nil {
		return zero, err
	}
	unlock := lockState(sc, s.name)
	defer unlock()
	cs, conditional := sc.(app.ConditionalSaver)
	for range maxUpdateAttempts {
		v, b, saved, err := s.apply(sc, f)
		switch {
		case err != nil:
			return zero, err
		case b == nil:
			return v, nil // unchanged: nothing to write
		case !conditional:
			if err := sc.SaveState(ctx, s.name, app.Saved{Version: s.version, Value: b}); err != nil {
				return zero, err
			}
			return v, nil
		}
		done, err := cs.SaveStateIf(ctx, s.name, app.Saved{Version: s.version, Value: b}, saved.Revision)
		if err != nil {
			return zero, err
		}
		if done {
			return v, nil
		}
		// Saved meanwhile elsewhere: the scope has the stored value now;
		// apply f to it.
	}
	return zero, fmt.Errorf("mcpgrain: state %q: %d saves in a row lost to concurrent ones: %w", s.name, maxUpdateAttempts, ErrRetry)
}

// maxUpdateAttempts bounds the compare-and-set rounds of an Update of a
// handle's state that other nodes' Updates keep winning.
const maxUpdateAttempts = 16

// apply applies f to the current value of sc and returns the new value and
// its encoding (nil: unchanged, nothing to write) with what it was applied
// to.
func (s *State[T]) apply(sc app.Scope, f func(*T) error) (v T, b []byte, saved app.Saved, err error) {
	v, saved, ok, err := s.load(sc)
	if err != nil {
		return v, nil, saved, err
	}
	if err := f(&v); err != nil {
		return v, nil, saved, err
	}
	b, err = json.Marshal(&v)
	if err != nil {
		return v, nil, saved, fmt.Errorf("mcpgrain: state %q: encode: %w", s.name, err)
	}
	if len(b) > s.maxBytes {
		return v, nil, saved, fmt.Errorf("mcpgrain: state %q: %d bytes encoded, over MaxBytes %d: %w", s.name, len(b), s.maxBytes, ErrStateTooLarge)
	}
	if bytes.Equal(b, s.unchanged(saved, ok)) {
		return v, nil, saved, nil
	}
	return v, b, saved, nil
}

// scope is the session of ctx.
func (s *State[T]) scope(ctx context.Context) (app.Scope, error) {
	sc, err := app.ScopeOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpgrain: state %q needs a stateful session (a sessionless 2026-07-28 request or a task's run has none): %w", s.name, err)
	}
	return sc, nil
}

// unchanged is the encoding an Update need not write: the saved value's
// at this version; the zero T's if none was saved (Get returns it anyway).
func (s *State[T]) unchanged(saved app.Saved, ok bool) []byte {
	if ok {
		if saved.Version != s.version {
			return nil
		}
		return saved.Value
	}
	var zero T
	b, err := json.Marshal(&zero)
	if err != nil {
		return nil
	}
	return b
}

// load decodes the saved value of sc (migrating an older version), and
// returns it with what was saved (ok: something was).
func (s *State[T]) load(sc app.Scope) (v T, saved app.Saved, ok bool, err error) {
	saved, ok = sc.State(s.name)
	switch {
	case !ok:
		return v, saved, false, nil
	case saved.Version == s.version:
		if err := json.Unmarshal(saved.Value, &v); err != nil {
			return v, saved, ok, fmt.Errorf("mcpgrain: state %q: decode the saved value: %w", s.name, err)
		}
		return v, saved, ok, nil
	case saved.Version > s.version || s.migrate == nil:
		return v, saved, ok, fmt.Errorf("mcpgrain: state %q: saved at version %d, this program's is %d: %w", s.name, saved.Version, s.version, ErrStateVersion)
	}
	if v, err = s.migrate(saved.Version, json.RawMessage(saved.Value)); err != nil {
		return v, saved, ok, fmt.Errorf("mcpgrain: state %q: migrate from version %d: %w", s.name, saved.Version, err)
	}
	return v, saved, ok, nil
}

// stateLocks serializes the Updates of one grain's state on this node
// (by kind and id, not by scope value: every request bound to a handle
// has a scope of its own, and serializing them here leaves the grain's
// compare-and-set only the other nodes' Updates to lose to). An entry
// lives while an Update holds or waits for it, so finished sessions leave
// none.
var stateLocks = struct {
	sync.Mutex
	m map[stateKey]*stateLock
}{m: map[stateKey]*stateLock{}}

type stateKey struct {
	kind, id, name string
}

type stateLock struct {
	mu      sync.Mutex
	holders int
}

// lockState locks the state name of sc and returns its unlock.
func lockState(sc app.Scope, name string) func() {
	k := stateKey{sc.Kind(), sc.ID(), name}
	stateLocks.Lock()
	l := stateLocks.m[k]
	if l == nil {
		l = &stateLock{}
		stateLocks.m[k] = l
	}
	l.holders++
	stateLocks.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		stateLocks.Lock()
		if l.holders--; l.holders == 0 {
			delete(stateLocks.m, k)
		}
		stateLocks.Unlock()
	}
}
