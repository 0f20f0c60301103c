package session

import (
	"slices"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The session's lifecycle machine.
//
// What happens to a session and its runtime — created, exchanges
// admitted or parked, built, leased by paused executions, handed
// decisions, idled out, evicted, disposed, ended, passivated — is decided
// by machine.step, which is pure: it takes one event (an exchange, a
// create or a delete asking in, the runtime's state reported, a build asked for or
// done, a lease hook, an approval deadline, the idle alarm, a cap eviction
// request, a disposal asked for or done, a turn's end), updates the
// machine's state and returns the actions to carry out (answer, park,
// serve, begin or commit the creation, build the runtime, hand a decision
// over, arm the idle alarm or an approval deadline, write, dispose,
// passivate). It does no I/O, starts nothing and reads no clock: times
// come in with the events. machine_test.go walks it through tables of
// events, among them every lifecycle race docs/design.md records. The
// grain (session.go) is its executor: it turns what it receives into
// events, carries out the actions in order, and feeds their results (a
// build done or failed, a timeout recorded, a disposal done) back as
// events.
//
// The machine holds the runtime's in-memory lifecycle state; the durable
// record (decisions, activity, runtime state) stays the grain's, and the
// facts the machine needs from it or from the runtime come with the
// events.

// LeaseKind is what a runtime reports about one paused execution
// ([LeaseHooks]).
type LeaseKind uint8

const (
	// LeasePaused: the execution waits for approval until a deadline.
	LeasePaused LeaseKind = iota + 1
	// LeaseResuming: a decision arrived and the execution resumes.
	LeaseResuming
	// LeaseSettled: the execution finished.
	LeaseSettled
)

// String names the kind (for logs).
func (k LeaseKind) String() string {
	switch k {
	case LeasePaused:
		return "paused"
	case LeaseResuming:
		return "resuming"
	case LeaseSettled:
		return "settled"
	}
	return "unknown"
}

// ReasonApprovalTimeout is the reason recorded with the decline an approval
// deadline makes. It is stored in session records: the value must not
// change.
const ReasonApprovalTimeout = "approval_timeout"

// outcomeTimeout is the approvals metric's outcome of a deadline's decline.
const outcomeTimeout = "timeout"

// eventKind is what happened to the session.
type eventKind uint8

const (
	// evBuildAsked: something needs the runtime (a request, an approval
	// surface, a deadline). gone: the session does not exist or ended.
	evBuildAsked eventKind = iota + 1
	// evBuilt: the runtime was built (at now); reapply lists its restored
	// pauses that have a recorded decision.
	evBuilt
	// evBuildFailed: building the runtime failed or was interrupted.
	evBuildFailed
	// evLease: the runtime reported lease about exec (stale: a runtime
	// already disposed reported it).
	evLease
	// evDeadline: exec's approval deadline fired, the runtime asked for
	// first; live: the runtime holds the pause; decided: a decision is
	// recorded.
	evDeadline
	// evTimeoutRecorded: the deadline's decline of exec was recorded.
	evTimeoutRecorded
	// evDecided: a decision on exec was recorded (an approval surface).
	evDecided
	// evIdleFired: idle alarm gen fired at now; input has the runtime's
	// counts and the idle time.
	evIdleFired
	// evCapEviction: the residency registry asks the runtime to go;
	// evictable: the node's view of the runtime allows it.
	evCapEviction
	// evDispose: dispose the runtime for reason; retire: the activation's
	// last step (its writes go with the ownership release).
	evDispose
	// evDisposeDone: the runtime's Close returned.
	evDisposeDone
	// evExpiry: the expiry reminder fired at now (gone: no such session;
	// ended at endedAt; last activity last in memory, persisted in the
	// record).
	evExpiry
	// evEnded: the session's end (tombstone) was written; reason is the
	// disposal reason.
	evEnded
	// evDeactivate: the activation stops for reason (a disposal reason:
	// ownership lost, rebalance, shutdown).
	evDeactivate
	// evExchangeDone: an exchange ended (parked: a parked standalone
	// stream; known: one in flight; inFlight: exchanges still in flight;
	// parkedLeft: parked streams left).
	evExchangeDone
	// evExchange: an exchange asks to be served (create: an initialize
	// without session id; found, owner, ended: the record exists, the
	// caller is its principal, it has a tombstone; noPrincipal: the caller
	// has none; standalone: the standalone GET stream; parkedLeft: the
	// streams parked already).
	evExchange
	// evCreate: a SessionCreate asks to create the session (found,
	// noPrincipal as for evExchange).
	evCreate
	// evStateReported: the runtime reported its state, or with app an
	// application state value named name (stale: a runtime already
	// disposed reported it; found, ended: as for evExchange).
	evStateReported
	// evCreated: the session's creation was committed.
	evCreated
	// evCreateFailed: the creating commit failed or was fenced (direct: a
	// SessionCreate's, not an initialize's).
	evCreateFailed
	// evDelete: the session's owner asks to end it (found, owner, ended
	// as for evExchange).
	evDelete
	// evTurnDone: the activation's turn (a request, a reminder, the idle
	// alarm) is over; parkedLeft: the streams parked.
	evTurnDone
	// evScheduleFired: the reminder of schedule exec fired at now (gone:
	// no such session, or it ended; known: the record has the schedule).
	evScheduleFired
	// evScheduleDone: the callback of schedule exec ended at now (failed:
	// with an error; attempt: its run's number; known as for
	// evScheduleFired).
	evScheduleDone
)

// event is one input of the machine.
type event struct {
	kind      eventKind
	exec      string
	lease     LeaseKind
	deadline  time.Time // LeasePaused
	durable   bool      // LeasePaused: the pause is journaled
	journaled bool      // LeasePaused: journaled, though it pins the runtime (PauseJournal)
	// stored: LeasePaused: the pause's journal stored its deadline
	// reminder (BuildInput.Deadlines); LeaseSettled: the settling
	// journal write cancelled it.
	stored    bool
	action    string    // LeaseResuming: the decision handed to the code
	timedOut  bool      // LeaseResuming: the recorded decision is the deadline's
	stale     bool      // evLease, evStateReported
	live      bool      // evDeadline
	decided   bool      // evDeadline
	gone      bool      // evBuildAsked
	reapply   []string  // evBuilt
	gen       uint64    // evIdleFired
	now, last time.Time // evBuilt, evIdleFired: the time, the last activity
	input     alarm.Input
	evictable bool   // evCapEviction
	reason    string // evDispose, evEnded
	retire    bool   // evDispose
	ended     bool   // evExpiry, evExchange, evStateReported
	// evExchangeDone, evExchange, evTurnDone
	parked, known        bool
	inFlight, parkedLeft int
	// evExchange, evCreate, evStateReported (direct: evCreateFailed)
	create, found, owner, noPrincipal, standalone, direct bool
	state                                                 []byte // evStateReported: the runtime's state
	// evStateReported: an application state value named name instead
	name    string
	app     *pb.AppState
	failed  bool // evScheduleDone
	attempt int  // evScheduleDone

	persisted, endedAt time.Time // evExpiry
}

// actionKind is one kind of output of the machine.
type actionKind uint8

const (
	// actBuild builds the runtime (reporting evBuilt or evBuildFailed).
	actBuild actionKind = iota + 1
	// actArmIdle arms idle alarm gen at at (replacing the armed one).
	actArmIdle
	// actHandOver hands exec's recorded decision to the runtime.
	actHandOver
	// actSetDeadline arms exec's durable approval reminder at at.
	actSetDeadline
	// actMarkActivity records activity now (memory and the LRU).
	actMarkActivity
	// actCountApproval counts a decision handed to the code (label: the
	// outcome).
	actCountApproval
	// actRecordTimeout records the deadline's decline of exec (reporting
	// evTimeoutRecorded).
	actRecordTimeout
	// actReleaseLease drops a settled exec's reminder and recorded
	// decision, one transaction.
	actReleaseLease
	// actPersistActivity writes the last activity if it moved.
	actPersistActivity
	// actLogExtension logs an idle lease extension (label: the outcome;
	// lease).
	actLogExtension
	// actCountIdleAlarm counts a handled idle alarm.
	actCountIdleAlarm
	// actDispose closes the runtime for reason label (reporting
	// evDisposeDone);
	// drop lists the executions whose pauses die with it (their directory
	// rows go).
	actDispose
	// actRetireWrites writes, in one transaction, the last activity and
	// the runtime's counters, cancels the approval reminders of drop and
	// releases the ownership.
	actRetireWrites
	// actPassivate passivates the activation (label: the reason).
	actPassivate
	// actSetExpiry arms the expiry reminder at at (label: what for, for
	// the error).
	actSetExpiry
	// actEnd ends the session (label: the disposal reason): its tombstone
	// written (reporting evEnded).
	actEnd
	// actDeleteGrain deletes the ended session's grain (row and
	// reminders).
	actDeleteGrain
	// actDrain lets running executions finish before a graceful
	// disposal (label: its reason), then asks for it (evDispose, retire).
	actDrain
	// actAbandonCreate drops the record of a session being created whose
	// initialize ended without creating it, or whose build or commit
	// failed (nothing was written).
	actAbandonCreate
	// actAnswer answers the request with status, serving nothing.
	actAnswer
	// actReject refuses the request (label: why).
	actReject
	// actBeginCreate begins the record of the session being created (its
	// principal, created and active now).
	actBeginCreate
	// actServe serves the exchange once the actions are carried out
	// (restored: its runtime was built for it).
	actServe
	// actPark parks the standalone stream (answered at once, held open).
	actPark
	// actEndOldestParked ends the longest-parked stream.
	actEndOldestParked
	// actCommitCreate writes the session into existence with the
	// runtime's state: ownership, record and expiry reminder, one
	// transaction (reporting evCreated).
	actCommitCreate
	// actSaveState writes the runtime's state, or with app the
	// application state value name, into the record.
	actSaveState
	// actRefuseState refuses a runtime's state or application state value
	// (label: why; its runtime is closed, or the session is not created
	// yet or ended).
	actRefuseState
	// actUnpark ends every parked stream cleanly (the client reconnects
	// to the live runtime, or learns the session is gone).
	actUnpark
	// actRunSchedule moves schedule exec's reminder to at (its lease),
	// counts the attempt, and starts its callback (reporting
	// evScheduleDone).
	actRunSchedule
	// actLeaseSchedule moves schedule exec's reminder to at (its callback
	// still runs).
	actLeaseSchedule
	// actRetrySchedule moves schedule exec's reminder to at (a retry).
	actRetrySchedule
	// actCompleteSchedule removes schedule exec (entry and reminder, one
	// transaction); label: completed or dropped.
	actCompleteSchedule
)

// action is one output of the machine.
type action struct {
	kind  actionKind
	exec  string
	at    time.Time
	gen   uint64
	lease time.Duration
	// label is the disposal or passivation reason, the approval or
	// extension outcome.
	label    string
	drop     []string
	status   pb.SessionReply_Status // actAnswer
	restored bool                   // actServe
	state    []byte                 // actCommitCreate, actSaveState
	name     string                 // actSaveState: the application state's name
	app      *pb.AppState           // actSaveState: an application state value (not the runtime's)
	// stored: actSetDeadline: the pause's journal stored the deadline
	// (nothing to write); actReleaseLease: the journal stored and
	// cancelled it (no reminder to cancel).
	stored bool
}

// lease is a paused execution the runtime reported.
type lease struct {
	deadline time.Time
	resuming bool
	// durable: the pause survives the runtime, so it does not pin it.
	durable bool
	// journaled: the pause survives the runtime, though a handler waiting
	// for it in memory pins it (PauseJournal).
	journaled bool
	// stored: the pause's journal stored its deadline reminder.
	stored bool
}

// machine is the session's lifecycle state.
type machine struct {
	cfg *Config // SessionTTL, TombstoneRetention and Policy are read
	// resident: a runtime is built and not disposed; building: one is
	// being built; disposing: one is being closed; rebuild: a build was
	// asked for while it closed.
	resident, building, disposing, rebuild bool
	// creating: the session is being created (its record begun, not
	// committed yet).
	creating  bool
	idleArmed bool
	leases    map[string]*lease
	// handedOver holds the executions the runtime was handed a decision
	// for and that have not settled yet. They pin the runtime: a durable
	// pause does not, but once decided it is about to run again, and
	// disposing the runtime before it does would leave an acknowledged
	// decision waiting for the next activation.
	handedOver map[string]bool
	// running holds the schedules whose callback runs: they pin the
	// runtime as running executions do.
	running map[string]bool
	idleGen uint64
	// out holds the actions decided and not yet carried out (the
	// executor's queue, from its pool; nil: a new one is made).
	out []action
}

func newMachine(cfg *Config) machine {
	return machine{cfg: cfg} // leases: made by the first pause
}

// step applies e and returns the actions it decided, in order. They are
// also queued in out, after those of earlier steps not yet carried out;
// the executor takes them from there (done).
func (m *machine) step(e event) []action {
	n := len(m.out)
	switch e.kind {
	case evBuildAsked:
		m.buildAsked(e)
	case evBuilt:
		m.built(e)
	case evBuildFailed:
		clear(m.running) // nothing runs without a runtime
		m.buildFailed()
	case evLease:
		m.onLease(e)
	case evDeadline:
		m.deadline(e)
	case evTimeoutRecorded:
		m.handOver(e.exec)
		delete(m.leases, e.exec)
	case evDecided:
		m.handOver(e.exec)
		m.emit(action{kind: actMarkActivity})
	case evIdleFired:
		m.idle(e)
	case evCapEviction:
		if m.resident && !m.disposing && e.evictable {
			m.dispose(DisposeCap, true)
			m.emit(action{kind: actPassivate, label: DisposeCap})
		}
	case evDispose:
		m.dispose(e.reason, e.retire)
	case evDisposeDone:
		m.disposing = false
		if m.rebuild {
			m.rebuild, m.building = false, true
			m.emit(action{kind: actBuild})
		}
	case evExpiry:
		m.expiry(e)
	case evEnded:
		m.emit(action{kind: actUnpark})
		m.dispose(e.reason, false) // its reminders are gone already
		m.emit(action{kind: actPassivate, label: e.reason})
	case evExchangeDone:
		m.exchangeDone(e)
	case evExchange:
		m.admit(e)
	case evCreate:
		m.create(e, false)
	case evStateReported:
		m.stateReported(e)
	case evCreated:
		m.creating = false
	case evCreateFailed:
		m.createFailed(e)
	case evTurnDone:
		m.turnDone(e)
	case evDelete:
		m.deleteAsked(e)
	case evScheduleFired:
		m.scheduleFired(e)
	case evScheduleDone:
		m.scheduleDone(e)
	case evDeactivate:
		m.emit(action{kind: actUnpark})
		switch {
		case !m.resident || m.disposing:
		case e.reason == DisposeOwnershipLost:
			m.dispose(e.reason, false) // its writes would be fenced
		default:
			m.emit(action{kind: actDrain, label: e.reason})
		}
	}
	return m.out[n:]
}

// emit queues actions.
func (m *machine) emit(acts ...action) {
	if m.out == nil {
		m.out = make([]action, 0, 4)
	}
	m.out = append(m.out, acts...)
}

// done empties the queue of actions (keeping its capacity; the executor
// returns its queue to the pool instead).
func (m *machine) done() { m.out = m.out[:0] }

func (m *machine) buildAsked(e event) {
	switch {
	case e.gone || m.resident || m.building:
		return
	case m.disposing:
		m.rebuild = true // built once the close is done
		return
	}
	m.building = true
	m.emit(action{kind: actBuild})
}

func (m *machine) built(e event) {
	m.building, m.resident = false, true
	m.emit(action{kind: actUnpark}, action{kind: actMarkActivity})
	m.armIdle(e.now.Add(m.cfg.Policy.SessionTimeout))
	for _, id := range e.reapply {
		m.handOver(id)
	}
}

func (m *machine) armIdle(at time.Time) {
	m.idleGen++
	m.idleArmed = true
	m.emit(action{kind: actArmIdle, at: at, gen: m.idleGen})
}

// handOver hands exec's decision to the runtime and pins the runtime until
// exec settles.
func (m *machine) handOver(exec string) {
	if !m.resident {
		return
	}
	if m.handedOver == nil {
		m.handedOver = map[string]bool{}
	}
	m.handedOver[exec] = true
	m.emit(action{kind: actHandOver, exec: exec})
}

func (m *machine) onLease(e event) {
	if e.stale || !m.resident {
		return // a hook of a runtime already disposed
	}
	switch e.lease {
	case LeasePaused:
		if _, ok := m.leases[e.exec]; ok {
			return
		}
		if m.leases == nil {
			m.leases = map[string]*lease{}
		}
		m.leases[e.exec] = &lease{deadline: e.deadline, durable: e.durable, journaled: e.journaled, stored: e.stored}
		m.emit(action{kind: actMarkActivity}, action{kind: actSetDeadline, exec: e.exec, at: e.deadline, stored: e.stored})
	case LeaseResuming:
		if l, ok := m.leases[e.exec]; ok {
			l.resuming = true
		}
		// Every decision passes here, whichever surface made it; the
		// deadline's decline is counted as a timeout.
		outcome := e.action
		if e.timedOut {
			outcome = outcomeTimeout
		}
		m.emit(action{kind: actCountApproval, exec: e.exec, label: outcome})
	case LeaseSettled:
		delete(m.handedOver, e.exec)
		if l, ok := m.leases[e.exec]; ok {
			delete(m.leases, e.exec)
			// The reminder is the journal's to cancel only if it set it:
			// one the session wrote (a restored pause) may have been
			// written after the journal's cancel.
			m.emit(action{kind: actReleaseLease, exec: e.exec, stored: l.stored && e.stored})
		}
	}
}

// deadline is expirePendingApproval: unless a decision already exists (or
// the execution is resuming), record a decline with reason
// approval_timeout (then hand it over, evTimeoutRecorded), and release the
// lease.
func (m *machine) deadline(e event) {
	if !m.resident {
		return
	}
	l, ok := m.leases[e.exec]
	switch {
	case ok && l.resuming:
	case !ok && !e.live:
		// gone; or restored just now, its lease on its way, and not
		// live: nothing to decline
	case !e.decided:
		m.emit(action{kind: actRecordTimeout, exec: e.exec})
	default:
		delete(m.leases, e.exec)
	}
}

// idle is executor's alarm(): ask the pure policy, then act.
func (m *machine) idle(e event) {
	if e.gen != m.idleGen || !m.idleArmed || !m.resident {
		return // superseded, or disarmed by a disposal
	}
	m.idleArmed = false
	in := e.input
	in.Paused += m.pendingLeases()
	in.Running += len(m.handedOver) + len(m.running)
	d := m.cfg.Policy.Decide(in)
	switch d.Outcome {
	case alarm.IdleWithinTimeout:
		m.emit(action{kind: actPersistActivity})
		m.armIdle(e.last.Add(m.cfg.Policy.SessionTimeout))
	case alarm.ExtendPausedLease, alarm.ExtendRunningLease:
		m.emit(action{kind: actLogExtension, label: string(d.Outcome), lease: d.Lease}, action{kind: actPersistActivity})
		m.armIdle(e.now.Add(d.Lease))
	case alarm.DestroyIdleSession:
		m.dispose(DisposeIdle, true)
		m.emit(action{kind: actPassivate, label: DisposeIdle})
	}
	// Counted once handled, its next alarm armed: a test that sees the
	// count and moves its clock on must not move the now this alarm reads.
	m.emit(action{kind: actCountIdleAlarm})
}

// dispose is executor's closeRuntime: single-flight (a second disposal
// finds nothing to dispose and joins the first), the runtime marked not
// initialized before it is closed, every approval lease released (a
// durable or journaled pause's stays journaled, with its deadline and
// directory row, unless the session ends) and the idle alarm disarmed.
// With retire, the activation's last writes follow in one transaction.
func (m *machine) dispose(reason string, retire bool) {
	if !m.resident || m.disposing {
		return
	}
	m.resident, m.disposing, m.idleArmed = false, true, false
	clear(m.handedOver)
	clear(m.running) // their ends complete or retry by the record
	keepDurable := reason != DisposeDelete && reason != DisposeExpired
	var drop []string
	for id, l := range m.leases {
		if (l.durable || l.journaled) && keepDurable {
			continue
		}
		drop = append(drop, id)
	}
	slices.Sort(drop)
	clear(m.leases)
	m.emit(action{kind: actDispose, label: reason, drop: drop})
	if retire {
		m.emit(action{kind: actRetireWrites, drop: drop})
	}
}

// exchangeDone: a parked stream's end may leave the activation with
// nothing to hold (it passivates); an exchange's end is activity; an
// initialize that ended without creating the session (go-sdk refused it)
// leaves nothing: the runtime built for it goes and the grain passivates.
func (m *machine) exchangeDone(e event) {
	switch {
	case e.parked:
		if !m.resident && e.parkedLeft == 0 {
			m.emit(action{kind: actPassivate, label: DisposeIdle})
		}
		return
	case e.known && m.resident:
		m.emit(action{kind: actMarkActivity})
	}
	if m.creating && e.inFlight == 0 {
		m.creating = false
		m.emit(action{kind: actAbandonCreate})
		m.dispose(DisposeDelete, false)
		m.emit(action{kind: actPassivate, label: string(grain.ReasonRequested)})
	}
}

// expiry ends a session idle past SessionTTL (its last activity in memory
// or in the record, whichever is later), or re-arms the reminder; an ended
// session's grain is deleted once its tombstone retention is over (the id
// keeps answering 404: a grain with no row is no session).
func (m *machine) expiry(e event) {
	switch {
	case e.gone:
	case e.ended:
		if due := e.endedAt.Add(m.cfg.TombstoneRetention); e.now.Before(due) {
			m.emit(action{kind: actSetExpiry, at: due})
			return
		}
		m.emit(action{kind: actDeleteGrain})
	default:
		last := e.last
		if e.persisted.After(last) {
			last = e.persisted
		}
		if expires := last.Add(m.cfg.SessionTTL); e.now.Before(expires) {
			m.emit(action{kind: actSetExpiry, at: expires, label: "re-arm expiry"})
			return
		}
		m.emit(action{kind: actEnd, label: DisposeExpired})
	}
}

// pendingLeases is the number of in-memory pauses waiting for a decision.
func (m *machine) pendingLeases() int {
	n := 0
	for _, l := range m.leases {
		if !l.resuming && !l.durable {
			n++
		}
	}
	return n
}

// pins is what keeps the runtime from a cap eviction: the leases of
// in-memory pauses and the executions handed a decision.
func (m *machine) pins() (leases, decided int) {
	for _, l := range m.leases {
		if !l.durable {
			leases++
		}
	}
	return leases, len(m.handedOver) + len(m.running)
}

// leaseIDs lists the leased executions, sorted.
func (m *machine) leaseIDs() []string {
	var ids []string
	for id := range m.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// idleCurrent reports whether idle alarm gen is the armed one.
func (m *machine) idleCurrent(gen uint64) bool { return m.idleArmed && gen == m.idleGen }
