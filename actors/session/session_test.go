package session_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

var (
	t0    = time.UnixMilli(2_000_000_000_000)
	alice = &pb.Principal{User: "alice", Org: "acme", Role: "admin"}
	bob   = &pb.Principal{User: "bob", Org: "acme", Role: "member"}
)

// fakeRuntime stands in for the MCP runtime: counts are set by the test.
type fakeRuntime struct {
	id                       string
	streams, paused, running atomic.Int32
	closes                   atomic.Int32
	runningAsks              atomic.Int32  // RunningExecutions calls that found an execution running
	runningAtClose           atomic.Int32  // running executions when Close was called
	closeGate                chan struct{} // if set, Close blocks until it is closed
	closing                  chan struct{} // closed when Close starts
	hooks                    session.LeaseHooks
	mu                       sync.Mutex
	resolved                 map[string]*pb.ApprovalDecision
	durable                  map[string]bool    // durable pauses (restored at build from env.restored)
	resumeStarted            chan string        // if set, told when a forwarded resume starts
	resumeGate               chan struct{}      // if set, a forwarded resume waits for it
	builtUntrimmed           int64              // BuildInput.UntrimmedEventBytes
	untrimmed                atomic.Int64       // what UntrimmedEventBytes reports
	in                       session.BuildInput // what it was built from
	inBand                   map[string]bool    // pauses its client may decide in band (session.InBandPauses)
}

// ClientMayDecide implements session.InBandPauses: the pauses marked in
// inBand (none unless a test marks one).
func (r *fakeRuntime) ClientMayDecide(execID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inBand[execID]
}

func (r *fakeRuntime) UntrimmedEventBytes() int64 { return r.untrimmed.Load() }

// ServeExchange implements session.Runtime: the fake serves no MCP (its
// tests send no exchanges).
func (r *fakeRuntime) ServeExchange(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "fake runtime", http.StatusNotImplemented)
}

// Ended implements session.Runtime.
func (r *fakeRuntime) Ended() {}

// ResumeForModel implements session.Runtime: the resumed code "runs"
// until resumeGate is closed.
func (r *fakeRuntime) ResumeForModel(_ context.Context, id string, _ *pb.ExecutionResumeForModel) (string, pb.ExecutionReply_Status) {
	r.mu.Lock()
	started, gate := r.resumeStarted, r.resumeGate
	r.mu.Unlock()
	if started != nil {
		started <- id
	}
	if gate != nil {
		<-gate
	}
	return `{"resumed":"` + id + `"}`, pb.ExecutionReply_STATUS_OK
}

func (r *fakeRuntime) DurablePause(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.durable[id]
}
func (r *fakeRuntime) DurablePausedExecutions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.durable)
}
func (r *fakeRuntime) PausedExecution(id string) (*pb.PausedExecution, bool) {
	if !r.DurablePause(id) {
		return nil, false
	}
	return &pb.PausedExecution{ExecutionId: id}, true
}
func (r *fakeRuntime) PausedExecutionList() []*pb.PausedExecution { return nil }

func (r *fakeRuntime) ActiveStreams() int    { return int(r.streams.Load()) }
func (r *fakeRuntime) OpenStreams() int      { return int(r.streams.Load()) }
func (r *fakeRuntime) PausedExecutions() int { return int(r.paused.Load()) }
func (r *fakeRuntime) RunningExecutions() int {
	n := r.running.Load()
	if n > 0 {
		r.runningAsks.Add(1)
	}
	return int(n)
}
func (r *fakeRuntime) Close(ctx context.Context) error {
	r.runningAtClose.Store(r.running.Load())
	r.closes.Add(1)
	close(r.closing)
	if r.closeGate != nil {
		select {
		case <-r.closeGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
func (r *fakeRuntime) ResolveApproval(id string, d *pb.ApprovalDecision) {
	r.mu.Lock()
	r.resolved[id] = d
	r.mu.Unlock()
	if r.hooks != nil {
		r.hooks.Resuming(id, d.GetAction()) // as the engine does when it hands the decision over
	}
}

type env struct {
	t         *testing.T
	clk       *clock.Fake
	node      *cluster.Node
	host      *session.Host
	st        store.Store
	reg       *prometheus.Registry
	mu        sync.Mutex
	builds    map[string][]*fakeRuntime
	gate      map[string]chan struct{} // build gates by session id
	fail      map[string]bool          // builds of these sessions fail
	closeGate chan struct{}
	restored  map[string][]string // durable pauses a new runtime of a session restores
}

func logger() *slog.Logger {
	if os.Getenv("MCPGRAIN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEnv(t *testing.T, softCap int, policy alarm.Policy) *env {
	t.Helper()
	return newEnvWith(t, softCap, policy, nil)
}

// newEnvMemory is newEnv with residency sized by memory.
func newEnvMemory(t *testing.T, softCap int, policy alarm.Policy, mem residency.Memory) *env {
	t.Helper()
	return newEnvWith(t, softCap, policy, func(c *session.Config) { c.Memory = mem })
}

// newEnvWith is newEnv with tweak applied to the host's configuration.
func newEnvWith(t *testing.T, softCap int, policy alarm.Policy, tweak func(*session.Config)) *env {
	t.Helper()
	e := &env{t: t, clk: clock.NewFake(t0), builds: map[string][]*fakeRuntime{}, fail: map[string]bool{}, gate: map[string]chan struct{}{}, reg: prometheus.NewRegistry(),
		restored: map[string][]string{}}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e.st = st
	cfg := session.Config{
		Builder:    session.BuilderFunc(e.build),
		Policy:     policy,
		SessionTTL: 24 * time.Hour,
		Residency:  residency.Config{SoftCap: softCap},
		Evict:      e.evict,
		Clock:      e.clk,
		Logger:     logger(),
		Registerer: e.reg,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e.host, err = session.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.node, err = cluster.Start(context.Background(), cluster.Config{
		Kinds:      []grain.Kind{e.host.Kind()},
		Store:      st,
		Logger:     logger(),
		Registerer: e.reg,
		// Every reminder is armed the moment it is registered and fires
		// when the fake clock reaches it; no scans needed.
		Reminders: cluster.ReminderOptions{Clock: e.clk, PollInterval: 24 * time.Hour, Lookahead: 365 * 24 * time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.node.Stop(ctx)
	})
	return e
}

func (e *env) build(ctx context.Context, in session.BuildInput) (session.Runtime, error) {
	e.mu.Lock()
	gate := e.gate[in.SessionID]
	e.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e.mu.Lock()
	fail := e.fail[in.SessionID]
	e.mu.Unlock()
	if fail {
		return nil, errors.New("boom")
	}
	rt := &fakeRuntime{id: in.SessionID, hooks: in.Leases, closing: make(chan struct{}), closeGate: e.closeGate, resolved: map[string]*pb.ApprovalDecision{},
		durable: map[string]bool{}, builtUntrimmed: in.UntrimmedEventBytes, in: in}
	e.mu.Lock()
	for _, id := range e.restored[in.SessionID] {
		rt.durable[id] = true
	}
	e.builds[in.SessionID] = append(e.builds[in.SessionID], rt)
	e.mu.Unlock()
	return rt, nil
}

func (e *env) evict(ctx context.Context, id string) (bool, error) {
	r, err := e.node.Request(ctx, session.KindName, id, &pb.RequestCapEviction{LinkContext: tracing.Inject(ctx)})
	if err != nil {
		return false, err
	}
	return r.(*pb.CapEvictionReply).GetEvicted(), nil
}

// rt returns the latest runtime built for id.
func (e *env) rt(id string) *fakeRuntime {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.builds[id]
	if len(b) == 0 {
		e.t.Fatalf("no runtime built for %s", id)
	}
	return b[len(b)-1]
}

func (e *env) buildCount(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.builds[id])
}

func (e *env) do(id string, msg any) any {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r any
	var err error
	switch m := msg.(type) {
	case *pb.SessionCreate:
		r, err = e.node.Request(ctx, session.KindName, id, m)
	case *pb.SessionAccess:
		r, err = e.node.Request(ctx, session.KindName, id, m)
	case *pb.SessionDelete:
		r, err = e.node.Request(ctx, session.KindName, id, m)
	case *pb.SessionInspect:
		r, err = e.node.Request(ctx, session.KindName, id, m, cluster.Idempotent())
	case *pb.RequestCapEviction, *pb.ExecutionDecide:
		r, err = e.node.Request(ctx, session.KindName, id, m.(proto.Message))
	}
	if err != nil {
		e.t.Fatalf("%T to %s: %v", msg, id, err)
	}
	return r
}

func (e *env) create(id string) *pb.SessionReply {
	e.t.Helper()
	r := e.do(id, &pb.SessionCreate{Principal: alice}).(*pb.SessionReply)
	if r.GetStatus() != pb.SessionReply_STATUS_OK {
		e.t.Fatalf("create %s: %v", id, r.GetStatus())
	}
	return r
}

func (e *env) access(id string, p *pb.Principal) *pb.SessionReply {
	e.t.Helper()
	return e.do(id, &pb.SessionAccess{Principal: p}).(*pb.SessionReply)
}

func (e *env) inspect(id string) *pb.SessionSnapshot {
	e.t.Helper()
	return e.do(id, &pb.SessionInspect{}).(*pb.SessionSnapshot)
}

// eventually waits for an asynchronous effect (a reminder delivery, an
// eviction request) that the test has no event to wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// metric sums the samples of name whose labels include want (gauges and
// counters alike).
func (e *env) metric(name string, want map[string]string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

func (e *env) disposals(reason string) float64 {
	return e.metric("mcpgrain_runtime_disposals_total", map[string]string{"reason": reason})
}

func (e *env) resident() int { return int(e.metric("mcpgrain_resident_runtimes", nil)) }

// The runtime's count of event bytes stored since its log was last
// trimmed outlives the runtime: a disposal writes it into the record, the
// next build gets it (so a session that writes a little between restores
// is still trimmed on schedule), and a count back at zero is written too.
func TestUntrimmedEventBytesCarryOverToTheNextRuntime(t *testing.T) {
	e := newEnv(t, 8, alarm.DefaultPolicy())
	e.create("s")
	record := func() *pb.SessionRecord {
		t.Helper()
		o, err := e.st.Load(context.Background(), grain.Key(session.KindName, "s"))
		if err != nil {
			t.Fatal(err)
		}
		var rec pb.SessionRecord
		if err := proto.Unmarshal(o.Record, &rec); err != nil {
			t.Fatal(err)
		}
		return &rec
	}
	for i, n := range []int64{777, 0} {
		e.rt("s").untrimmed.Store(n)
		if r := e.do("s", &pb.RequestCapEviction{}).(*pb.CapEvictionReply); !r.GetEvicted() {
			t.Fatalf("disposal %d: not evicted", i)
		}
		if got := record().GetUntrimmedEventBytes(); got != n {
			t.Fatalf("disposal %d: the record carries %d untrimmed bytes, want %d", i, got, n)
		}
		if r := e.access("s", alice); r.GetStatus() != pb.SessionReply_STATUS_OK {
			t.Fatalf("restore %d: %v", i, r.GetStatus())
		}
		if got := e.rt("s").builtUntrimmed; got != n {
			t.Fatalf("restore %d: built with %d untrimmed bytes, want %d", i, got, n)
		}
	}
}

// An application state value saved through the runtime's hook is in the
// record once the hook returns, and the next runtime is built with it; a
// hook of a disposed runtime saves nothing and fails.
func TestAppStateIsSavedWithTheRecordAndRestored(t *testing.T) {
	e := newEnv(t, 8, alarm.DefaultPolicy())
	e.create("s")
	first := e.rt("s").in
	if err := first.AppStateChanged("notes", &pb.AppState{Version: 2, Value: []byte(`["a"]`)}); err != nil {
		t.Fatal(err)
	}
	o, err := e.st.Load(context.Background(), grain.Key(session.KindName, "s"))
	if err != nil {
		t.Fatal(err)
	}
	var rec pb.SessionRecord
	if err := proto.Unmarshal(o.Record, &rec); err != nil {
		t.Fatal(err)
	}
	if v := rec.GetAppState()["notes"]; v.GetVersion() != 2 || string(v.GetValue()) != `["a"]` || rec.GetPrincipal().GetUser() == "" {
		t.Fatalf("record after the save: %v", &rec)
	}
	if r := e.do("s", &pb.RequestCapEviction{}).(*pb.CapEvictionReply); !r.GetEvicted() {
		t.Fatal("not evicted")
	}
	if err := first.AppStateChanged("notes", &pb.AppState{Version: 2, Value: []byte(`[]`)}); err == nil {
		t.Fatal("a disposed runtime's save succeeded")
	}
	if r := e.access("s", alice); r.GetStatus() != pb.SessionReply_STATUS_OK {
		t.Fatalf("restore: %v", r.GetStatus())
	}
	if v := e.rt("s").in.AppState["notes"]; string(v.GetValue()) != `["a"]` {
		t.Fatalf("the next runtime was built with %v, want the saved value", v)
	}
}

// A save by an activation that lost its ownership (another node acquired
// the grain: a newer epoch) is fenced: it fails and stores nothing.
func TestAppStateSaveIsFencedByTheEpoch(t *testing.T) {
	e := newEnv(t, 8, alarm.DefaultPolicy())
	e.create("s")
	key := grain.Key(session.KindName, "s")
	if _, err := e.st.Acquire(context.Background(), key, "another-node"); err != nil {
		t.Fatal(err)
	}
	if err := e.rt("s").in.AppStateChanged("notes", &pb.AppState{Version: 1, Value: []byte(`["lost"]`)}); err == nil {
		t.Fatal("a save of a fenced activation succeeded")
	}
	o, err := e.st.Load(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var rec pb.SessionRecord
	if err := proto.Unmarshal(o.Record, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.GetAppState()) != 0 {
		t.Fatalf("a fenced save stored %v", rec.GetAppState())
	}
}
