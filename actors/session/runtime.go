package session

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Runtime is a session's in-memory, rebuildable part: for MCP sessions, the
// go-sdk server and its transport (actors/mcpruntime); in tests, a fake.
// The session grain builds it on demand from the durable record, counts
// what it has in flight to decide when it may be disposed, and closes it on
// passivation. It is the one interface between the grain and what it
// hosts: every method is part of the contract.
//
// The count methods are called from other goroutines (the node's residency
// registry, metrics scrapes); they must be cheap and safe for concurrent use.
type Runtime interface {
	// ActiveStreams is the number of open response streams that hold the
	// runtime in memory (POST responses being written).
	ActiveStreams() int
	// OpenStreams is the number of response streams the session's clients
	// hold open: POST responses sent as event streams and GET listeners,
	// from their header to their end (mcpgrain_active_streams).
	OpenStreams() int
	// PausedExecutions is the number of executions paused for approval
	// whose pause lives only in memory (durable ones are not counted).
	PausedExecutions() int
	// RunningExecutions is the number of executions still running.
	RunningExecutions() int

	// ServeExchange serves one tunnelled HTTP exchange. It blocks until
	// the response is complete; the request's context is cancelled if the
	// client goes away.
	ServeExchange(w http.ResponseWriter, r *http.Request)

	// PausedExecution describes one paused execution (SessionId unset):
	// the session publishes pauses in the execution directory and answers
	// approval surfaces from them.
	PausedExecution(execID string) (*pb.PausedExecution, bool)
	// PausedExecutionList describes every paused execution.
	PausedExecutionList() []*pb.PausedExecution
	// DurablePause reports whether paused execution execID is durable
	// (journaled in the store): such a pause survives the runtime — a
	// fresh runtime restores it by replay — so it takes no residency
	// lease, does not keep the session from passivating or being
	// cap-evicted, and its approval reminder and directory row stay when
	// the runtime is disposed.
	DurablePause(execID string) bool
	// DurablePausedExecutions is the number of durable paused executions
	// (not counted in PausedExecutions).
	DurablePausedExecutions() int
	// ResolveApproval tells the runtime an approval decision (the
	// deadline's auto-decline, or a human's decision).
	ResolveApproval(execID string, d *pb.ApprovalDecision)
	// ResumeForModel resumes execID for a `resume` call forwarded from
	// another session of the same principal, and returns the MCP tool
	// result as JSON, or a non-OK status (not found, already settled,
	// expired).
	ResumeForModel(ctx context.Context, execID string, resp *pb.ExecutionResumeForModel) (resultJSON string, status pb.ExecutionReply_Status)

	// UntrimmedEventBytes is, after Close, what the runtime and its
	// predecessors wrote to the session's event log since it was last
	// trimmed: the log is kept within a byte budget across restores,
	// trimmed each time a quarter of the budget was written, which a
	// runtime cannot see alone. The session stores it in its record for
	// the next runtime's [BuildInput].
	UntrimmedEventBytes() int64
	// Ended is called just before a Close that ends the session for good
	// (DELETE, expiry) rather than passivating it.
	Ended()
	// Close releases the runtime. It is called at most once, after the
	// session stopped counting the runtime as initialized; ctx bounds it.
	Close(ctx context.Context) error
}

// Directory is the execution directory (directory.Store): the runtime publishes
// pauses; the session drops those lost with a disposed runtime.
type Directory interface {
	DeleteExecutions(ctx context.Context, execIDs ...string) error
}

// Builder builds runtimes (a cold build: on first use and after every
// passivation).
type Builder interface {
	Build(ctx context.Context, in BuildInput) (Runtime, error)
}

// BuilderFunc adapts a function to [Builder].
type BuilderFunc func(ctx context.Context, in BuildInput) (Runtime, error)

// Build implements [Builder].
func (f BuilderFunc) Build(ctx context.Context, in BuildInput) (Runtime, error) { return f(ctx, in) }

// BuildInput is what a runtime is built from.
type BuildInput struct {
	// SessionID is the session's id.
	SessionID string
	// Grain is the session grain's store key and Epoch reports the
	// activation's ownership epoch: durable executions fence their journal
	// writes with them. (A function: a session created by its initialize
	// exchange takes ownership only once the handshake is done.)
	Grain string
	Epoch func() uint64
	// Principal owns the session.
	Principal *pb.Principal
	// State is the runtime state stored in the session record.
	State []byte
	// Leases reports the lifecycle of paused executions to the session
	// (safe to call from any goroutine).
	Leases LeaseHooks
	// StateChanged stores new runtime state in the session record, so the
	// next build restores from it, and returns once it is stored (for the
	// first state of a new session: once the session is created). Safe to
	// call from any goroutine; after the runtime was closed it fails.
	StateChanged func(state []byte) error
	// AppState is the application's saved state values by name (the SDK's
	// mcpgrain.State), from the record. The runtime must not modify them.
	AppState map[string]*pb.AppState
	// AppStateChanged stores the application state value name in the
	// session record, fenced by the owner's epoch like the runtime state,
	// and returns once it is stored. A refused (runtime closed, session
	// not created yet or ended), fenced or failed save stores nothing and
	// returns an error. Safe to call from any goroutine.
	AppStateChanged func(name string, s *pb.AppState) error
	// UntrimmedEventBytes is what the session's earlier runtimes stored in
	// its event log since it was last trimmed (from the record; see
	// [Runtime.UntrimmedEventBytes]).
	UntrimmedEventBytes int64
	// Schedules stores the session's durable schedules (the SDK's
	// ScheduleAt; safe to call from any goroutine; after the runtime was
	// closed it fails).
	Schedules app.Scheduler
	// Deadlines names the session's reminder of a durable pause's
	// deadline (Deadlines + the pause's id): a runtime whose pause
	// journal carries the grain's reminders (engine.StoreJournal's
	// Deadlines) sets it with the write that publishes the pause and
	// cancels it with the one that settles it, and reports each such
	// write, once committed, to DeadlinesStored (safe to call from any
	// goroutine), before the pause's and the settle's lease hooks. The
	// session then writes neither. A runtime that ignores both leaves
	// the session to write them, as before.
	Deadlines       string
	DeadlinesStored func(set []store.Reminder, cancelled []string)
}

// DeadlineLeases is implemented by the lease hooks (BuildInput.Leases)
// of a session that takes its pauses' deadline reminders from the
// journal: DeadlineReminders returns BuildInput.Deadlines and
// DeadlinesStored, for a runtime that makes its journal after Build
// returned (keeping the hooks it keeps anyway, not both values too).
type DeadlineLeases interface {
	LeaseHooks
	DeadlineReminders() (name string, stored func(set []store.Reminder, cancelled []string))
}

// ScheduleRunner is implemented by a runtime that runs the SDK's schedule
// callbacks: the session calls RunSchedule, outside its turn, when a
// schedule is due (the runtime built first if the session hibernated). A
// nil error completes the schedule; an error retries it with backoff.
type ScheduleRunner interface {
	RunSchedule(ctx context.Context, c app.ScheduleCall) error
}

// PauseJournal is implemented by a runtime whose pauses can be journaled
// while a handler waits for one in memory (the SDK's Ask, docs/sdk.md §4):
// such a pause pins the runtime (it is not a DurablePause), yet it
// survives the runtime's disposal — a fresh runtime restores it from its
// journal — so its approval reminder and directory row stay when the
// runtime is disposed (a decision taken meanwhile reaches the restored
// pause instead of finding nothing).
type PauseJournal interface {
	// JournaledPause reports whether paused execution execID is journaled.
	JournaledPause(execID string) bool
}

// LeaseHooks are executor's PausedExecutionHooks: the runtime reports
// paused executions so the session keeps itself resident for the approval
// window and auto-declines when it lapses. Safe to call from any goroutine;
// calls after the runtime was closed are ignored.
type LeaseHooks interface {
	// Paused: execution execID waits for approval until deadline. The
	// session takes a lease (keeps the runtime resident) and arms the
	// durable reminder approval:<execID> at the deadline.
	Paused(execID string, deadline time.Time)
	// Resuming: a decision arrived and the execution resumes; the deadline
	// no longer applies.
	Resuming(execID, action string)
	// Settled: the execution finished; the lease and its reminder go.
	Settled(execID string)
}
