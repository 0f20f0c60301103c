package tasks

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// job is a tool that is not safe to re-run (no annotations): each run
// waits for release and counts itself.
type job struct {
	runs    atomic.Int32
	started chan struct{}
	release chan struct{}
}

func newJob() *job { return &job{started: make(chan struct{}, 8), release: make(chan struct{})} }

func (j *job) server(*mcp.ServerOptions, func(*mcp.Server)) (*mcp.Server, func(), error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "handover-test", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "job"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		n := j.runs.Add(1)
		j.started <- struct{}{}
		select {
		case <-j.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done by run " + strconv.Itoa(int(n))}}}, nil, nil
	})
	return srv, func() {}, nil
}

// hookStore is a store whose task writes can fail (an outage) and whose
// swaps can be watched.
type hookStore struct {
	store.Store
	tasks *taskstore.Store
	mu    sync.Mutex
	fail  int   // the next fail task writes fail with err
	err   error // what they fail with
	swaps chan taskstore.Task
}

// failing reports whether this write fails (and counts it).
func (s *hookStore) failing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail == 0 {
		return false
	}
	s.fail--
	return true
}

func (s *hookStore) PutTask(ctx context.Context, grain string, epoch uint64, t taskstore.Task) error {
	if s.failing() {
		return s.err
	}
	return s.tasks.PutTask(ctx, grain, epoch, t)
}

func (s *hookStore) SwapTask(ctx context.Context, status string, attempts int, t taskstore.Task) error {
	if s.failing() {
		return s.err
	}
	err := s.tasks.SwapTask(ctx, status, attempts, t)
	if err == nil && s.swaps != nil {
		s.swaps <- t
	}
	return err
}

func (s *hookStore) GetTask(ctx context.Context, taskID string, now time.Time) (taskstore.Task, error) {
	return s.tasks.GetTask(ctx, taskID, now)
}

// fakeGrain is the grain.Context of one activation of a task grain: its
// epoch is taken in the store, its reminders are fenced by it, and the
// outcomes of its runs arrive on done.
// noCluster is the Config.Cluster of hosts whose tests start no task
// through the middleware (a request would panic).
var noCluster grain.Requester = struct{ grain.Requester }{}

type fakeGrain struct {
	grain.Context // unused methods panic
	st            store.Store
	id            string
	epoch         uint64
	system        *actor.ActorSystem
	self          *actor.PID
	done          chan done
	// local receives the activation's other local messages (the reminders
	// its pending questions arm), for the test to hand to HandleLocal.
	local chan any
	mu    sync.Mutex
	due   map[string]time.Time // the reminders set, by name
	// deleted: Delete was called.
	deleted bool
}

func activate(t *testing.T, st store.Store, system *actor.ActorSystem, id, node string) *fakeGrain {
	t.Helper()
	own, err := st.Acquire(context.Background(), grain.Key(KindName, id), node)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGrain{st: st, id: id, epoch: own.Epoch, system: system, done: make(chan done, 4), local: make(chan any, 16), due: map[string]time.Time{}}
	g.self = system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case done:
			g.done <- m
		case actor.SystemMessage, actor.AutoReceiveMessage:
		default:
			select {
			case g.local <- m:
			default:
			}
		}
	}))
	return g
}

func (g *fakeGrain) Kind() string                    { return KindName }
func (g *fakeGrain) Identity() string                { return g.id }
func (g *fakeGrain) Node() string                    { return "test" }
func (g *fakeGrain) Epoch() uint64                   { return g.epoch }
func (g *fakeGrain) Own(context.Context) error       { return nil }
func (g *fakeGrain) Self() *actor.PID                { return g.self }
func (g *fakeGrain) ActorSystem() *actor.ActorSystem { return g.system }
func (g *fakeGrain) Logger() *slog.Logger            { return slog.Default() }

func (g *fakeGrain) owns(ctx context.Context) error {
	o, err := g.st.Load(ctx, grain.Key(KindName, g.id))
	if err != nil {
		return err
	}
	if o.Epoch != g.epoch {
		return store.ErrFenced
	}
	return nil
}

func (g *fakeGrain) SetReminder(ctx context.Context, name string, due time.Time, _ time.Duration) error {
	if err := g.owns(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.due[name] = due
	return nil
}
func (g *fakeGrain) SetReminders(ctx context.Context, _ ...store.Reminder) error { return g.owns(ctx) }
func (g *fakeGrain) CancelReminders(ctx context.Context, names ...string) error {
	if err := g.owns(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range names {
		delete(g.due, n)
	}
	return nil
}

func (g *fakeGrain) Delete(ctx context.Context) error {
	if err := g.owns(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.due, g.deleted = map[string]time.Time{}, true
	return nil
}

// dueAt is when reminder name is due (ok false: none is set).
func (g *fakeGrain) dueAt(name string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d, ok := g.due[name]
	return d, ok
}

// harness is a host on a SQLite store, with a fake clock and a job tool.
type harness struct {
	h      *Host
	st     *hookStore
	clk    *clock.Fake
	job    *job
	system *actor.ActorSystem
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hs := &harness{st: &hookStore{Store: st, tasks: taskstore.New(st)}, clk: clock.NewFake(time.Now()), job: newJob(), system: actor.NewActorSystem()}
	t.Cleanup(hs.system.Shutdown)
	hs.h, err = NewHost(Config{NewServer: hs.job.server, Store: hs.st, Cluster: noCluster, Now: hs.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.h.Close)
	return hs
}

// start creates task id on a new activation, whose run of job begins.
func (hs *harness) start(t *testing.T, id string) (*taskGrain, *fakeGrain) {
	t.Helper()
	g := activate(t, hs.st, hs.system, id, "n1")
	a := &taskGrain{h: hs.h, id: id}
	if err := a.Activate(context.Background(), g, nil); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]any{"name": "job", "arguments": map[string]any{}})
	if _, err := a.start(context.Background(), g, &pb.TaskStart{Params: params, Principal: &pb.Principal{User: "u", Org: "o"}}); err != nil {
		t.Fatal(err)
	}
	<-hs.job.started
	return a, g
}

func (hs *harness) stored(t *testing.T, id string) taskstore.Task {
	t.Helper()
	task, err := hs.st.GetTask(context.Background(), id, hs.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// A graceful stop hands the task grain over while its run drains: the
// new activation, asked about the task, leaves it to the draining run
// (no second run, no "lost"), and the old run's outcome is recorded
// although the grain moved (chaos: "a handover re-runs work the old
// owner finished").
func TestHandoverLeavesTheTaskToTheDrainingRun(t *testing.T) {
	hs := newHarness(t)
	hs.st.swaps = make(chan taskstore.Task, 4)
	old, og := hs.start(t, "t1")

	stopped := make(chan struct{})
	go func() {
		old.Deactivate(context.Background(), og, grain.ReasonShutdown)
		close(stopped)
	}()
	if claim := <-hs.st.swaps; claim.LeaseUntil.IsZero() {
		t.Fatalf("the draining activation wrote %+v, want its lease", claim)
	}

	// The new owner takes the grain (a new epoch) and is asked.
	ng := activate(t, hs.st, hs.system, "t1", "n2")
	next := &taskGrain{h: hs.h, id: "t1"}
	if err := next.Activate(context.Background(), ng, nil); err != nil {
		t.Fatal(err)
	}
	next.recover(context.Background(), ng)
	if next.cancel != nil || next.task.Status != string(Working) || next.task.Attempts != 1 {
		t.Fatalf("new activation during the drain: %+v (runs here: %v), want working in attempt 1, left to the drain", next.task, next.cancel != nil)
	}

	close(hs.job.release)
	<-stopped
	next.recover(context.Background(), ng)
	if next.task.Status != string(Completed) || next.task.Attempts != 1 || next.cancel != nil {
		t.Fatalf("after the drain: %+v, want completed by attempt 1", next.task)
	}
	if got := hs.stored(t, "t1"); got.Status != string(Completed) || got.Result == "" || !got.LeaseUntil.IsZero() {
		t.Fatalf("stored after the drain: %+v, want the old run's result, no lease", got)
	}
	if n := hs.job.runs.Load(); n != 1 {
		t.Fatalf("the job ran %d times, want once", n)
	}
}

// Once the lease of a draining run ends without its outcome, the work is
// lost: the task is decided (here: failed, the job is not safe to re-run)
// and the late outcome of the old run is dropped.
func TestHandoverDecidesOnceTheLeaseEnds(t *testing.T) {
	hs := newHarness(t)
	old, og := hs.start(t, "t2")
	// The old activation took its lease and is still draining.
	if !old.claim(context.Background()) {
		t.Fatal("claim refused")
	}
	ng := activate(t, hs.st, hs.system, "t2", "n2")
	next := &taskGrain{h: hs.h, id: "t2"}
	if err := next.Activate(context.Background(), ng, nil); err != nil {
		t.Fatal(err)
	}
	next.recover(context.Background(), ng)
	if next.task.Status != string(Working) {
		t.Fatalf("before the lease ends: %s, want working", next.task.Status)
	}
	hs.clk.Advance(drainWork + leaseGrace)
	if err := next.OnReminder(context.Background(), ng, &pb.ReminderFired{Name: reminderLease}); err != nil {
		t.Fatal(err)
	}
	if next.task.Status != string(Failed) {
		t.Fatalf("after the lease: %s, want failed (lost)", next.task.Status)
	}
	close(hs.job.release)
	old.HandleLocal(context.Background(), og, <-og.done)
	if got := hs.stored(t, "t2"); got.Status != string(Failed) || got.Result != "" {
		t.Fatalf("stored: %+v, want failed, the late outcome dropped", got)
	}
}

// The outcome of a run rides out a store outage (a database restart)
// rather than being lost with no node lost (chaos: "a store outage when a
// run ends").
func TestRunOutcomeRidesOutAStoreOutage(t *testing.T) {
	hs := newHarness(t)
	a, g := hs.start(t, "t3")
	hs.st.mu.Lock()
	hs.st.fail, hs.st.err = 3, driver.ErrBadConn
	hs.st.mu.Unlock()
	close(hs.job.release)
	a.HandleLocal(context.Background(), g, <-g.done)
	if got := hs.stored(t, "t3"); got.Status != string(Completed) || got.Attempts != 1 {
		t.Fatalf("stored after the outage: %+v, want completed in attempt 1", got)
	}
	if a.task.Status != string(Completed) {
		t.Fatalf("in memory: %s, want completed", a.task.Status)
	}
}

// A swap whose answer was lost in the outage, though it was applied, is
// not taken for a task that moved on.
func TestRideOutRecognisesItsOwnAppliedWrite(t *testing.T) {
	hs := newHarness(t)
	a, g := hs.start(t, "t4")
	lost := &lostAnswer{hookStore: hs.st}
	hs.h.cfg.Store = lost
	close(hs.job.release)
	a.HandleLocal(context.Background(), g, <-g.done)
	if a.task.Status != string(Completed) || lost.calls < 2 {
		t.Fatalf("in memory: %s after %d swaps, want completed after a retry", a.task.Status, lost.calls)
	}
}

// lostAnswer applies the first swap but answers it as a dropped
// connection.
type lostAnswer struct {
	*hookStore
	calls int
}

func (s *lostAnswer) SwapTask(ctx context.Context, status string, attempts int, t taskstore.Task) error {
	s.calls++
	err := s.hookStore.SwapTask(ctx, status, attempts, t)
	if s.calls == 1 && err == nil {
		return driver.ErrBadConn
	}
	return err
}
