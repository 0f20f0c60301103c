package session

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// What a runtime's goroutines report to its session grain: lease hooks
// (paused executions) and new runtime state. Both arrive as local messages
// of the activation; the lease hooks become the lifecycle machine's
// evLease events (executor.go), the state is stored by saveState
// (exchange.go), as are the application's state values.

// hooks is the LeaseHooks handed to one runtime; it forwards to the actor
// and goes quiet once that runtime is disposed.
type hooks struct {
	system *actor.ActorSystem
	self   *actor.PID
	// arm tells the node's reminder service of deadlines the runtime's
	// journal stored (grain.Context.RemindersStored).
	arm func(set []store.Reminder, cancelled []string)
	// mu guards stored and cancelled: the pauses whose deadline reminder
	// the journal set (with the reminder to arm, nil once a settling
	// write cancelled it), and cancelled, not yet taken by their lease
	// message (DeadlinesStored reports before the lease hook sends it);
	// and the closing state (see wait). Arming is done under mu too, so
	// that a cancel never precedes the arming of what it cancels.
	mu        sync.Mutex
	stored    map[string]*store.Reminder
	cancelled map[string]bool
	// closed is closed when the runtime is disposed (close), made only
	// while a report or schedule call waits for the grain and dropped
	// when the last wait ends: a resident session keeps no channel (a
	// channel a session was 96 B of every resident session).
	closed  chan struct{}
	waiters int32 // waits holding closed
	shut    bool  // close ran
}

// wait returns the channel closed once the runtime is disposed, for one
// wait on the grain, and false if it is already; done ends the wait.
func (h *hooks) wait() (closed <-chan struct{}, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		return nil, false
	}
	if h.closed == nil {
		h.closed = make(chan struct{})
	}
	h.waiters++
	return h.closed, true
}

// done ends a wait begun by wait.
func (h *hooks) done() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters--; h.waiters == 0 && !h.shut {
		h.closed = nil
	}
}

// close quiets the hooks: the runtime was disposed. Waits end with
// errRuntimeClosed, and later calls fail at once.
func (h *hooks) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shut = true
	if h.closed != nil {
		close(h.closed)
	}
}

// isShut reports whether close ran.
func (h *hooks) isShut() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.shut
}

// DeadlineReminders implements DeadlineLeases: the session's deadline
// reminders, reported to DeadlinesStored.
func (h *hooks) DeadlineReminders() (string, func(set []store.Reminder, cancelled []string)) {
	return reminderApproval, h.DeadlinesStored
}

// DeadlinesStored implements BuildInput.DeadlinesStored: cancelled
// reminders are disarmed at once; a pause's deadline is noted for its
// lease message (takeDeadline), which arms it in the grain's turn. The
// journal reports before the engine registers the pause: a deadline
// armed here could fire (one already due: a slow write, a store outage
// ridden out) while the pause is not yet known, find nothing to decline,
// and be completed — the pause would never time out.
func (h *hooks) DeadlinesStored(set []store.Reminder, cancelled []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var now []store.Reminder // not a pause's: nothing to wait for
	for _, r := range set {
		id, ok := strings.CutPrefix(r.Name, reminderApproval)
		if !ok {
			now = append(now, r)
			continue
		}
		if h.stored == nil {
			h.stored = map[string]*store.Reminder{}
		}
		h.stored[id] = &r
	}
	for _, n := range cancelled {
		if id, ok := strings.CutPrefix(n, reminderApproval); ok {
			if _, noted := h.stored[id]; noted {
				h.stored[id] = nil // settled before its lease came: nothing to arm
			}
			if h.cancelled == nil {
				h.cancelled = map[string]bool{}
			}
			h.cancelled[id] = true
		}
	}
	if h.arm != nil && (len(now) > 0 || len(cancelled) > 0) {
		h.arm(now, cancelled)
	}
}

// takeDeadline reports, and forgets, whether the journal stored
// execID's deadline reminder (kind LeasePaused; the reminder, if not
// cancelled since, is armed now) or cancelled it (LeaseSettled). It is
// called in the grain's turn, once the pause is registered.
func (h *hooks) takeDeadline(kind LeaseKind, execID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if kind == LeaseSettled {
		ok := h.cancelled[execID]
		delete(h.cancelled, execID)
		return ok
	}
	r, ok := h.stored[execID]
	delete(h.stored, execID)
	if r != nil && h.arm != nil {
		h.arm([]store.Reminder{*r}, nil)
	}
	return ok
}

// leaseMsg is one lease hook call, a local message to the activation.
type leaseMsg struct {
	h        *hooks
	kind     LeaseKind
	execID   string
	deadline time.Time
	action   string // resuming: the decision handed to the code
}

func (h *hooks) send(m *leaseMsg) {
	if h.isShut() {
		return
	}
	m.h = h
	h.system.Root.Send(h.self, m)
}

func (h *hooks) Paused(execID string, deadline time.Time) {
	h.send(&leaseMsg{kind: LeasePaused, execID: execID, deadline: deadline})
}
func (h *hooks) Resuming(execID, action string) {
	h.send(&leaseMsg{kind: LeaseResuming, execID: execID, action: action})
}
func (h *hooks) Settled(execID string) { h.send(&leaseMsg{kind: LeaseSettled, execID: execID}) }

// stateMsg carries new runtime state from the runtime to the grain, which
// answers on done once the state is stored.
// With app set it carries an application state value named name instead.
type stateMsg struct {
	h     *hooks
	state []byte
	name  string
	app   *pb.AppState
	done  chan error
}

// stateTimeout bounds how long a runtime waits for its state to be stored.
const stateTimeout = 15 * time.Second

// errRuntimeClosed answers state reports of a disposed runtime.
var errRuntimeClosed = errors.New("session: runtime closed")

// StateChanged implements BuildInput.StateChanged.
func (h *hooks) StateChanged(state []byte) error {
	return h.report(&stateMsg{h: h, state: append([]byte(nil), state...), done: make(chan error, 1)})
}

// AppStateChanged implements BuildInput.AppStateChanged.
func (h *hooks) AppStateChanged(name string, s *pb.AppState) error {
	v := &pb.AppState{Version: s.GetVersion(), Value: append([]byte(nil), s.GetValue()...)}
	return h.report(&stateMsg{h: h, name: name, app: v, done: make(chan error, 1)})
}

// report sends m to the grain and waits until it is stored (or refused).
func (h *hooks) report(m *stateMsg) error {
	closed, ok := h.wait()
	if !ok {
		return errRuntimeClosed
	}
	defer h.done()
	h.system.Root.Send(h.self, m)
	t := time.NewTimer(stateTimeout)
	defer t.Stop()
	select {
	case err := <-m.done:
		return err
	case <-closed:
		return errRuntimeClosed
	case <-t.C:
		return fmt.Errorf("session: storing the session's state took longer than %s", stateTimeout)
	}
}
