package reminders_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/reminders"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

var t0 = time.UnixMilli(1_900_000_000_000)

type delivery struct {
	grain string
	fired *pb.ReminderFired
	at    time.Time
}

type harness struct {
	t       *testing.T
	clk     *clock.Fake
	st      store.Store
	svc     *reminders.Service
	owned   atomic.Bool
	failMu  sync.Mutex
	failErr error // returned from Deliver when set
	got     chan delivery
	epochs  map[string]uint64
	inDeliv atomic.Int32
	maxConc atomic.Int32
	gate    chan struct{} // if non-nil, deliveries wait on it
	reg     *prometheus.Registry
}

func newHarness(t *testing.T, concurrency int) *harness {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := &harness{t: t, clk: clock.NewFake(t0), st: st, got: make(chan delivery, 1000), epochs: map[string]uint64{},
		reg: prometheus.NewRegistry()}
	h.owned.Store(true)
	h.svc, err = reminders.New(reminders.Config{
		Store:        st,
		Owns:         func(kind, id string) bool { return h.owned.Load() },
		Deliver:      h.deliver,
		PollInterval: time.Hour, // scans are driven by PollSync
		Lookahead:    10 * time.Second,
		Concurrency:  concurrency,
		Clock:        h.clk,
		Registerer:   h.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.svc.Stop(context.Background()) })
	return h
}

func (h *harness) deliver(_ context.Context, kind, id string, f *pb.ReminderFired) error {
	n := h.inDeliv.Add(1)
	defer h.inDeliv.Add(-1)
	for {
		m := h.maxConc.Load()
		if n <= m || h.maxConc.CompareAndSwap(m, n) {
			break
		}
	}
	if h.gate != nil {
		<-h.gate
	}
	h.failMu.Lock()
	err := h.failErr
	h.failMu.Unlock()
	if err != nil {
		return err
	}
	h.got <- delivery{grain: grain.Key(kind, id), fired: f, at: h.clk.Now()}
	return nil
}

func (h *harness) setFail(err error) {
	h.failMu.Lock()
	h.failErr = err
	h.failMu.Unlock()
}

func (h *harness) register(g, name string, due time.Time, period time.Duration) {
	h.t.Helper()
	ctx := context.Background()
	if _, ok := h.epochs[g]; !ok {
		o, err := h.st.Acquire(ctx, "probe/"+g, "n1")
		if err != nil {
			h.t.Fatal(err)
		}
		h.epochs[g] = o.Epoch
	}
	if err := h.svc.Register(ctx, "probe", g, h.epochs[g], store.Reminder{Name: name, DueAt: due, Period: period}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) next() delivery {
	h.t.Helper()
	select {
	case d := <-h.got:
		return d
	case <-time.After(5 * time.Second):
		h.t.Fatal("no delivery")
		return delivery{}
	}
}

// none asserts no delivery happened: the fake clock ran every due timer in
// Advance, so once no scan, fire or delivery is running (WaitIdle) any
// delivery that was started has reached h.got.
func (h *harness) none() {
	h.t.Helper()
	h.svc.WaitIdle()
	select {
	case d := <-h.got:
		h.t.Fatalf("unexpected delivery %s/%s", d.grain, d.fired.GetName())
	default:
	}
}

// metric is the value of the unlabelled counter or gauge name.
func (h *harness) metric(name string) float64 {
	h.t.Helper()
	fams, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	h.t.Fatalf("metric %s not gathered", name)
	return 0
}

// eventually polls cond every millisecond until it holds, failing the test
// with what after 5 s.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("after 5s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until no delivery is in flight and the store agrees with
// the completion (the completion write happens after Deliver returns).
func (h *harness) waitRows(g string, want int) []store.Reminder {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs, err := h.st.Reminders(context.Background(), "probe/"+g)
		if err == nil && len(rs) == want {
			return rs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s has %d reminders, want %d", g, len(rs), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOneShotFiresOnceAtDueNeverEarly(t *testing.T) {
	h := newHarness(t, 4)
	due := t0.Add(5*time.Second + 300*time.Microsecond) // sub-ms: must round up, not fire early
	h.register("a", "r", due, 0)
	h.clk.Advance(5 * time.Second)
	h.none()
	h.clk.Advance(time.Millisecond)
	d := h.next()
	if d.grain != "probe/a" || d.fired.GetName() != "r" || d.at.Before(due) {
		t.Fatalf("delivery %+v at %v, due %v", d, d.at, due)
	}
	h.waitRows("a", 0)
	h.svc.PollSync()
	h.clk.Advance(time.Minute)
	h.none()
}

func TestScanArmsRemindersRegisteredElsewhere(t *testing.T) {
	h := newHarness(t, 4)
	o, _ := h.st.Acquire(context.Background(), "probe/b", "n2")
	if _, err := h.st.RegisterReminders(context.Background(), "probe/b", o.Epoch, []store.Reminder{{Name: "x", DueAt: t0.Add(2 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	h.svc.PollSync()
	h.clk.Advance(2 * time.Second)
	if d := h.next(); d.grain != "probe/b" {
		t.Fatalf("got %+v", d)
	}
}

func TestOnlyOwnedGrainsFireAndGainedOnesFireOnRebalance(t *testing.T) {
	h := newHarness(t, 4)
	h.owned.Store(false)
	h.register("c", "r", t0.Add(time.Second), 0)
	h.svc.PollSync()
	h.clk.Advance(3 * time.Second)
	h.none()
	// This node gains the grain: the overdue reminder fires at once.
	h.owned.Store(true)
	h.svc.Rebalance()
	d := h.next()
	if tard := d.at.Sub(time.UnixMilli(d.fired.GetDueAtMs())); tard != 2*time.Second {
		t.Fatalf("tardiness %v, want 2s (fired when gained)", tard)
	}
}

func TestPeriodicCoalescesMissedTicks(t *testing.T) {
	h := newHarness(t, 4)
	h.register("p", "tick", t0.Add(time.Second), time.Second)
	h.clk.Advance(time.Second)
	if d := h.next(); d.fired.GetDueAtMs() != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("first tick %+v", d.fired)
	}
	h.eventually("the first tick's completion moves the next due to t0+2s", func() bool {
		return h.waitRows("p", 1)[0].DueAt.Equal(t0.Add(2 * time.Second))
	})
	// An outage: nobody owns the grain for 10 ticks.
	h.owned.Store(false)
	h.svc.Rebalance()
	h.clk.Advance(10 * time.Second) // now t0+11s
	h.none()
	h.owned.Store(true)
	h.svc.Rebalance()
	d := h.next()
	if d.fired.GetDueAtMs() != t0.Add(2*time.Second).UnixMilli() {
		t.Fatalf("catch-up tick due %v", time.UnixMilli(d.fired.GetDueAtMs()))
	}
	h.none() // one catch-up fire, not ten
	h.eventually("the next due is t0+12s (the first tick after now)", func() bool {
		return h.waitRows("p", 1)[0].DueAt.Equal(t0.Add(12 * time.Second))
	})
	h.clk.Advance(time.Second)
	if d := h.next(); d.fired.GetDueAtMs() != t0.Add(12*time.Second).UnixMilli() {
		t.Fatalf("tick after catch-up due %v", time.UnixMilli(d.fired.GetDueAtMs()).Sub(t0))
	}
}

func TestFailedDeliveryIsRetriedAtNextScan(t *testing.T) {
	h := newHarness(t, 4)
	h.setFail(&grain.Error{Code: pb.GrainError_CODE_UNAVAILABLE, Message: "down"})
	h.register("f", "r", t0.Add(time.Second), 0)
	h.clk.Advance(time.Second)
	h.svc.WaitIdle()
	if n := h.svc.Armed(); n != 0 {
		t.Fatalf("%d armed after the failed delivery, want it disarmed (the next scan arms it again)", n)
	}
	if v := h.metric("mcpgrain_reminder_delivery_failures_total"); v != 1 {
		t.Fatalf("mcpgrain_reminder_delivery_failures_total = %v, want 1", v)
	}
	h.waitRows("f", 1)
	h.setFail(nil)
	h.svc.PollSync()
	h.clk.Advance(0)
	h.next()
	h.waitRows("f", 0)
}

func TestRefusedReminderIsCompleted(t *testing.T) {
	h := newHarness(t, 4)
	h.setFail(grain.Reject("no such session"))
	h.register("g", "r", t0.Add(time.Second), 0)
	h.clk.Advance(time.Second)
	h.waitRows("g", 0)
}

func TestCancelledReminderDoesNotFire(t *testing.T) {
	h := newHarness(t, 4)
	h.register("x", "r", t0.Add(time.Second), 0)
	if err := h.svc.Cancel(context.Background(), "probe", "x", h.epochs["x"], "r"); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(2 * time.Second)
	h.none()
	if err := h.svc.Cancel(context.Background(), "probe", "x", h.epochs["x"]+1, "r"); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("cancel with a wrong epoch: %v", err)
	}
}

func TestDeliveriesAreBoundedPerNode(t *testing.T) {
	h := newHarness(t, 3)
	h.gate = make(chan struct{})
	for i := range 20 {
		h.register("c"+string(rune('a'+i)), "r", t0.Add(time.Second), 0)
	}
	h.clk.Advance(time.Second)
	h.eventually("3 deliveries started", func() bool { return h.inDeliv.Load() >= 3 })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			h.gate <- struct{}{}
		}
	}()
	for range 20 {
		h.next()
	}
	wg.Wait()
	if m := h.maxConc.Load(); m != 3 {
		t.Fatalf("max concurrent deliveries %d, want 3", m)
	}
}
