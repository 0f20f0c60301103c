package session

import (
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The machine's decisions about what arrives from outside: an exchange's
// admission (create the session, refuse, park a standalone stream, or
// serve it, building the runtime first), the session's creation (begun by
// its initialize or a SessionCreate, committed once the runtime reports
// the handshake state, abandoned when the build or the commit fails), the
// parked streams' limit, and whether an activation with nothing to hold
// passivates at the end of its turn.

// maxParkedStreams bounds the parked streams of one session. A client has
// one standalone stream (two for a moment while it reconnects); a client
// that opens more cannot pile up goroutines: the oldest ends (it is never
// refused: go-sdk's client would take a refused reconnect as the end of
// its session).
const maxParkedStreams = 4

// ownerStatus is validateMcpSessionOwner: ended, unknown or foreign
// sessions are refused before anything is restored (found: the record
// exists; owner: the caller is its principal; ended: it has a tombstone).
func ownerStatus(found, owner, ended bool) pb.SessionReply_Status {
	switch {
	case !found:
		return pb.SessionReply_STATUS_NOT_FOUND
	case !owner:
		return pb.SessionReply_STATUS_FORBIDDEN
	case ended:
		return pb.SessionReply_STATUS_ENDED
	}
	return pb.SessionReply_STATUS_OK
}

// admit decides about an exchange (evExchange): an initialize without
// session id creates the session; any other exchange is checked against
// the record, a standalone stream of a session without a runtime is
// parked (the oldest parked one ends beyond maxParkedStreams), and the
// rest is served, the runtime built first if it is not resident (the
// exchange then restored it).
func (m *machine) admit(e event) {
	if e.create {
		m.create(e, true)
		return
	}
	if st := ownerStatus(e.found, e.owner, e.ended); st != pb.SessionReply_STATUS_OK {
		m.emit(action{kind: actAnswer, status: st})
		return
	}
	if e.standalone && !m.resident {
		m.emit(action{kind: actPark})
		if e.parkedLeft >= maxParkedStreams {
			m.emit(action{kind: actEndOldestParked})
		}
		return
	}
	restored := !m.resident
	m.buildAsked(event{})
	m.emit(action{kind: actServe, restored: restored})
}

// create begins creating the session (an initialize exchange, serve, or a
// SessionCreate): a session that exists or is being created answers
// "exists", a caller without a principal is refused, and otherwise the
// record to be is begun and the runtime built (a session whose runtime
// cannot start is not created); nothing is written until the runtime
// reports the handshake state (evStateReported).
func (m *machine) create(e event, serve bool) {
	switch {
	case e.found || m.creating:
		m.emit(action{kind: actAnswer, status: pb.SessionReply_STATUS_EXISTS})
		return
	case e.noPrincipal:
		m.emit(action{kind: actReject, label: "session: create needs a principal"})
		return
	}
	m.creating = true
	m.emit(action{kind: actBeginCreate})
	m.buildAsked(event{})
	if serve {
		m.emit(action{kind: actServe})
	}
}

// stateReported decides what a runtime's new state is written as: for a
// session being created, its creation (record, expiry reminder,
// ownership: one transaction); for a live session, its record; for a
// closed runtime (stale) or a session gone or ended, nothing (refused).
func (m *machine) stateReported(e event) {
	if e.app != nil {
		m.appStateReported(e)
		return
	}
	switch {
	case e.stale:
		m.emit(action{kind: actRefuseState})
	case m.creating:
		m.emit(action{kind: actCommitCreate, state: e.state})
	case !e.found || e.ended:
		m.emit(action{kind: actRefuseState})
	default:
		m.emit(action{kind: actSaveState, state: e.state})
	}
}

// appStateReported decides about an application state value: saved into
// the record of a live session by its current runtime, refused otherwise
// (a session being created has no record to save it with yet: its
// handshake is not done, so no tool ran).
func (m *machine) appStateReported(e event) {
	switch {
	case e.stale:
		m.emit(action{kind: actRefuseState, label: errRuntimeClosed.Error()})
	case m.creating:
		m.emit(action{kind: actRefuseState, label: "session: the session is not created yet"})
	case !e.found || e.ended:
		m.emit(action{kind: actRefuseState, label: "session: the session ended"})
	default:
		m.emit(action{kind: actSaveState, name: e.name, app: e.app})
	}
}

// createFailed: the creating commit failed (or was fenced). A
// SessionCreate (direct) abandons the creation and drops the runtime
// built for it; an initialize's creation stays until the exchange ends
// (exchangeDone drops it then).
func (m *machine) createFailed(e event) {
	if !e.direct || !m.creating {
		return
	}
	m.creating = false
	m.emit(action{kind: actAbandonCreate})
	m.dispose(DisposeShutdown, false)
}

// buildFailed: a failed or interrupted build leaves nothing behind, and a
// session whose creation it was for is not created.
func (m *machine) buildFailed() {
	m.building = false
	if m.creating {
		m.creating = false
		m.emit(action{kind: actAbandonCreate})
	}
}

// deleteAsked: DELETE /mcp of the session's owner ends the session
// (tombstone, then the runtime disposed and the grain passivated: evEnded);
// anyone else's, or one of a session unknown or ended, is answered with
// its status.
func (m *machine) deleteAsked(e event) {
	if st := ownerStatus(e.found, e.owner, e.ended); st != pb.SessionReply_STATUS_OK {
		m.emit(action{kind: actAnswer, status: st})
		return
	}
	m.emit(action{kind: actEnd, label: DisposeDelete})
}

// turnDone is passivateIfIdle: an activation that holds no runtime and
// parks no stream passivates at the end of its turn, so waking a session
// (probing ids, inspecting it, firing a stale reminder) never pins memory.
// Passivating twice is harmless.
func (m *machine) turnDone(e event) {
	if !m.resident && !m.building && e.parkedLeft == 0 {
		m.emit(action{kind: actPassivate, label: string(grain.ReasonIdle)})
	}
}
