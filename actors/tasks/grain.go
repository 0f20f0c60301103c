package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime"
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// The reminders of a task grain: the lease, held while its work runs, and
// the expiry at the task's TTL.
const (
	reminderLease  = "lease"
	reminderExpire = "expire"
)

// lostMessage is the status message of a task whose work was lost.
const lostMessage = "the node running this task was lost (or its grain stopped) before the work finished; the work did not complete"

// taskGrain is one activation of a task grain. Its task is loaded at
// activation; only this activation writes it (fenced by its epoch).
type taskGrain struct {
	h    *Host
	id   string
	task *taskstore.Task // nil: no such task
	// cancel stops the work this activation runs (nil: none runs).
	cancel context.CancelFunc
	// round numbers the runs, so a late outcome of a cancelled run is
	// dropped.
	round int
	// code runs code mode's tools for this task (nil until needed).
	code *codeRunner
	// calls is the task's durable call (SDK Step and Ask; nil until
	// needed, or without Config.Calls).
	calls *mcpruntime.GrainCalls
	// finished receives the outcome of the latest run too.
	finished <-chan done
	// leaseDue is when this activation made the lease reminder due, for
	// the lease of a run that drains in another activation.
	leaseDue time.Time
	// created is the span of the task's creation, when this activation
	// created it (its runs link to it; trace.go).
	created trace.SpanContext
}

// done is a run's outcome, sent to the grain by the run's goroutine.
type done struct {
	round int
	out   outcome
}

func (t *taskGrain) Activate(ctx context.Context, _ grain.Context, _ []byte) error {
	task, err := t.h.cfg.Store.GetTask(ctx, t.id, t.h.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	t.task = &task
	return nil
}

func (t *taskGrain) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *pb.TaskStart:
		return t.start(ctx, g, m)
	case *pb.HttpExchange:
		t.recover(ctx, g)
		return t.serve(ctx, g, m)
	case *pb.ExecutionDecide:
		t.recover(ctx, g)
		return t.decide(ctx, g, m)
	case *pb.ReminderFired:
		return &pb.ReminderAck{}, t.OnReminder(ctx, g, m)
	default:
		return nil, grain.Reject("tasks: unsupported request %T", msg)
	}
}

// start creates the task durably and starts its work; a repeated start
// (a retried request) answers with the task as it is.
func (t *taskGrain) start(ctx context.Context, g grain.Context, m *pb.TaskStart) (proto.Message, error) {
	if t.task != nil {
		return startedReply(*t.task)
	}
	if err := g.Own(ctx); err != nil {
		return nil, err
	}
	now := t.h.cfg.Now()
	var params struct {
		RequestState string `json:"requestState"`
	}
	_ = json.Unmarshal(m.GetParams(), &params)
	task := taskstore.Task{
		ID: t.id, User: m.GetPrincipal().GetUser(), Org: m.GetPrincipal().GetOrg(), Role: m.GetPrincipal().GetRole(), Status: string(Working),
		Params: string(m.GetParams()), RequestState: params.RequestState, Attempts: 1,
		TTL: t.h.cfg.TTL, PollInterval: t.h.cfg.PollInterval, Created: now, Updated: now, Expires: now.Add(t.h.cfg.TTL),
	}
	// The reminders first: a node lost between the two writes leaves
	// reminders that find no task, never a working task without a lease,
	// nor a task that outlives its TTL.
	if err := g.SetReminders(ctx,
		store.Reminder{Name: reminderLease, DueAt: now.Add(t.h.cfg.Lease), Period: t.h.cfg.Lease},
		store.Reminder{Name: reminderExpire, DueAt: task.Expires}); err != nil {
		return nil, err
	}
	if err := t.h.cfg.Store.PutTask(ctx, grain.Key(g.Kind(), g.Identity()), g.Epoch(), task); err != nil {
		return nil, err
	}
	t.task = &task
	t.h.metrics.created.Inc()
	t.created = trace.SpanContextFromContext(ctx)
	t.launch(ctx, g, inputResponsesOf(m.GetParams()))
	return startedReply(task)
}

// inputResponsesOf is the inputResponses of tools/call params (the round
// that created the task may bring some).
func inputResponsesOf(params []byte) json.RawMessage {
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(params, &p)
	return p.InputResponses
}

func startedReply(task taskstore.Task) (proto.Message, error) {
	b, err := json.Marshal(created(task))
	if err != nil {
		return nil, err
	}
	return &pb.TaskStarted{Result: b}, nil
}

// roundPrincipal is the principal a round of task runs as, wherever it
// runs (a re-run after a node loss included): the task's owner — its user
// and organization, whose work it is and who alone may resume it — with
// the authority of whoever gave the round's input: the role of the
// principal whose input responses it carries (a decision on a paused
// execution is its decider's, checked when it was given), or the
// creator's role for a round that carries none of those (the first).
func roundPrincipal(task taskstore.Task) *pb.Principal {
	role := task.Role
	if task.InputResponses != "" {
		role = task.ResponderRole
	}
	return &pb.Principal{User: task.User, Org: task.Org, Role: role}
}

// launch runs the task's tool in a goroutine of its own; the outcome
// comes back to the grain as a local message.
func (t *taskGrain) launch(launcher context.Context, g grain.Context, responses json.RawMessage) {
	t.round++
	round, task := t.round, *t.task
	ctx, cancel := context.WithCancel(context.Background())
	var span trace.Span
	if tracing.On() {
		var sctx context.Context
		sctx, span = startRun(launcher, t.created, round, task.Attempts, toolOf(task.Params))
		ctx = trace.ContextWithSpan(ctx, trace.SpanFromContext(sctx))
	}
	t.cancel = cancel
	system, self := g.ActorSystem(), g.Self()
	p := roundPrincipal(task)
	r := t.h.runner
	if t.h.cfg.CodeMode != nil && isCodeTool(task.Params) {
		if t.code == nil {
			t.code = newCodeRunner(t.h, g)
		}
		r = t.code.runner
	} else if _, err := t.callsOf(g); err != nil {
		g.Logger().Warn("tasks: bind the task's durable call", "task", t.id, "err", err) // Step and Ask: ErrNoCall
	}
	finished := make(chan done, 1) // for a deactivation that waits (see Deactivate)
	t.finished = finished
	go func() {
		d := done{round: round, out: r.run(ctx, p, task.ID, json.RawMessage(task.Params), responses, task.RequestState)}
		if span != nil {
			endRun(span, d.out)
		}
		finished <- d
		system.Root.Send(self, d)
	}()
}

// HandleLocal applies a run's outcome, and the reminders the pending
// questions of its runs arm (mcpruntime.GrainAlarms).
func (t *taskGrain) HandleLocal(ctx context.Context, g grain.Context, msg any) {
	if mcpruntime.ApplyAlarm(ctx, g, msg) {
		return
	}
	d, ok := msg.(done)
	if !ok || d.round != t.round || t.task == nil {
		return // the outcome of a run that was cancelled
	}
	t.cancel = nil
	next := *t.task
	var e Event
	switch {
	case d.out.err != nil:
		e = Fail
		b, _ := json.Marshal(d.out.err)
		next.Error, next.StatusMessage = string(b), d.out.err.Message
	case len(d.out.inputRequests) > 0:
		e = NeedInput
		next.InputRequests, next.InputResponses, next.RequestState = string(d.out.inputRequests), "", d.out.requestState
		next.ResponderRole = ""
	default:
		e = Finish
		next.Result = string(d.out.result)
	}
	err := t.transition(ctx, g, next, e, outageBound)
	if err == nil && e == NeedInput {
		err = t.awaitDecision(ctx, g)
	}
	switch {
	case errors.Is(err, taskstore.ErrTaskChanged):
		// Another activation cancelled the task, or found the work lost
		// and started its next attempt, before this run ended.
		g.Logger().Info("tasks: the outcome of a run came after the task moved on; dropped", "task", t.id, "err", err)
		t.refresh(ctx)
	case err != nil:
		g.Logger().Warn("tasks: record the outcome of a run", "task", t.id, "err", err)
	}
}

// transition moves the task by e to next's content and records it (see
// write; ride: how long the write rides out a store outage): the lease
// reminder is dropped once no work runs.
func (t *taskGrain) transition(ctx context.Context, g grain.Context, next taskstore.Task, e Event, ride time.Duration) error {
	to, changed, err := Step(Status(t.task.Status), e)
	if err != nil || !changed {
		return err
	}
	next.Status = string(to)
	if to == Working {
		next.Attempts++
	}
	if err := t.write(ctx, g, next, ride); err != nil {
		return err
	}
	if to.Terminal() {
		t.h.metrics.settled.WithLabelValues(string(to)).Inc()
	}
	if to != Working {
		err = g.CancelReminders(ctx, reminderLease)
	} else {
		err = g.SetReminder(ctx, reminderLease, t.task.Updated.Add(t.h.cfg.Lease), t.h.cfg.Lease)
	}
	if errors.Is(err, store.ErrFenced) {
		// A draining activation recorded its run's outcome after the grain
		// moved: the new activation's lease reminder finds the task
		// settled and drops itself.
		return nil
	}
	return err
}

// outageBound is how long the outcome of a run waits for a store that is
// unavailable (a database restart) before it is given up: a node that did
// not die must not lose its work to a short outage.
const outageBound = 15 * time.Second

// write records next (at the current time, without a lease) and makes it
// the task in memory. A working task is swapped by its status and attempt
// (taskstore.Store.SwapTask), not fenced by the grain's epoch: the outcome of
// a run lands even after the grain moved to another node, unless the task
// was cancelled or its next attempt started first. Any other write is
// fenced by the epoch. With ride > 0, the write rides out a store outage
// that long.
func (t *taskGrain) write(ctx context.Context, g grain.Context, next taskstore.Task, ride time.Duration) error {
	next.Updated, next.LeaseUntil = t.h.cfg.Now(), time.Time{}
	from, attempts := t.task.Status, t.task.Attempts
	key, epoch := grain.Key(g.Kind(), g.Identity()), g.Epoch()
	once := func(ctx context.Context) error {
		if Status(from) == Working {
			return t.h.cfg.Store.SwapTask(ctx, from, attempts, next)
		}
		return t.h.cfg.Store.PutTask(ctx, key, epoch, next)
	}
	err := once(ctx)
	if ride > 0 && store.Unavailable(err) {
		err = t.rideOut(ctx, next, ride, once)
	}
	if err != nil {
		return fmt.Errorf("tasks: record task %s (%s): %w", t.id, next.Status, err)
	}
	t.task = &next
	return nil
}

// rideOut retries a write that failed because the store was unavailable,
// for ride at most. A swap that finds the task changed may be its own
// earlier attempt, applied although its answer was lost: the task as
// stored says.
func (t *taskGrain) rideOut(ctx context.Context, next taskstore.Task, ride time.Duration, once func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, ride)
	defer cancel()
	err := store.ThroughOutage(ctx, func() error { return once(ctx) })
	if !errors.Is(err, taskstore.ErrTaskChanged) {
		return err
	}
	if got, gerr := t.h.cfg.Store.GetTask(ctx, t.id, t.h.cfg.Now()); gerr == nil &&
		got.Status == next.Status && got.Attempts == next.Attempts && got.Updated.Equal(next.Updated.Truncate(time.Millisecond)) {
		return nil
	}
	return err
}

// recover handles a task whose work this activation does not run although
// it is working. It reads the task again first: the activation that ran
// the work may have recorded its outcome meanwhile. While that activation
// is stopping and its lease holds the run (see claim), the task is left to
// it; the lease reminder is made due when the lease ends. Once no lease
// holds it (the lease ran out, or the node died and took none), the work
// is lost: a tool that says re-running it is safe (read-only or
// idempotent) runs again, a few times at most; any other task ends
// failed. A task never stays working without work.
func (t *taskGrain) recover(ctx context.Context, g grain.Context) {
	t.refresh(ctx)
	if t.task == nil {
		return
	}
	switch handover(Status(t.task.Status), t.cancel != nil, t.task.LeaseUntil, t.h.cfg.Now()) {
	case Idle:
		return
	case Draining:
		t.awaitLease(ctx, g)
		return
	}
	safe := t.h.runner.restartable(toolOf(t.task.Params)) || t.journaled(ctx, g)
	if afterLoss(t.task.Attempts, safe) == Rerun {
		t.h.metrics.lost.WithLabelValues("rerun").Inc()
		if err := t.rerun(ctx, g); err != nil {
			g.Logger().Warn("tasks: resume a lost task", "task", t.id, "err", err)
		}
		return
	}
	t.h.metrics.lost.WithLabelValues("failed").Inc()
	next := *t.task
	b, _ := json.Marshal(&rpcError{Code: jsonrpc.CodeInternalError, Message: lostMessage})
	next.Error, next.StatusMessage = string(b), lostMessage
	if err := t.transition(ctx, g, next, Fail, 0); err != nil {
		g.Logger().Warn("tasks: fail a lost task", "task", t.id, "err", err)
	}
}

// refresh reads the task again if it is working and its work does not run
// here: another activation (draining) may record the run's outcome.
func (t *taskGrain) refresh(ctx context.Context) {
	if t.task == nil || Status(t.task.Status) != Working || t.cancel != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, outageBound)
	defer cancel()
	task, err := t.h.cfg.Store.GetTask(ctx, t.id, t.h.cfg.Now())
	if err != nil {
		// Expired (the expire reminder ends it), or the store is not
		// answering: the task as last read.
		t.h.cfg.Logger.Debug("tasks: read a task again", "task", t.id, "err", err)
		return
	}
	t.task = &task
}

// awaitLease makes the lease reminder due when the lease of a run that
// drains in another activation ends, so that the task is decided then
// even if nobody asks.
func (t *taskGrain) awaitLease(ctx context.Context, g grain.Context) {
	until := t.task.LeaseUntil
	if until.Equal(t.leaseDue) {
		return
	}
	if err := g.SetReminder(ctx, reminderLease, until, t.h.cfg.Lease); err != nil {
		g.Logger().Warn("tasks: wait for the lease of a draining run", "task", t.id, "err", err)
		return
	}
	t.leaseDue = until
}

// rerun starts a lost task's current round again.
func (t *taskGrain) rerun(ctx context.Context, g grain.Context) error {
	next := *t.task
	next.Attempts++
	next.StatusMessage = fmt.Sprintf("resumed after its work was lost (run %d)", next.Attempts)
	if err := g.SetReminder(ctx, reminderLease, t.h.cfg.Now().Add(t.h.cfg.Lease), t.h.cfg.Lease); err != nil {
		return err
	}
	if err := t.write(ctx, g, next, 0); err != nil {
		return err
	}
	responses := json.RawMessage(t.task.InputResponses)
	if len(responses) == 0 {
		responses = inputResponsesOf([]byte(t.task.Params))
	}
	t.launch(ctx, g, responses)
	return nil
}

// OnReminder handles the lease (it ends a lost task, and is dropped once
// no work runs), the expiry, the approval window of the task's Ask and
// those of its pending questions.
func (t *taskGrain) OnReminder(ctx context.Context, g grain.Context, fired *pb.ReminderFired) error {
	if _, ok := mcpruntime.LaterReminderOf(fired.GetName()); ok {
		return t.onLaterReminder(ctx, g, fired)
	}
	switch fired.GetName() {
	case reminderExpire:
		return t.expire(ctx, g)
	case reminderApproval:
		return t.awaitDecision(ctx, g)
	case reminderLease:
	default:
		return g.CancelReminders(ctx, fired.GetName())
	}
	t.leaseDue = time.Time{} // fired: made due again if a lease still holds
	t.recover(ctx, g)
	if t.task == nil || Status(t.task.Status) != Working {
		return g.CancelReminders(ctx, reminderLease)
	}
	return nil
}

// expire ends a task at its TTL: its work stops, its undecided questions
// leave the approval surfaces (withdrawAll), and its grain is deleted (its
// ownership row and reminders; the task's row is "not found" from now on
// and pruned with the store's other expired rows).
func (t *taskGrain) expire(ctx context.Context, g grain.Context) error {
	if t.task != nil && t.h.cfg.Now().Before(t.task.Expires) {
		return g.SetReminder(ctx, reminderExpire, t.task.Expires, 0) // fired early (a clock step): again at the TTL
	}
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
		t.round++
	}
	if err := t.withdrawAll(ctx, g); err != nil {
		return err // the expiry fires again
	}
	return g.Delete(ctx)
}

// drainWork bounds how long a graceful deactivation (node stop, rebalance)
// waits for the work running in it to finish.
const drainWork = 5 * time.Second

// leaseGrace is how much longer than the drain a stopping activation's
// lease lasts: time for the drained run's outcome to be written.
const leaseGrace = 5 * time.Second

func (t *taskGrain) Deactivate(ctx context.Context, g grain.Context, reason grain.Reason) {
	if t.cancel != nil && reason != grain.ReasonOwnershipLost && t.claim(ctx) {
		// Let work that is about to end record its outcome rather than
		// be lost (and re-run, or failed, by the next activation, which
		// leaves the task to this run while the lease holds).
		timer := time.NewTimer(drainWork)
		select {
		case d := <-t.finished:
			t.HandleLocal(ctx, g, d)
		case <-timer.C:
		}
		timer.Stop()
	}
	if t.cancel != nil {
		// The task stays working in the store: the next activation (a
		// tasks/* request, or the lease reminder) re-runs or fails it (see
		// recover) — at once, since the lease is given back.
		t.cancel()
		t.unclaim(ctx)
	}
	if t.code != nil {
		t.code.close()
	}
	t.dropCalls()
}

// claim takes the lease on the task's running work for a drain: the
// grain's next activation, on its new owner, leaves the task to this run
// until the lease ends (see recover). It reports whether the run may go
// on: not if the task moved on already (a new activation that found the
// work lost before the lease was taken settled the task, or started its
// next attempt). A store that does not answer takes no lease, and the
// run goes on: its outcome may still land.
func (t *taskGrain) claim(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, drainWork)
	defer cancel()
	next := *t.task
	next.LeaseUntil = t.h.cfg.Now().Add(drainWork + leaseGrace)
	err := t.h.cfg.Store.SwapTask(ctx, string(Working), next.Attempts, next)
	if errors.Is(err, taskstore.ErrTaskChanged) {
		t.h.cfg.Logger.Info("tasks: a stopping activation found its task moved on; its run stops", "task", t.id)
		return false
	}
	if err != nil {
		t.h.cfg.Logger.Warn("tasks: take the lease of a draining run", "task", t.id, "err", err)
		return true
	}
	t.task = &next
	return true
}

// unclaim gives the lease of a run that was cut back, so that the next
// activation decides about the task at once.
func (t *taskGrain) unclaim(ctx context.Context) {
	if t.task == nil || t.task.LeaseUntil.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, drainWork)
	defer cancel()
	next := *t.task
	next.LeaseUntil = time.Time{}
	if err := t.h.cfg.Store.SwapTask(ctx, string(Working), next.Attempts, next); err != nil {
		t.h.cfg.Logger.Debug("tasks: give back the lease of a cut run", "task", t.id, "err", err)
	}
}
