package conformance

import (
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conformanceSession is what the conformance fixture remembers about one
// MCP session. Only what go-sdk does not already keep on the session is
// here: go-sdk holds each session's negotiated version, client
// capabilities and log level (logging/setLevel), and filters the session's
// log messages by that level itself.
type conformanceSession struct {
	// subscriptions are the resource URIs the session subscribed to
	// (resources/subscribe, or subscriptions/listen from 2026-07-28 on).
	subscriptions map[string]bool
}

// sessionStates is the fixture's per-session state on one server, keyed by
// the go-sdk session a request belongs to (the request's Session). A
// session's state is made at its first use and dropped when the session
// ends; ended is then called with it (outside the lock), so that what the
// session held on the server (a subscriber of the watched resource) is
// released even if the client never unsubscribed. Nothing here needs to
// outlive the session's runtime: a restored session (after a move) is a
// new go-sdk session, and the runtime replays its recorded subscriptions
// into it, which calls the subscribe handler again (docs/sdk.md §6).
type sessionStates struct {
	ended func(*mcp.ServerSession, *conformanceSession)

	mu     sync.Mutex
	byID   map[*mcp.ServerSession]*conformanceSession
	closed bool
}

func newSessionStates(ended func(*mcp.ServerSession, *conformanceSession)) *sessionStates {
	return &sessionStates{ended: ended, byID: map[*mcp.ServerSession]*conformanceSession{}}
}

// update calls f with the state of ss under the registry's lock, making
// the state first if ss has none; then one goroutine per session waits for
// the session's end to drop it. It reports false, without calling f, for a
// nil session or once the registry is closed.
func (r *sessionStates) update(ss *mcp.ServerSession, f func(*conformanceSession)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ss == nil || r.closed {
		return false
	}
	st, ok := r.byID[ss]
	if !ok {
		st = &conformanceSession{subscriptions: map[string]bool{}}
		r.byID[ss] = st
		go r.dropWhenEnded(ss)
	}
	f(st)
	return true
}

// dropWhenEnded waits for ss to end and drops its state.
func (r *sessionStates) dropWhenEnded(ss *mcp.ServerSession) {
	_ = ss.Wait()
	r.mu.Lock()
	st, ok := r.byID[ss]
	delete(r.byID, ss)
	r.mu.Unlock()
	if ok {
		r.ended(ss, st)
	}
}

// close drops every state without calling ended (the server is stopping:
// what the states held is released with it). Sessions that end later find
// nothing to drop.
func (r *sessionStates) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	clear(r.byID)
}
