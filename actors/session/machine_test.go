package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

var mt0 = time.UnixMilli(2_000_000_000_000)

// show renders actions compactly, for the tables below.
func show(acts []action) string {
	var out []string
	for _, a := range acts {
		var s string
		switch a.kind {
		case actBuild:
			s = "build"
		case actArmIdle:
			s = fmt.Sprintf("arm-idle#%d+%s", a.gen, a.at.Sub(mt0))
		case actHandOver:
			s = "hand-over:" + a.exec
		case actSetDeadline:
			s = "deadline:" + a.exec
			if a.stored {
				s = "deadline-stored:" + a.exec
			}
		case actMarkActivity:
			s = "mark"
		case actCountApproval:
			s = "count:" + a.label
		case actRecordTimeout:
			s = "record-timeout:" + a.exec
		case actReleaseLease:
			s = "release:" + a.exec
			if a.stored {
				s = "release-cancelled:" + a.exec
			}
		case actPersistActivity:
			s = "persist"
		case actLogExtension:
			s = fmt.Sprintf("extend:%s+%s", a.label, a.lease)
		case actCountIdleAlarm:
			s = "count-idle"
		case actDispose:
			s = fmt.Sprintf("dispose:%s%v", a.label, a.drop)
		case actRetireWrites:
			s = fmt.Sprintf("retire-writes%v", a.drop)
		case actPassivate:
			s = "passivate:" + a.label
		case actSetExpiry:
			s = fmt.Sprintf("set-expiry+%s", a.at.Sub(mt0))
		case actEnd:
			s = "end:" + a.label
		case actDeleteGrain:
			s = "delete-grain"
		case actDrain:
			s = "drain:" + a.label
		case actAbandonCreate:
			s = "abandon-create"
		case actAnswer:
			s = "answer:" + strings.TrimPrefix(a.status.String(), "STATUS_")
		case actReject:
			s = "reject"
		case actBeginCreate:
			s = "begin-create"
		case actServe:
			s = "serve"
			if a.restored {
				s += ":restored"
			}
		case actPark:
			s = "park"
		case actEndOldestParked:
			s = "end-oldest-parked"
		case actCommitCreate:
			s = fmt.Sprintf("commit-create:%s", a.state)
		case actSaveState:
			s = fmt.Sprintf("save-state:%s", a.state)
			if a.app != nil {
				s = fmt.Sprintf("save-app:%s@%d:%s", a.name, a.app.GetVersion(), a.app.GetValue())
			}
		case actRefuseState:
			s = "refuse-state"
		case actUnpark:
			s = "unpark"
		case actRunSchedule:
			s = fmt.Sprintf("run-schedule:%s+%s", a.exec, a.at.Sub(mt0))
		case actLeaseSchedule:
			s = fmt.Sprintf("lease-schedule:%s+%s", a.exec, a.at.Sub(mt0))
		case actRetrySchedule:
			s = fmt.Sprintf("retry-schedule:%s+%s", a.exec, a.at.Sub(mt0))
		case actCompleteSchedule:
			s = fmt.Sprintf("complete-schedule:%s:%s", a.exec, a.label)
		default:
			s = fmt.Sprintf("?%d", a.kind)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// Events, spelled out for the tables.
func asked() event             { return event{kind: evBuildAsked} }
func built(re ...string) event { return event{kind: evBuilt, now: mt0, reapply: re} }
func buildFailed() event       { return event{kind: evBuildFailed} }
func paused(x string) event {
	return event{kind: evLease, lease: LeasePaused, exec: x, deadline: mt0.Add(4 * time.Minute)}
}
func durablePaused(x string) event {
	e := paused(x)
	e.durable = true
	return e
}
func journaledPaused(x string) event {
	e := paused(x)
	e.journaled = true
	return e
}

// storedPaused is a durable pause whose journal stored its deadline.
func storedPaused(x string) event {
	e := durablePaused(x)
	e.stored = true
	return e
}

// storedSettled is a settle whose journal write cancelled the deadline.
func storedSettled(x string) event {
	e := settled(x)
	e.stored = true
	return e
}
func resuming(x, action string) event {
	return event{kind: evLease, lease: LeaseResuming, exec: x, action: action}
}
func settled(x string) event { return event{kind: evLease, lease: LeaseSettled, exec: x} }
func deadline(x string, live, decided bool) event {
	return event{kind: evDeadline, exec: x, live: live, decided: decided}
}
func idleAt(gen uint64, idle time.Duration, in alarm.Input) event {
	in.Idle = idle
	return event{kind: evIdleFired, gen: gen, now: mt0.Add(idle), last: mt0, input: in}
}
func dispose(reason string) event { return event{kind: evDispose, reason: reason} }

// exch is an exchange of the session's owner; initialize one without
// session id; stream the standalone GET stream with parked streams
// parked already.
func exch() event       { return event{kind: evExchange, found: true, owner: true} }
func initialize() event { return event{kind: evExchange, create: true} }
func stream(parked int) event {
	e := exch()
	e.standalone, e.parkedLeft = true, parked
	return e
}
func reported(state string) event {
	return event{kind: evStateReported, found: true, state: []byte(state)}
}
func reportedApp(name, value string) event {
	return event{kind: evStateReported, found: true, name: name, app: &pb.AppState{Version: 1, Value: []byte(value)}}
}
func turnDone(parked int) event  { return event{kind: evTurnDone, parkedLeft: parked} }
func retire(reason string) event { return event{kind: evDispose, reason: reason, retire: true} }

type mstep struct {
	e    event
	want string // show of the actions
}

func TestMachine(t *testing.T) {
	built1 := mstep{built(), "unpark mark arm-idle#1+5m0s"}
	for _, tc := range []struct {
		name  string
		steps []mstep
		// state afterwards: resident, leases (sorted ids), pins
		resident   bool
		leases     string
		pinL, pinD int
	}{
		{name: "a cold build marks activity and arms the idle alarm",
			steps:    []mstep{{asked(), "build"}, built1, {asked(), ""}},
			resident: true},
		{name: "a second request while the runtime builds asks for no second build",
			steps:    []mstep{{asked(), "build"}, {asked(), ""}, built1},
			resident: true},
		{name: "an ended or unknown session builds nothing",
			steps: []mstep{{event{kind: evBuildAsked, gone: true}, ""}}},
		{name: "interrupt between admission and build: nothing is left resident and the next request builds again",
			steps: []mstep{{asked(), "build"}, {buildFailed(), ""}, {dispose(DisposeShutdown), ""}, {asked(), "build"}}},
		{name: "a decision recorded just before the runtime was lost is re-applied to the restored pause, which pins",
			steps:    []mstep{{asked(), "build"}, {built("x"), "unpark mark arm-idle#1+5m0s hand-over:x"}},
			resident: true, pinD: 1},
		{name: "a pause takes one lease, arms its deadline and pins; a repeated report changes nothing",
			steps:    []mstep{built1, {paused("x"), "mark deadline:x"}, {paused("x"), ""}},
			resident: true, leases: "x", pinL: 1},
		{name: "a journaled pause a handler waits for pins as an in-memory one",
			steps:    []mstep{built1, {journaledPaused("x"), "mark deadline:x"}},
			resident: true, leases: "x", pinL: 1},
		{name: "a durable pause takes a lease that does not pin",
			steps:    []mstep{built1, {durablePaused("x"), "mark deadline:x"}},
			resident: true, leases: "x"},
		{name: "the deadline declines an undecided pause, hands the decline over and releases the lease",
			steps: []mstep{built1, {paused("x"), "mark deadline:x"}, {deadline("x", true, false), "record-timeout:x"},
				{event{kind: evTimeoutRecorded, exec: "x"}, "hand-over:x"}, {resuming("x", "decline"), "count:decline"}},
			resident: true, pinD: 1},
		{name: "the deadline's decline is counted as a timeout",
			steps:    []mstep{built1, {event{kind: evLease, lease: LeaseResuming, exec: "x", action: "decline", timedOut: true}, "count:timeout"}},
			resident: true},
		{name: "a deadline after the decision arrived (resuming) does nothing",
			steps:    []mstep{built1, {paused("x"), "mark deadline:x"}, {resuming("x", "accept"), "count:accept"}, {deadline("x", true, false), ""}},
			resident: true, leases: "x", pinL: 1},
		{name: "a deadline that finds a decision recorded releases the lease without declining",
			steps:    []mstep{built1, {paused("x"), "mark deadline:x"}, {deadline("x", true, true), ""}},
			resident: true},
		{name: "a deadline on a pause restored just now (its lease on its way) declines it",
			steps:    []mstep{built1, {deadline("x", true, false), "record-timeout:x"}},
			resident: true},
		{name: "a deadline of a pause that is gone does nothing",
			steps:    []mstep{built1, {deadline("x", false, false), ""}},
			resident: true},
		{name: "a deadline on a session whose runtime could not be built does nothing",
			steps: []mstep{{asked(), "build"}, {buildFailed(), ""}, {deadline("x", true, false), ""}}},
		{name: "settling releases the lease (reminder and decision) and unpins the handed-over execution",
			steps: []mstep{built1, {paused("x"), "mark deadline:x"}, {event{kind: evDecided, exec: "x"}, "hand-over:x mark"},
				{resuming("x", "accept"), "count:accept"}, {settled("x"), "release:x"}},
			resident: true},
		{name: "a pause whose journal stored the deadline, settled by a write that cancelled it: the session writes neither",
			steps: []mstep{built1, {storedPaused("x"), "mark deadline-stored:x"}, {event{kind: evDecided, exec: "x"}, "hand-over:x mark"},
				{resuming("x", "accept"), "count:accept"}, {storedSettled("x"), "release-cancelled:x"}},
			resident: true},
		{name: "a stored deadline settled by a write that did not cancel it (failed, an older node's journal) is cancelled by the release",
			steps:    []mstep{built1, {storedPaused("x"), "mark deadline-stored:x"}, {settled("x"), "release:x"}},
			resident: true},
		{name: "a deadline the session wrote (a restored pause) is cancelled by the release even if the journal cancelled one too",
			steps:    []mstep{built1, {durablePaused("x"), "mark deadline:x"}, {storedSettled("x"), "release:x"}},
			resident: true},
		{name: "a restored durable execution handed a decision unpins when it settles, with no lease to release",
			steps:    []mstep{{built("x"), "unpark mark arm-idle#1+5m0s hand-over:x"}, {settled("x"), ""}},
			resident: true},
		{name: "hooks of a disposed runtime are ignored",
			steps: []mstep{built1, {event{kind: evLease, lease: LeasePaused, exec: "x", stale: true}, ""},
				{dispose(DisposeOwnershipLost), "dispose:ownership_lost[]"}, {paused("y"), ""}, {settled("y"), ""}}},
		{name: "idle within the timeout persists activity and re-arms from the last activity",
			steps:    []mstep{built1, {idleAt(1, time.Minute, alarm.Input{}), "persist arm-idle#2+5m0s count-idle"}},
			resident: true},
		{name: "a superseded idle alarm is ignored",
			steps: []mstep{built1, {idleAt(1, time.Minute, alarm.Input{}), "persist arm-idle#2+5m0s count-idle"},
				{idleAt(1, 6*time.Minute, alarm.Input{}), ""}},
			resident: true},
		{name: "idle past the timeout retires the runtime and passivates",
			steps: []mstep{built1, {idleAt(1, 6*time.Minute, alarm.Input{}),
				"dispose:idle[] retire-writes[] passivate:idle count-idle"}, {event{kind: evDisposeDone}, ""}}},
		{name: "an in-memory pause extends the paused lease",
			steps: []mstep{built1, {paused("x"), "mark deadline:x"},
				{idleAt(1, 6*time.Minute, alarm.Input{}), "extend:extend_paused_lease+3m0s persist arm-idle#2+9m0s count-idle"}},
			resident: true, leases: "x", pinL: 1},
		{name: "a durable pause does not extend",
			steps: []mstep{built1, {durablePaused("x"), "mark deadline:x"},
				{idleAt(1, 6*time.Minute, alarm.Input{DurablePaused: 1}), "dispose:idle[] retire-writes[] passivate:idle count-idle"}}},
		{name: "an execution handed a decision counts as running: the idle alarm extends instead of disposing it",
			steps: []mstep{built1, {event{kind: evDecided, exec: "x"}, "hand-over:x mark"},
				{idleAt(1, 6*time.Minute, alarm.Input{}), "extend:extend_running_lease+4m0s persist arm-idle#2+10m0s count-idle"}},
			resident: true, pinD: 1},
		{name: "a cap eviction is re-checked: a pinned runtime stays",
			steps:    []mstep{built1, {event{kind: evCapEviction}, ""}},
			resident: true},
		{name: "a cap eviction of an evictable runtime retires it and passivates",
			steps: []mstep{built1, {event{kind: evCapEviction, evictable: true}, "dispose:cap[] retire-writes[] passivate:cap"}}},
		{name: "a stale cap eviction (no runtime) does nothing",
			steps: []mstep{{event{kind: evCapEviction, evictable: true}, ""}}},
		{name: "a disposal keeps durable pauses (reminder, directory row) and drops in-memory ones",
			steps: []mstep{built1, {durablePaused("a"), "mark deadline:a"}, {paused("b"), "mark deadline:b"},
				{retire(DisposeRebalance), "dispose:rebalance[b] retire-writes[b]"}}},
		{name: "a disposal keeps a journaled pause that pins (the SDK's Ask: a fresh runtime restores it), so a decision finds it; delete drops it",
			steps: []mstep{built1, {journaledPaused("a"), "mark deadline:a"}, {paused("b"), "mark deadline:b"},
				{retire(DisposeRebalance), "dispose:rebalance[b] retire-writes[b]"}}},
		{name: "delete drops journaled pauses too",
			steps: []mstep{built1, {journaledPaused("a"), "mark deadline:a"},
				{dispose(DisposeDelete), "dispose:delete[a]"}}},
		{name: "delete drops durable pauses too",
			steps: []mstep{built1, {durablePaused("a"), "mark deadline:a"}, {paused("b"), "mark deadline:b"},
				{dispose(DisposeDelete), "dispose:delete[a b]"}}},
		{name: "expiry drops durable pauses too",
			steps: []mstep{built1, {durablePaused("a"), "mark deadline:a"},
				{dispose(DisposeExpired), "dispose:expired[a]"}}},
		{name: "a disposal drops the handed-over pins with the runtime",
			steps: []mstep{built1, {event{kind: evDecided, exec: "x"}, "hand-over:x mark"}, {dispose(DisposeShutdown), "dispose:shutdown[]"},
				{event{kind: evDisposeDone}, ""}, {asked(), "build"}, {built(), "unpark mark arm-idle#2+5m0s"}},
			resident: true},
		{name: "a second disposal joins the first: nothing more is closed",
			steps: []mstep{built1, {retire(DisposeIdle), "dispose:idle[] retire-writes[]"}, {retire(DisposeCap), ""},
				{event{kind: evDisposeDone}, ""}, {dispose(DisposeShutdown), ""}}},
		{name: "disposal interrupted by a request: the request's build waits for the close, then builds",
			steps: []mstep{built1, {dispose(DisposeIdle), "dispose:idle[]"}, {asked(), ""}, {asked(), ""},
				{event{kind: evDisposeDone}, "build"}, {built(), "unpark mark arm-idle#2+5m0s"}},
			resident: true},
		{name: "a hung close: its runtime's alarm, hooks and a cap eviction meanwhile do nothing",
			steps: []mstep{built1, {paused("x"), "mark deadline:x"}, {dispose(DisposeIdle), "dispose:idle[x]"},
				{idleAt(1, 6*time.Minute, alarm.Input{}), ""}, {settled("x"), ""}, {paused("y"), ""},
				{event{kind: evCapEviction, evictable: true}, ""}, {deadline("x", true, false), ""}}},
		{name: "the expiry reminder of an unknown session does nothing",
			steps: []mstep{{event{kind: evExpiry, gone: true, now: mt0.Add(48 * time.Hour)}, ""}}},
		{name: "the expiry reminder re-arms from the later of the in-memory and the persisted activity",
			steps: []mstep{{event{kind: evExpiry, now: mt0.Add(24 * time.Hour), last: mt0, persisted: mt0.Add(time.Hour)}, "set-expiry+25h0m0s"},
				{event{kind: evExpiry, now: mt0.Add(24 * time.Hour), last: mt0.Add(2 * time.Hour), persisted: mt0.Add(time.Hour)}, "set-expiry+26h0m0s"}}},
		{name: "a session idle past its TTL ends: tombstone, then the runtime disposed (durable pauses too) and the grain passivated",
			steps: []mstep{built1, {durablePaused("a"), "mark deadline:a"},
				{event{kind: evExpiry, now: mt0.Add(25 * time.Hour), last: mt0, persisted: mt0}, "end:expired"},
				{event{kind: evEnded, reason: DisposeExpired}, "unpark dispose:expired[a] passivate:expired"}}},
		{name: "a session that ends without a runtime passivates",
			steps: []mstep{{event{kind: evEnded, reason: DisposeDelete}, "unpark passivate:delete"}}},
		{name: "an ended session's grain is deleted once its tombstone retention is over",
			steps: []mstep{{event{kind: evExpiry, ended: true, endedAt: mt0, now: mt0.Add(30 * time.Minute)}, "set-expiry+1h0m0s"},
				{event{kind: evExpiry, ended: true, endedAt: mt0, now: mt0.Add(time.Hour)}, "delete-grain"}}},
		{name: "an activation that lost its ownership disposes without writing (they would be fenced), keeping durable pauses",
			steps: []mstep{built1, {durablePaused("a"), "mark deadline:a"}, {paused("b"), "mark deadline:b"},
				{event{kind: evDeactivate, reason: DisposeOwnershipLost}, "unpark dispose:ownership_lost[b]"}}},
		{name: "a graceful deactivation drains running executions first, then retires",
			steps: []mstep{built1, {event{kind: evDeactivate, reason: DisposeRebalance}, "unpark drain:rebalance"},
				{retire(DisposeRebalance), "dispose:rebalance[] retire-writes[]"}}},
		{name: "an activation without a runtime deactivates without disposing",
			steps: []mstep{{event{kind: evDeactivate, reason: DisposeShutdown}, "unpark"}}},
		{name: "an exchange's end is activity",
			steps:    []mstep{built1, {event{kind: evExchangeDone, known: true}, "mark"}},
			resident: true},
		{name: "the last parked stream's end passivates an activation without a runtime",
			steps: []mstep{{event{kind: evExchangeDone, parked: true, parkedLeft: 1}, ""},
				{event{kind: evExchangeDone, parked: true}, "passivate:idle"}}},
		{name: "a parked stream's end leaves a resident runtime alone",
			steps:    []mstep{built1, {event{kind: evExchangeDone, parked: true}, ""}},
			resident: true},
		{name: "an initialize that ended without creating the session drops the runtime built for it",
			steps: []mstep{{initialize(), "begin-create build serve"}, built1, {event{kind: evExchangeDone, known: true, inFlight: 1}, "mark"},
				{event{kind: evExchangeDone, known: true}, "mark abandon-create dispose:delete[] passivate:requested"},
				{event{kind: evDisposeDone}, ""}, {initialize(), "begin-create build serve"}}},
		// Admission.
		{name: "an exchange of an unknown, foreign or ended session is answered with its status and builds nothing",
			steps: []mstep{{event{kind: evExchange}, "answer:NOT_FOUND"}, {event{kind: evExchange, found: true}, "answer:FORBIDDEN"},
				{event{kind: evExchange, found: true, owner: true, ended: true}, "answer:ENDED"},
				{event{kind: evExchange, found: true, ended: true}, "answer:FORBIDDEN"}}},
		{name: "an exchange on a hibernated session builds the runtime first and is served as restored",
			steps:    []mstep{{exch(), "build serve:restored"}, built1, {exch(), "serve"}},
			resident: true},
		{name: "interrupt between an exchange's admission and its build: nothing is left resident and the next exchange builds again",
			steps: []mstep{{exch(), "build serve:restored"}, {buildFailed(), ""}, {turnDone(0), "passivate:idle"},
				{exch(), "build serve:restored"}}},
		{name: "an exchange admitted while the runtime builds asks for no second build (it finds no runtime to serve)",
			steps:    []mstep{{asked(), "build"}, {exch(), "serve:restored"}, built1},
			resident: true},
		{name: "an exchange admitted while a disposal is in progress waits for the close, then builds and is served as restored",
			steps: []mstep{built1, {dispose(DisposeIdle), "dispose:idle[]"}, {exch(), "serve:restored"},
				{event{kind: evDisposeDone}, "build"}, {built(), "unpark mark arm-idle#2+5m0s"}},
			resident: true},
		{name: "an exchange admitted after the session ended is answered ended, even with its runtime closing",
			steps: []mstep{built1, {event{kind: evEnded, reason: DisposeDelete}, "unpark dispose:delete[] passivate:delete"},
				{event{kind: evExchange, found: true, owner: true, ended: true}, "answer:ENDED"}}},
		{name: "while the session is being created, another initialize is answered exists and an exchange not found",
			steps: []mstep{{initialize(), "begin-create build serve"}, {initialize(), "answer:EXISTS"},
				{event{kind: evExchange}, "answer:NOT_FOUND"}, built1, {initialize(), "answer:EXISTS"}},
			resident: true},
		{name: "an initialize of a session that exists is answered exists",
			steps: []mstep{{event{kind: evExchange, create: true, found: true}, "answer:EXISTS"}}},
		{name: "a SessionAccess of the owner is admitted like an exchange: built, served as restored",
			steps:    []mstep{{exch(), "build serve:restored"}, built1},
			resident: true},
		{name: "DELETE of the owner ends the session; of anyone else, or of a session unknown or ended, is answered with its status",
			steps: []mstep{built1, {event{kind: evDelete, found: true}, "answer:FORBIDDEN"}, {event{kind: evDelete}, "answer:NOT_FOUND"},
				{event{kind: evDelete, found: true, owner: true}, "end:delete"},
				{event{kind: evEnded, reason: DisposeDelete}, "unpark dispose:delete[] passivate:delete"},
				{event{kind: evDelete, found: true, owner: true, ended: true}, "answer:ENDED"}}},
		// Parking.
		{name: "a standalone stream of a session without a runtime is parked, not restored (not activity)",
			steps: []mstep{{stream(0), "park"}, {turnDone(1), ""}}},
		{name: "the oldest parked stream ends once the limit is reached; the new one is parked",
			steps: []mstep{{stream(3), "park"}, {stream(maxParkedStreams), "park end-oldest-parked"}}},
		{name: "parked streams end when a real request restores the runtime, when the session ends and when the activation stops",
			steps: []mstep{{stream(0), "park"}, {exch(), "build serve:restored"}, built1,
				{event{kind: evEnded, reason: DisposeDelete}, "unpark dispose:delete[] passivate:delete"},
				{event{kind: evDeactivate, reason: DisposeRebalance}, "unpark"}}},
		{name: "a standalone stream of a resident runtime is served",
			steps:    []mstep{built1, {stream(0), "serve"}},
			resident: true},
		{name: "a standalone stream while a disposal is in progress is parked",
			steps: []mstep{built1, {dispose(DisposeCap), "dispose:cap[]"}, {stream(0), "park"}}},
		{name: "a stream of a foreign session is refused, not parked",
			steps: []mstep{{event{kind: evExchange, found: true, standalone: true}, "answer:FORBIDDEN"}}},
		{name: "passivate-if-idle: a turn that leaves no runtime and no parked stream passivates; parked streams or a runtime keep it",
			steps:    []mstep{{turnDone(0), "passivate:idle"}, {turnDone(2), ""}, {asked(), "build"}, built1, {turnDone(0), ""}},
			resident: true},
		// Creation.
		{name: "a SessionCreate builds the runtime, then commits the creation with the runtime's state; later states save the record",
			steps: []mstep{{event{kind: evCreate}, "begin-create build"}, built1, {reported("s0"), "commit-create:s0"},
				{event{kind: evCreated}, ""}, {reported("s1"), "save-state:s1"}, {event{kind: evExchangeDone, known: true}, "mark"}},
			resident: true},
		{name: "an initialize's creation is committed when the runtime reports the handshake state",
			steps: []mstep{{initialize(), "begin-create build serve"}, built1, {event{kind: evStateReported, state: []byte("h")}, "commit-create:h"},
				{event{kind: evCreated}, ""}, {event{kind: evExchangeDone, known: true}, "mark"}},
			resident: true},
		{name: "a create without a principal is refused; a create of a session that exists is answered exists",
			steps: []mstep{{event{kind: evCreate, noPrincipal: true}, "reject"}, {event{kind: evCreate, found: true}, "answer:EXISTS"},
				{event{kind: evExchange, create: true, noPrincipal: true}, "reject"}}},
		{name: "a failed build abandons the creation: nothing is resident and the session can be created again",
			steps: []mstep{{event{kind: evCreate}, "begin-create build"}, {buildFailed(), "abandon-create"},
				{initialize(), "begin-create build serve"}}},
		{name: "a SessionCreate whose commit failed or was fenced abandons the creation and drops the runtime",
			steps: []mstep{{event{kind: evCreate}, "begin-create build"}, built1, {reported("s"), "commit-create:s"},
				{event{kind: evCreateFailed, direct: true}, "abandon-create dispose:shutdown[]"}, {event{kind: evDisposeDone}, ""},
				{turnDone(0), "passivate:idle"}}},
		{name: "an initialize whose commit failed keeps the creation until the exchange ends, then drops it",
			steps: []mstep{{initialize(), "begin-create build serve"}, built1, {reported("h"), "commit-create:h"},
				{event{kind: evCreateFailed}, ""}, {event{kind: evExchangeDone, known: true}, "mark abandon-create dispose:delete[] passivate:requested"}}},
		{name: "a state reported by a disposed runtime, or of a session gone or ended, is refused",
			steps: []mstep{built1, {event{kind: evStateReported, stale: true, found: true}, "refuse-state"},
				{event{kind: evStateReported}, "refuse-state"}, {event{kind: evStateReported, found: true, ended: true}, "refuse-state"}},
			resident: true},
		{name: "an application state value of a live session is saved into the record, the runtime state untouched",
			steps: []mstep{built1, {reportedApp("notes", `["a"]`), "save-app:notes@1:[\"a\"]"}, {reported("s1"), "save-state:s1"},
				{reportedApp("notes", `[]`), "save-app:notes@1:[]"}},
			resident: true},
		{name: "an application state value of a disposed runtime, a session being created, gone or ended is refused",
			steps: []mstep{{event{kind: evCreate}, "begin-create build"}, built1, {reportedApp("n", "1"), "refuse-state"},
				{reported("s"), "commit-create:s"}, {event{kind: evCreated}, ""},
				{func() event { e := reportedApp("n", "1"); e.stale = true; return e }(), "refuse-state"},
				{func() event { e := reportedApp("n", "1"); e.found = false; return e }(), "refuse-state"},
				{func() event { e := reportedApp("n", "1"); e.ended = true; return e }(), "refuse-state"},
				{reportedApp("n", "2"), "save-app:n@1:2"}},
			resident: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(&Config{Policy: alarm.DefaultPolicy(), SessionTTL: 24 * time.Hour, TombstoneRetention: time.Hour})
			for i, s := range tc.steps {
				got := show(m.step(s.e))
				m.done()
				if got != s.want {
					t.Fatalf("step %d (event %d %s): actions %q, want %q", i, s.e.kind, s.e.exec, got, s.want)
				}
			}
			if m.resident != tc.resident {
				t.Errorf("resident %v, want %v", m.resident, tc.resident)
			}
			if got := strings.Join(m.leaseIDs(), " "); got != tc.leases {
				t.Errorf("leases %q, want %q", got, tc.leases)
			}
			if l, d := m.pins(); l != tc.pinL || d != tc.pinD {
				t.Errorf("pins (leases, decided) = (%d, %d), want (%d, %d)", l, d, tc.pinL, tc.pinD)
			}
		})
	}
}

func TestLeaseKindNames(t *testing.T) {
	for k, want := range map[LeaseKind]string{LeasePaused: "paused", LeaseResuming: "resuming", LeaseSettled: "settled", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("LeaseKind(%d) = %q, want %q", k, got, want)
		}
	}
}
