package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/alarm"
	"github.com/mcpgrain/mcpgrain/actors/policy"
	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// shortPolicy is executor's e2e timing shape (3 s / 6 s) scaled to minutes
// so the fake clock drives it.
func shortPolicy() alarm.Policy {
	p := alarm.DefaultPolicy()
	p.SessionTimeout, p.PausedLease, p.MaxPausedIdle = 3*time.Minute, 4*time.Minute, 6*time.Minute
	p.RunningLease, p.MaxRunningIdle = 4*time.Minute, 10*time.Minute
	return p
}

func TestAccessChecksPrincipalAndExistence(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	if r := e.access("nope", alice); r.GetStatus() != pb.SessionReply_STATUS_NOT_FOUND {
		t.Fatalf("unknown session: %v", r.GetStatus())
	}
	e.create("s1")
	if r := e.do("s1", &pb.SessionCreate{Principal: bob}).(*pb.SessionReply); r.GetStatus() != pb.SessionReply_STATUS_EXISTS {
		t.Fatalf("create over an existing id: %v", r.GetStatus())
	}
	if r := e.access("s1", bob); r.GetStatus() != pb.SessionReply_STATUS_FORBIDDEN {
		t.Fatalf("other principal: %v", r.GetStatus())
	}
	if r := e.do("s1", &pb.SessionDelete{Principal: bob}).(*pb.SessionReply); r.GetStatus() != pb.SessionReply_STATUS_FORBIDDEN {
		t.Fatalf("other principal delete: %v", r.GetStatus())
	}
	if r := e.access("s1", &pb.Principal{User: "alice", Org: "other"}); r.GetStatus() != pb.SessionReply_STATUS_FORBIDDEN {
		t.Fatalf("same user, other org: %v", r.GetStatus())
	}
	if r := e.access("s1", alice); r.GetStatus() != pb.SessionReply_STATUS_OK || r.GetRestored() {
		t.Fatalf("owner: %+v", r)
	}
}

func TestIdleRuntimePassivatesKeepsRecordAndRestores(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	first := e.rt("s1")
	e.clk.Advance(2 * time.Minute)
	e.access("s1", alice) // activity at t0+2m: the idle reminder re-arms, no dispose
	e.clk.Advance(time.Minute)
	eventually(t, "idle alarm re-armed from in-memory activity", func() bool {
		sn := e.inspect("s1")
		return sn.GetResident() && e.metric("mcpgrain_session_idle_alarms_total", nil) >= 1
	})
	if e.disposals("idle") != 0 {
		t.Fatal("disposed although active within the timeout")
	}
	e.clk.Advance(2 * time.Minute) // t0+5m: idle 3m since t0+2m
	eventually(t, "idle disposal", func() bool { return e.disposals("idle") == 1 })
	if first.closes.Load() != 1 || e.resident() != 0 {
		t.Fatalf("closes %d resident %d", first.closes.Load(), e.resident())
	}
	rec, err := e.st.Load(t.Context(), "session/s1")
	if err != nil || len(rec.Record) == 0 {
		t.Fatalf("record after passivation: %v", err)
	}
	sn := e.inspect("s1")
	if !sn.GetExists() || sn.GetResident() || sn.GetEnded() != "" {
		t.Fatalf("after idle passivation: %+v", sn)
	}
	for _, r := range sn.GetReminders() {
		if r == "idle" {
			t.Fatal("idle reminder kept after disposal")
		}
	}
	r := e.access("s1", alice)
	if r.GetStatus() != pb.SessionReply_STATUS_OK || !r.GetRestored() || e.buildCount("s1") != 2 {
		t.Fatalf("restore after passivation: %+v builds %d", r, e.buildCount("s1"))
	}
}

func TestPausedExecutionExtendsLeaseUpToMaxPausedIdle(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	e.rt("s1").paused.Store(1)
	e.clk.Advance(3 * time.Minute) // idle == timeout, paused → extend min(4m, 6m-3m) = 3m
	eventually(t, "paused lease extension", func() bool { return e.metric("mcpgrain_session_idle_alarms_total", nil) == 1 })
	if e.disposals("idle") != 0 || !e.inspect("s1").GetResident() {
		t.Fatal("disposed a session with a paused execution before max paused idle")
	}
	e.clk.Advance(3 * time.Minute) // idle 6m == max paused idle → destroy
	eventually(t, "disposal at max paused idle", func() bool { return e.disposals("idle") == 1 })
}

func TestOpenStreamExtendsRunningLeaseThenDisposes(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	e.rt("s1").streams.Store(1)
	e.clk.Advance(3 * time.Minute)
	eventually(t, "running lease extension", func() bool { return e.metric("mcpgrain_session_idle_alarms_total", nil) == 1 })
	e.clk.Advance(4 * time.Minute) // idle 7m < 10m: extend min(4m, 3m)
	eventually(t, "second extension", func() bool { return e.metric("mcpgrain_session_idle_alarms_total", nil) == 2 })
	if e.disposals("idle") != 0 {
		t.Fatal("disposed while streaming before max running idle")
	}
	e.clk.Advance(3 * time.Minute) // idle 10m == max running idle
	eventually(t, "disposal at max running idle", func() bool { return e.disposals("idle") == 1 })
}

func TestExpiryAndDeleteEndTheSession(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("gone")
	e.create("kept")
	r := e.do("gone", &pb.SessionDelete{Principal: alice}).(*pb.SessionReply)
	if r.GetStatus() != pb.SessionReply_STATUS_OK || e.disposals("delete") != 1 {
		t.Fatalf("delete: %v, disposals %v", r.GetStatus(), e.disposals("delete"))
	}
	if r := e.access("gone", alice); r.GetStatus() != pb.SessionReply_STATUS_ENDED {
		t.Fatalf("after delete: %v", r.GetStatus())
	}
	// Only the reminder that deletes the tombstone after its retention.
	if sn := e.inspect("gone"); sn.GetEnded() != "deleted" || fmt.Sprint(sn.GetReminders()) != "[expiry]" || sn.GetResident() {
		t.Fatalf("deleted session: %+v", sn)
	}
	// "kept" goes idle (passivated, record kept), then expires after the TTL.
	e.clk.Advance(3 * time.Minute)
	eventually(t, "idle passivation", func() bool { return e.disposals("idle") == 1 })
	// Meanwhile the tombstone of "gone" was kept for its retention (1h),
	// then the grain was deleted: no row, no reminder; the id is unknown.
	e.clk.Advance(time.Hour)
	eventually(t, "tombstone deletion", func() bool {
		_, err := e.st.Load(context.Background(), "session/gone")
		return errors.Is(err, store.ErrNotFound)
	})
	if rs, err := e.st.Reminders(context.Background(), "session/gone"); err != nil || len(rs) != 0 {
		t.Fatalf("reminders of a deleted grain: %v %v", rs, err)
	}
	if r := e.access("gone", alice); r.GetStatus() != pb.SessionReply_STATUS_NOT_FOUND {
		t.Fatalf("after the tombstone's deletion: %v", r.GetStatus())
	}
	if _, err := e.st.Load(context.Background(), "session/gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("asking for a deleted session wrote its row again: %v", err)
	}
	e.clk.Advance(24 * time.Hour)
	eventually(t, "expiry", func() bool { return e.inspect("kept").GetEnded() == "expired" })
	if r := e.access("kept", alice); r.GetStatus() != pb.SessionReply_STATUS_ENDED {
		t.Fatalf("after expiry: %v", r.GetStatus())
	}
	if e.buildCount("kept") != 1 {
		t.Fatal("expiry rebuilt the runtime of a passivated session")
	}
}

func TestExpiryCountsActivityThatHappenedMeanwhile(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	e.clk.Advance(23 * time.Hour)
	e.access("s1", alice)        // restores (it went idle) and is active again at t0+23h
	e.clk.Advance(2 * time.Hour) // the expiry reminder (t0+24h) fires: not expired, re-armed
	eventually(t, "expiry re-armed", func() bool {
		sn := e.inspect("s1")
		return sn.GetEnded() == "" && e.metric("mcpgrain_reminders_fired_total", nil) >= 1
	})
	if sn := e.inspect("s1"); sn.GetEnded() != "" {
		t.Fatalf("expired despite activity: %+v", sn)
	}
}

// Seed cases 26/28/29: cap 2 with A older than B: C's build evicts A, B
// survives, count stays 2; A restores on its next request; a repeated
// eviction request is a no-op with no double decrement.
func TestCapEvictsLeastRecentlyActiveAndItRestores(t *testing.T) {
	e := newEnv(t, 2, shortPolicy())
	e.create("A")
	e.clk.Advance(time.Second)
	e.create("B")
	e.clk.Advance(time.Second)
	e.create("C")
	eventually(t, "cap eviction of A", func() bool { return e.disposals("cap") == 1 })
	if e.resident() != 2 || e.inspect("A").GetResident() || !e.inspect("B").GetResident() || !e.inspect("C").GetResident() {
		t.Fatalf("resident %d; A %v B %v C %v", e.resident(), e.inspect("A").GetResident(), e.inspect("B").GetResident(), e.inspect("C").GetResident())
	}
	again := e.do("A", &pb.RequestCapEviction{}).(*pb.CapEvictionReply)
	if again.GetEvicted() || e.resident() != 2 || e.disposals("cap") != 1 {
		t.Fatalf("repeat eviction: evicted=%v resident %d", again.GetEvicted(), e.resident())
	}
	if r := e.access("A", alice); !r.GetRestored() || e.buildCount("A") != 2 {
		t.Fatalf("evicted session did not restore: %+v", r)
	}
	if e.metric("mcpgrain_resident_runtimes_peak", nil) < 3 {
		t.Fatalf("peak %v: C's build ran while A was still resident", e.metric("mcpgrain_resident_runtimes_peak", nil))
	}
}

// Seed case 27: a streaming resident is never evicted; the new build
// proceeds over the cap and the overflow is counted.
func TestPinnedResidentIsNeverEvictedAndOverflowIsCounted(t *testing.T) {
	e := newEnv(t, 1, shortPolicy())
	e.create("A")
	e.rt("A").streams.Store(1)
	e.create("B")
	if e.metric("mcpgrain_cap_overflow_total", nil) != 1 || e.resident() != 2 {
		t.Fatalf("overflow %v resident %d", e.metric("mcpgrain_cap_overflow_total", nil), e.resident())
	}
	if r := e.do("A", &pb.RequestCapEviction{}).(*pb.CapEvictionReply); r.GetEvicted() {
		t.Fatal("a streaming session accepted a cap eviction")
	}
	if e.metric("mcpgrain_resident_pinned", nil) != 1 || e.metric("mcpgrain_active_streams", nil) != 1 {
		t.Fatal("pinned/streams gauges wrong")
	}
}

// Seed case 30: an in-flight reservation counts toward the cap.
func TestInFlightBuildCountsTowardTheCap(t *testing.T) {
	e := newEnv(t, 2, shortPolicy())
	e.create("A")
	gate := make(chan struct{})
	e.mu.Lock()
	e.gate["B"] = gate
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); e.create("B") }()
	eventually(t, "B's build slot reserved", func() bool { return e.metric("mcpgrain_in_flight_cold_builds", nil) == 1 })
	e.create("C") // resident 1 + in flight 1 >= 2: evicts A
	eventually(t, "A evicted", func() bool { return e.disposals("cap") == 1 })
	close(gate)
	<-done
	if e.metric("mcpgrain_in_flight_cold_builds", nil) != 0 || e.resident() != 2 {
		t.Fatalf("in flight %v resident %d", e.metric("mcpgrain_in_flight_cold_builds", nil), e.resident())
	}
}

// Seed cases 31/32: a failed build releases its reservation and a later
// admission under the cap evicts nothing.
func TestFailedBuildReleasesItsSlot(t *testing.T) {
	e := newEnv(t, 2, shortPolicy())
	e.create("A")
	e.mu.Lock()
	e.fail["B"] = true
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	r, err := e.node.Request(ctx, "session", "B", &pb.SessionCreate{Principal: alice})
	if err == nil {
		t.Fatalf("create with a failing build: %v", r)
	}
	if sn := e.inspect("B"); sn.GetExists() {
		t.Fatal("a session whose runtime failed to build was created")
	}
	if e.metric("mcpgrain_in_flight_cold_builds", nil) != 0 {
		t.Fatal("failed build kept its slot")
	}
	e.create("C")
	if e.disposals("cap") != 0 {
		t.Fatal("an admission under the cap evicted")
	}
}

// Seed case 33/34: a request that lands mid-disposal waits for the teardown
// (Close runs once, is not cut short) and then rebuilds a fresh runtime.
func TestRequestDuringDisposalWaitsAndRebuilds(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.closeGate = make(chan struct{})
	e.create("s1")
	first := e.rt("s1")
	e.clk.Advance(3 * time.Minute) // idle reminder → disposal blocks in Close
	<-first.closing
	result := make(chan *pb.SessionReply)
	go func() { result <- e.access("s1", alice) }()
	// Left as a window: the request waits in the grain's mailbox while the
	// grain runs Close, which nothing outside the actor can observe; the
	// checks after the gate (restored, two builds, one close) hold only if
	// it was answered by the rebuilt runtime.
	select {
	case r := <-result:
		t.Fatalf("request overtook the disposal: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	close(e.closeGate)
	r := <-result
	if !r.GetRestored() || e.buildCount("s1") != 2 || first.closes.Load() != 1 {
		t.Fatalf("after disposal: %+v builds %d closes %d", r, e.buildCount("s1"), first.closes.Load())
	}
}

// Seed case 35: concurrent disposal triggers (idle reminder and cap
// eviction) close the runtime once.
func TestConcurrentDisposalsCloseOnce(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	rt := e.rt("s1")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.do("s1", &pb.RequestCapEviction{}) }()
	e.clk.Advance(3 * time.Minute)
	wg.Wait()
	eventually(t, "one disposal", func() bool { return e.disposals("cap")+e.disposals("idle") == 1 })
	if rt.closes.Load() != 1 {
		t.Fatalf("runtime closed %d times", rt.closes.Load())
	}
}

func TestApprovalLeaseAutoDeclinesAtDeadline(t *testing.T) {
	e := newEnv(t, 1, shortPolicy())
	e.create("s1")
	rt := e.rt("s1")
	rt.hooks.Paused("exec-1", t0.Add(4*time.Minute))
	rt.hooks.Paused("exec-2", t0.Add(4*time.Minute))
	eventually(t, "leases taken", func() bool { return len(e.inspect("s1").GetLeases()) == 2 })
	rt.hooks.Resuming("exec-2", "accept") // a decision arrived for exec-2: no auto-decline
	// exec-2 runs again (as in the engine): the idle alarm, due before the
	// deadlines, extends the running lease whichever it is delivered
	// after, instead of disposing the runtime before the deadline's
	// decision reached the code (a flake under -race).
	rt.running.Add(1)
	if r := e.do("s1", &pb.RequestCapEviction{}).(*pb.CapEvictionReply); r.GetEvicted() {
		t.Fatal("a session with approval leases was evicted")
	}
	e.clk.Advance(4 * time.Minute)
	eventually(t, "auto-decline", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.resolved["exec-1"] != nil
	})
	rt.mu.Lock()
	d, other := rt.resolved["exec-1"], rt.resolved["exec-2"]
	rt.mu.Unlock()
	if d.GetAction() != "decline" || d.GetReason() != "approval_timeout" || other != nil {
		t.Fatalf("decisions: exec-1 %+v exec-2 %+v", d, other)
	}
	// Counted when the decision reaches the code (an actor message after
	// the resolve).
	eventually(t, "timeout counted", func() bool {
		return e.metric("mcpgrain_approvals_total", map[string]string{"outcome": "timeout"}) == 1
	})
	rt.hooks.Settled("exec-1")
	rt.hooks.Settled("exec-2")
	eventually(t, "leases released", func() bool { return len(e.inspect("s1").GetLeases()) == 0 })
	if e.metric("mcpgrain_approval_leases", nil) != 0 {
		t.Fatal("lease gauge not back to 0")
	}
}

// A durable pause (journaled; a fresh runtime restores it) does not pin
// the runtime: the session passivates at its idle timeout and may be
// cap-evicted, its approval reminder stays, and at the deadline the
// reminder wakes the session, whose new runtime restored the pause, and
// declines it.
func TestDurablePauseLetsTheSessionPassivateAndItsDeadlineWakesIt(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	rt := e.durablePause("s1", "exec-1")
	e.mu.Lock()
	e.restored["s1"] = []string{"exec-1"} // the next runtime restores the pause
	e.mu.Unlock()
	if e.metric("mcpgrain_approval_leases", nil) != 0 || e.metric("mcpgrain_resident_evictable", nil) != 1 {
		t.Fatal("a durable pause pins the runtime")
	}
	e.clk.Advance(3 * time.Minute) // idle == timeout: nothing but a durable pause → passivate
	eventually(t, "idle disposal", func() bool { return e.disposals("idle") == 1 })
	// The fired idle reminder's row goes once its delivery is acknowledged,
	// just after the disposal.
	eventually(t, "idle reminder acknowledged", func() bool { return len(e.inspect("s1").GetReminders()) == 2 })
	sn := e.inspect("s1")
	if sn.GetResident() || len(sn.GetReminders()) != 2 || sn.GetReminders()[0] != "approval:exec-1" {
		t.Fatalf("after passivation: %+v (want the approval reminder kept)", sn)
	}
	e.clk.Advance(time.Minute) // the deadline
	eventually(t, "restored and declined", func() bool {
		if e.buildCount("s1") != 2 {
			return false
		}
		r := e.rt("s1")
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.resolved["exec-1"] != nil
	})
	r := e.rt("s1")
	r.mu.Lock()
	d := r.resolved["exec-1"]
	r.mu.Unlock()
	if d.GetAction() != "decline" || d.GetReason() != "approval_timeout" || rt.resolved["exec-1"] != nil {
		t.Fatalf("decision %+v", d)
	}
	// Declined, the execution runs again until it settles, and pins the
	// restored runtime meanwhile; then the runtime is evictable again.
	if ev := e.do("s1", &pb.RequestCapEviction{}).(*pb.CapEvictionReply); ev.GetEvicted() {
		t.Fatal("evicted before the declined execution settled")
	}
	e.settleThenEvictable(r, "s1", "exec-1")
}

// Regression (chaos, 2 of 13 full runs): a durable pause does not pin its
// runtime, and it stayed evictable after a decision was handed to it but
// before the execution ran again; a cap eviction in that window left the
// acknowledged decision waiting for the session's next activation. A
// decided execution pins the runtime until it settles.
func TestDecidedDurablePausePinsTheRuntimeUntilItSettles(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	rt := e.durablePause("s1", "exec-1")
	r := e.do("s1", &pb.ExecutionDecide{Principal: alice, ExecutionId: "exec-1", Action: "accept"}).(*pb.ExecutionReply)
	if r.GetStatus() != pb.ExecutionReply_STATUS_OK {
		t.Fatalf("decide: %v", r.GetStatus())
	}
	rt.mu.Lock()
	d := rt.resolved["exec-1"]
	rt.mu.Unlock()
	if d.GetAction() != "accept" {
		t.Fatalf("decision handed over: %+v", d)
	}
	// The fake does not run the execution: it stays decided and unsettled,
	// as a real one is until its goroutine resumes it.
	if ev := e.do("s1", &pb.RequestCapEviction{}).(*pb.CapEvictionReply); ev.GetEvicted() {
		t.Fatal("a session whose decided execution had not run yet was cap-evicted")
	}
	e.clk.Advance(3 * time.Minute) // idle timeout: a decided execution counts as running
	eventually(t, "idle alarm handled", func() bool { return e.metric("mcpgrain_session_idle_alarms_total", nil) >= 1 })
	if e.disposals("idle") != 0 {
		t.Fatal("the idle alarm disposed a runtime whose decided execution had not run yet")
	}
	e.settleThenEvictable(rt, "s1", "exec-1")
}

// durablePause creates session id whose runtime holds exec as a durable
// pause, and waits for the session to take its approval lease.
func (e *env) durablePause(id, exec string) *fakeRuntime {
	e.t.Helper()
	e.create(id)
	rt := e.rt(id)
	rt.mu.Lock()
	rt.durable[exec] = true
	rt.mu.Unlock()
	rt.hooks.Paused(exec, t0.Add(4*time.Minute))
	eventually(e.t, "lease taken", func() bool { return len(e.inspect(id).GetLeases()) == 1 })
	return rt
}

// settleThenEvictable settles exec in rt and waits until session id may be
// cap-evicted again (a decided execution pins its runtime until it settles).
func (e *env) settleThenEvictable(rt *fakeRuntime, id, exec string) {
	e.t.Helper()
	rt.hooks.Settled(exec)
	eventually(e.t, "evictable once settled", func() bool {
		return e.do(id, &pb.RequestCapEviction{}).(*pb.CapEvictionReply).GetEvicted()
	})
}

// A graceful stop lets a running execution finish before the runtime is
// disposed (disposing cuts its tool call in flight, whose outcome is then
// unknown).
func TestGracefulStopWaitsForRunningExecutions(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	rt := e.rt("s1")
	rt.running.Store(1)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- e.node.Stop(ctx)
	}()
	// The drain asked, saw the execution running, and asks again: it waits
	// (a drain that does not wait closes the runtime at once, recorded
	// below as a close with an execution running).
	eventually(t, "the drain polls the running execution", func() bool {
		return rt.runningAsks.Load() >= 3 || isClosed(rt.closing)
	})
	rt.running.Store(0) // the execution finished
	select {
	case <-rt.closing:
	case <-time.After(10 * time.Second):
		t.Fatal("the runtime was not closed once the execution finished")
	}
	if n := rt.runningAtClose.Load(); n != 0 {
		t.Fatalf("the runtime was closed while %d executions ran", n)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// isClosed reports whether ch is closed (without waiting).
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A resume forwarded from another session runs the resumed code outside
// the session's turn: the session answers its other requests while the
// code runs, and the forwarder gets the result when it ends.
func TestForwardedResumeDoesNotHoldTheSessionsTurn(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	rt := e.rt("s1")
	started, gate := make(chan string, 1), make(chan struct{})
	rt.mu.Lock()
	rt.resumeStarted, rt.resumeGate = started, gate
	rt.mu.Unlock()

	type result struct {
		reply any
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := e.node.Request(ctx, session.KindName, "s1", &pb.ExecutionResumeForModel{Principal: alice, ExecutionId: "exec_1", Action: "accept"})
		done <- result{r, err}
	}()
	if id := <-started; id != "exec_1" {
		t.Fatalf("resumed %q", id)
	}
	// The code is still running (the gate is closed); the session answers.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := e.node.Request(ctx, session.KindName, "s1", &pb.SessionAccess{Principal: alice}); err != nil {
		t.Fatalf("the session did not answer while a forwarded resume ran: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the forwarded resume was answered before its code ended: %+v", r)
	default:
	}
	close(gate)
	r := <-done
	reply, ok := r.reply.(*pb.ExecutionReply)
	if r.err != nil || !ok || reply.GetStatus() != pb.ExecutionReply_STATUS_OK || reply.GetResultJson() != `{"resumed":"exec_1"}` {
		t.Fatalf("forwarded resume: %+v %v", r.reply, r.err)
	}
	// Another principal is refused at once, without running anything.
	other := &pb.Principal{User: "mallory", Org: "acme"}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	fr, err := e.node.Request(ctx2, session.KindName, "s1", &pb.ExecutionResumeForModel{Principal: other, ExecutionId: "exec_1", Action: "accept"})
	if err != nil || fr.(*pb.ExecutionReply).GetStatus() != pb.ExecutionReply_STATUS_FORBIDDEN {
		t.Fatalf("another principal: %+v %v", fr, err)
	}
	// Another organization is told "not found", as for an unknown id.
	fr, err = e.node.Request(ctx2, session.KindName, "s1", &pb.ExecutionResumeForModel{Principal: &pb.Principal{User: "alice", Org: "evil"}, ExecutionId: "exec_1", Action: "accept"})
	if err != nil || fr.(*pb.ExecutionReply).GetStatus() != pb.ExecutionReply_STATUS_NOT_FOUND {
		t.Fatalf("another organization: %+v %v", fr, err)
	}
}

// With a memory budget the soft cap follows from memory: a budget smaller
// than one runtime gives the floor, and builds over it evict the least
// recently active sessions as with a fixed cap.
func TestMemoryBudgetDerivesTheSoftCap(t *testing.T) {
	e := newEnvMemory(t, 1000, shortPolicy(), residency.Memory{Budget: 1, Floor: 3})
	if got := e.metric("mcpgrain_resident_soft_cap", nil); got != 3 {
		t.Fatalf("soft cap %v with a 1-byte budget, want the floor 3", got)
	}
	if got := e.metric("mcpgrain_resident_memory_budget_bytes", nil); got != 1 {
		t.Fatalf("budget gauge %v", got)
	}
	for i := range 5 {
		e.create(fmt.Sprintf("s%d", i))
		e.clk.Advance(time.Second)
	}
	eventually(t, "cap evictions down to the derived cap", func() bool { return e.disposals("cap") == 2 })
	if e.resident() != 3 || e.metric("mcpgrain_resident_runtime_bytes", nil) == 0 {
		t.Fatalf("resident %d, per-runtime estimate %v", e.resident(), e.metric("mcpgrain_resident_runtime_bytes", nil))
	}
}

// The grain that owns a pause decides who may decide it, whatever the
// surface checked: a viewer of the organization never does (before, any
// role did, and the role was only recorded as org_write_access); with
// Approvers "admin" a member does not either. A refusal hands nothing
// over and records nothing; an allowed decider then decides once.
func TestOnlyRolesThatMayDecideDecide(t *testing.T) {
	viewer := &pb.Principal{User: "vera", Org: "acme", Role: "viewer"}
	decide := func(e *env, who *pb.Principal) pb.ExecutionReply_Status {
		return e.do("s1", &pb.ExecutionDecide{Principal: who, ExecutionId: "exec-1", Action: "accept"}).(*pb.ExecutionReply).GetStatus()
	}
	handedOver := func(rt *fakeRuntime) bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.resolved["exec-1"] != nil
	}
	for _, tc := range []struct {
		approvers policy.Approvers
		refused   []*pb.Principal
		decider   *pb.Principal
	}{
		{"", []*pb.Principal{viewer}, bob},
		{policy.ApproversAdmin, []*pb.Principal{viewer, bob}, alice},
	} {
		t.Run("approvers="+string(tc.approvers), func(t *testing.T) {
			e := newEnvWith(t, 32, shortPolicy(), func(c *session.Config) { c.Approvers = tc.approvers })
			rt := e.durablePause("s1", "exec-1")
			for _, who := range tc.refused {
				if st := decide(e, who); st != pb.ExecutionReply_STATUS_FORBIDDEN {
					t.Fatalf("%s (%s) deciding: %v, want FORBIDDEN", who.GetUser(), who.GetRole(), st)
				}
			}
			if handedOver(rt) {
				t.Fatal("a refused decision was handed to the runtime")
			}
			if st := decide(e, tc.decider); st != pb.ExecutionReply_STATUS_OK || !handedOver(rt) {
				t.Fatalf("%s (%s) deciding: %v", tc.decider.GetUser(), tc.decider.GetRole(), st)
			}
		})
	}
	if _, err := session.NewHost(session.Config{Builder: session.BuilderFunc(nil), Evict: func(context.Context, string) (bool, error) { return false, nil }, Approvers: "owner"}); err == nil {
		t.Fatal("an unknown Approvers value was accepted")
	}
}

// noDirectory stands for a node's execution directory: deciding needs
// only that one is configured (the grain writes the entry itself).
type noDirectory struct{}

func (noDirectory) DeleteExecutions(context.Context, ...string) error { return nil }

// A human decision writes the directory's entry (who decided, and why)
// in the transaction that records it in the session, and says so in its
// reply: the approval surface writes nothing after the answer. A
// deadline's decline writes no entry (the directory shows it timed out).
func TestDecisionWritesItsDirectoryEntryWithTheRecord(t *testing.T) {
	e := newEnvWith(t, 32, shortPolicy(), func(c *session.Config) { c.Directory = noDirectory{} })
	dir := directory.New(e.st)
	ctx := context.Background()
	if err := dir.PutExecution(ctx, directory.Execution{ID: "exec-1", Session: "s1", User: "alice", Org: "acme", Deadline: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.durablePause("s1", "exec-1")
	r := e.do("s1", &pb.ExecutionDecide{Principal: bob, ExecutionId: "exec-1", Action: "decline",
		ContentJson: `{"reason":"  not today  "}`}).(*pb.ExecutionReply)
	if r.GetStatus() != pb.ExecutionReply_STATUS_OK || !r.GetRecorded() {
		t.Fatalf("decision: %v recorded=%v, want OK and recorded", r.GetStatus(), r.GetRecorded())
	}
	row, err := dir.GetExecution(ctx, "exec-1")
	if err != nil || row.DecidedBy != "bob" || row.Decision != "decline" || row.Reason != "not today" || row.Settled.IsZero() {
		t.Fatalf("directory entry after the answer: %+v %v", row, err)
	}
}

// Without a directory the node has no entry to write: the reply leaves it
// to the surface. (A test of its own: two nodes in one process trip a race
// inside grpclog.SetLoggerV2 under -race; see cluster's startCluster.)
func TestDecisionWithoutADirectoryLeavesTheEntryToTheSurface(t *testing.T) {
	e2 := newEnv(t, 32, shortPolicy())
	e2.durablePause("s1", "exec-1")
	if r := e2.do("s1", &pb.ExecutionDecide{Principal: bob, ExecutionId: "exec-1", Action: "accept"}).(*pb.ExecutionReply); r.GetStatus() != pb.ExecutionReply_STATUS_OK || r.GetRecorded() {
		t.Fatalf("decision without a directory: %v recorded=%v", r.GetStatus(), r.GetRecorded())
	}
}

// journalDeadline stores exec's deadline reminder, due at due, as a
// durable pause's journal write does (store.RemindersIn in a domain's
// transaction, fenced by the session's epoch), and reports it to the
// runtime's DeadlinesStored as the journal does once it committed.
func (e *env) journalDeadline(rt *fakeRuntime, exec string, due time.Time) {
	e.t.Helper()
	ctx := context.Background()
	var stored []store.Reminder
	err := e.st.DB().Write(ctx, func(ctx context.Context, q store.Querier) error {
		var err error
		stored, err = store.RemindersIn(ctx, q, rt.in.Grain, rt.in.Epoch(), []store.Reminder{{Name: rt.in.Deadlines + exec, DueAt: due}}, nil, e.st.DB().Now())
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	rt.in.DeadlinesStored(stored, nil)
}

// Regression (the journal's deadline fold): a pause's journal stores its
// deadline before the engine registers the pause and sends its lease. Had
// the report armed the reminder at once, a deadline already due by then
// (a slow write, a store outage ridden out) fired while the pause was not
// yet known, found nothing to decline and was completed: the pause never
// timed out. The reminder is armed by the pause's lease message instead,
// in the grain's turn, once the pause is live.
func TestJournalStoredDeadlineIsArmedByThePausesLease(t *testing.T) {
	e := newEnv(t, 32, shortPolicy())
	e.create("s1")
	rt := e.rt("s1")
	due := t0.Add(time.Minute)
	if !e.clk.Now().Equal(t0) {
		t.Fatalf("clock at %v after create, want %v (the deadline's timer would be due elsewhere)", e.clk.Now(), t0)
	}
	e.journalDeadline(rt, "exec-1", due)
	// Counted by due time, not in all: other timers (the session's idle
	// timer, the host's) may be armed concurrently by then.
	if n := e.clk.PendingAt(due); n != 0 {
		t.Fatalf("%d timers due at the deadline armed by the journal's report, before the pause is registered (want none)", n)
	}
	// The runtime's goroutine is descheduled past the deadline between the
	// journal's commit and the pause's registration.
	e.clk.Advance(2 * time.Minute)
	rt.mu.Lock()
	rt.durable["exec-1"] = true
	rt.mu.Unlock()
	rt.hooks.Paused("exec-1", t0.Add(time.Minute))
	eventually(t, "the overdue deadline declined the pause", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.resolved["exec-1"] != nil
	})
	rt.mu.Lock()
	d := rt.resolved["exec-1"]
	rt.mu.Unlock()
	if d.GetAction() != "decline" || d.GetReason() != "approval_timeout" {
		t.Fatalf("decision %+v", d)
	}
	// The reminder is completed when its delivery returns, after the
	// decline it carried: wait for it (a check right after the decline
	// failed under -race in CI).
	eventually(t, "the journal's deadline reminder completed", func() bool {
		return !slices.Contains(e.inspect("s1").GetReminders(), "approval:exec-1")
	})
}
