package handle_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

var (
	t0    = time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	alice = &pb.Principal{User: "alice", Org: "acme", Role: "member"}
	bob   = &pb.Principal{User: "bob", Org: "acme", Role: "member"}
)

// env is one node (SQLite store) hosting the handle kind, with a fake
// clock that fires reminders as it reaches them.
type env struct {
	t     testing.TB
	calls chan call    // the callback's runs
	fail  atomic.Int32 // the callback's runs that fail first
	st    store.Store
	clk   *clock.Fake
	h     *handle.Host
	req   requester // the node
	reg   *prometheus.Registry
}

func newEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	return newEnvOn(t, "sqlite:"+filepath.Join(t.TempDir(), "h.db"), handle.Config{IdleTTL: ttl})
}

// newEnvOn is newEnv on the store dsn, with the host's configuration cfg
// (its Cluster, Clock and Registerer are the env's).
func newEnvOn(t testing.TB, dsn string, cfg handle.Config) *env {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := &env{t: t, st: st, clk: clock.NewFake(t0), reg: prometheus.NewRegistry(), calls: make(chan call, 16)}
	var node *cluster.Node
	req := requester(func() *cluster.Node { return node })
	e.req = req
	cfg.Cluster, cfg.Clock, cfg.Registerer, cfg.Store = req, e.clk, e.reg, st
	e.h, err = handle.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The node's servers carry the schedule callbacks (Bind learns them).
	srv := mcp.NewServer(&mcp.Implementation{Name: "handles", Version: "v0"}, nil)
	app.BindSchedules(srv, map[string]app.ScheduleFunc{"note": e.callback})
	e.h.Bind(srv)
	node, err = cluster.Start(context.Background(), cluster.Config{
		Kinds: []grain.Kind{e.h.Kind(), e.h.QuotaKind()}, Store: st, Registerer: e.reg,
		Reminders: cluster.ReminderOptions{Clock: e.clk, PollInterval: 24 * time.Hour, Lookahead: 365 * 24 * time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = node.Stop(ctx)
	})
	return e
}

// requester is the node, known once started.
type requester func() *cluster.Node

func (r requester) Request(ctx context.Context, kind, id string, msg proto.Message, opts ...grain.CallOption) (proto.Message, error) {
	return r().Request(ctx, kind, id, msg, opts...)
}

func (e *env) mint(p *pb.Principal) string {
	e.t.Helper()
	id, err := e.h.Mint(context.Background(), p)
	if err != nil {
		e.t.Fatalf("mint: %v", err)
	}
	return id
}

func (e *env) open(p *pb.Principal, id string) app.Scope {
	e.t.Helper()
	sc, err := e.h.Open(context.Background(), p, id)
	if err != nil {
		e.t.Fatalf("open %s: %v", id, err)
	}
	return sc
}

// record is the handle's stored record (nil: no row).
func (e *env) record(id string) *pb.HandleRecord {
	e.t.Helper()
	o, err := e.st.Load(context.Background(), grain.Key(handle.KindName, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	rec := &pb.HandleRecord{}
	if err := proto.Unmarshal(o.Record, rec); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func saveIf(t *testing.T, sc app.Scope, value string, rev uint64) bool {
	t.Helper()
	ok, err := sc.(app.ConditionalSaver).SaveStateIf(context.Background(), "notes", app.Saved{Version: 1, Value: []byte(value)}, rev)
	if err != nil {
		t.Fatalf("save %s at revision %d: %v", value, rev, err)
	}
	return ok
}

// A handle is minted into the store; its saves are compare-and-sets whose
// conflict answer brings the stored value; only its principal reaches it,
// and an unknown, malformed, foreign or dropped handle is one answer.
func TestHandleSavesConflictsAndPrincipals(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	id := e.mint(alice)
	if rec := e.record(id); rec == nil || rec.GetPrincipal().GetUser() != "alice" {
		t.Fatalf("minted handle's record: %v", rec)
	}
	a, b := e.open(alice, id), e.open(alice, id) // two handlers, e.g. on two nodes
	if !saveIf(t, a, `["one"]`, 0) {
		t.Fatal("first save refused")
	}
	if saveIf(t, b, `["two"]`, 0) {
		t.Fatal("a save over a stale revision was taken")
	}
	if v, ok := b.State("notes"); !ok || string(v.Value) != `["one"]` || v.Revision != 1 {
		t.Fatalf("after the conflict the scope has %q at %d (%v), want the stored value at revision 1", v.Value, v.Revision, ok)
	}
	if !saveIf(t, b, `["one","two"]`, 1) {
		t.Fatal("a save over the current revision was refused")
	}
	if got := e.record(id).GetAppState()["notes"]; string(got.GetValue()) != `["one","two"]` || got.GetRevision() != 2 {
		t.Fatalf("stored %v", got)
	}
	if v, _ := e.open(alice, id).State("notes"); string(v.Value) != `["one","two"]` {
		t.Fatalf("a new open reads %q", v.Value)
	}

	unknown := []struct {
		name string
		p    *pb.Principal
		id   string
	}{
		{"another principal", bob, id},
		{"another org", &pb.Principal{User: "alice", Org: "other"}, id},
		{"no principal", &pb.Principal{}, id},
		{"malformed", alice, "h_short"},
		{"never minted", alice, "h_AAAAAAAAAAAAAAAAAAAAAA"},
	}
	for _, c := range unknown {
		if _, err := e.h.Open(ctx, c.p, c.id); !errors.Is(err, app.ErrUnknownHandle) {
			t.Errorf("open, %s: %v, want ErrUnknownHandle", c.name, err)
		}
		if err := e.h.Drop(ctx, c.p, c.id); !errors.Is(err, app.ErrUnknownHandle) {
			t.Errorf("drop, %s: %v, want ErrUnknownHandle", c.name, err)
		}
	}
	if e.record("h_AAAAAAAAAAAAAAAAAAAAAA") != nil {
		t.Error("asking for a guessed handle wrote a row")
	}
	if _, err := e.h.Mint(ctx, &pb.Principal{}); err == nil {
		t.Error("a handle was minted for no principal")
	}
	// A foreign save changes nothing either.
	foreign, err := e.h.Open(ctx, alice, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.h.Drop(ctx, alice, id); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if e.record(id) != nil {
		t.Fatal("a dropped handle's row is still stored")
	}
	for what, err := range map[string]error{
		"open":  func() error { _, err := e.h.Open(ctx, alice, id); return err }(),
		"drop":  e.h.Drop(ctx, alice, id),
		"save":  foreign.SaveState(ctx, "notes", app.Saved{Version: 1, Value: []byte(`[]`)}),
		"again": func() error { _, err := e.h.Open(ctx, alice, id); return err }(),
	} {
		if !errors.Is(err, app.ErrUnknownHandle) {
			t.Errorf("%s of a dropped handle: %v, want ErrUnknownHandle", what, err)
		}
	}
	if e.record(id) != nil {
		t.Fatal("a save of a dropped handle wrote its row again")
	}
	if got := metric(t, e, "dropped"); got != 1 {
		t.Errorf("dropped handles counted: %v", got)
	}
}

// A save reaching an activation whose ownership another node took (and
// saved a newer value with) is fenced: the stale activation stores
// nothing, the request runs again on a new activation, which reads the
// newer value and answers the conflict with it.
func TestHandleSaveIsFenced(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	id := e.mint(alice)
	sc := e.open(alice, id)
	key := grain.Key(handle.KindName, id)
	other, err := e.st.Acquire(ctx, key, "another-node")
	if err != nil {
		t.Fatal(err)
	}
	rec := e.record(id)
	rec.AppState = map[string]*pb.HandleState{"notes": {Version: 1, Value: []byte(`["theirs"]`), Revision: 1}}
	b, _ := proto.Marshal(rec)
	if err := e.st.Save(ctx, key, other.Epoch, b); err != nil {
		t.Fatal(err)
	}
	if saveIf(t, sc, `["stale"]`, 0) {
		t.Fatal("a save over the revision the stale activation knew was taken")
	}
	if v, _ := sc.State("notes"); string(v.Value) != `["theirs"]` || v.Revision != 1 {
		t.Fatalf("the conflict answered %q at %d, want the newer owner's value", v.Value, v.Revision)
	}
	o, err := e.st.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.record(id).GetAppState()["notes"]; string(got.GetValue()) != `["theirs"]` || o.Epoch <= other.Epoch {
		t.Fatalf("stored %q at epoch %d (the other node's: %d)", got.GetValue(), o.Epoch, other.Epoch)
	}
}

// An unused handle is deleted when its idle TTL has passed since its last
// use; an open records a use (at most once per TTL/30).
func TestHandleExpires(t *testing.T) {
	const ttl = 30 * time.Hour
	e := newEnv(t, ttl)
	id := e.mint(alice)
	e.clk.Advance(2 * time.Hour) // past ttl/30: the open records the use
	e.open(alice, id)
	if used := time.UnixMilli(e.record(id).GetUsedAtMs()); !used.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("use recorded at %v, want %v", used, t0.Add(2*time.Hour))
	}
	e.clk.Advance(ttl - time.Hour) // the mint's expiry passed: still used since
	if e.record(id) == nil {
		t.Fatal("a handle used within its TTL expired")
	}
	e.clk.Advance(2 * time.Hour)
	deadline := time.Now().Add(20 * time.Second)
	for e.record(id) != nil {
		if time.Now().After(deadline) {
			t.Fatal("an idle handle was not deleted within 20s of its expiry")
		}
		time.Sleep(20 * time.Millisecond) // polling the store, not synchronisation
	}
	if _, err := e.h.Open(context.Background(), alice, id); !errors.Is(err, app.ErrUnknownHandle) {
		t.Fatalf("open of an expired handle: %v", err)
	}
	if got := metric(t, e, "expired"); got != 1 {
		t.Errorf("expired handles counted: %v", got)
	}
}

// metric is mcpgrain_handles_total{outcome}.
func metric(t *testing.T, e *env, outcome string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "mcpgrain_handles_total" && l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no mcpgrain_handles_total{outcome=%q}", outcome)
	return 0
}

func TestExpiry(t *testing.T) {
	const ttl = 10 * time.Hour
	for _, c := range []struct {
		name string
		used time.Time
		now  time.Time
		del  bool
		next time.Time
	}{
		{"fresh", t0, t0, false, t0.Add(ttl)},
		{"used since the reminder was set", t0, t0.Add(ttl - time.Second), false, t0.Add(ttl)},
		{"idle exactly the TTL", t0, t0.Add(ttl), true, time.Time{}},
		{"idle longer", t0, t0.Add(3 * ttl), true, time.Time{}},
		{"clock behind the use", t0, t0.Add(-time.Hour), false, t0.Add(ttl)},
	} {
		del, next := handle.Expiry(c.used, ttl, c.now)
		if del != c.del || !next.Equal(c.next) {
			t.Errorf("%s: Expiry = %v, %v; want %v, %v", c.name, del, next, c.del, c.next)
		}
	}
}

// call is one run of the test's schedule callback: what it got and the
// scope its ctx was bound to; noCall: its ctx has no tool call (Ask and
// Step answer app.ErrNoCall there).
type call struct {
	c      app.ScheduleCall
	kind   string
	id     string
	saved  bool
	noCall bool
}

// callback is the schedule callback "note": it fails while e.fail is
// positive; otherwise it saves the payload in the handle's state "notes"
// through its ctx (bound to the handle).
func (e *env) callback(ctx context.Context, c app.ScheduleCall) error {
	sc, err := app.ScopeOf(ctx)
	if err != nil {
		return err
	}
	_, cerr := app.CallOf(ctx)
	got := call{c: c, kind: sc.Kind(), id: sc.ID(), noCall: errors.Is(cerr, app.ErrNoCall)}
	defer func() { e.calls <- got }()
	if e.fail.Add(-1) >= 0 {
		return errors.New("failing on purpose")
	}
	cur, _ := sc.State("notes")
	ok, err := sc.(app.ConditionalSaver).SaveStateIf(ctx, "notes", app.Saved{Version: 1, Value: c.Payload}, cur.Revision)
	got.saved = ok
	return err
}

func (e *env) nextCall() call {
	e.t.Helper()
	select {
	case c := <-e.calls:
		return c
	case <-time.After(20 * time.Second):
		e.t.Fatal("the schedule's callback did not run within 20s")
		return call{}
	}
}

// waitReminder waits until the handle's reminder name is due at due.
func (e *env) waitReminder(id, name string, due time.Time) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rs, err := e.st.Reminders(context.Background(), grain.Key(handle.KindName, id))
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range rs {
			if r.Name == name && r.DueAt.Equal(due) {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("reminder %s not due at %v within 20s: %+v", name, due, rs)
		}
		time.Sleep(20 * time.Millisecond) // polling the store, not synchronisation
	}
}

// A schedule on a handle runs its callback when due, bound to the handle
// (it saves the handle's state through its ctx); a failed run is retried
// after the backoff with the same key and the next attempt; the schedule
// is gone once completed; a cancelled one is gone at once. The callback's
// ctx carries no tool call: Ask and Step there are app.ErrNoCall.
func TestHandleSchedules(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	id := e.mint(alice)
	sch := e.open(alice, id).(app.Scheduler)
	key, err := sch.Schedule(ctx, app.Scheduled{Name: "note", Due: t0.Add(time.Hour), Payload: []byte(`["due"]`)})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := sch.Schedule(ctx, app.Scheduled{Key: key, Name: "note", Due: t0.Add(time.Minute)}); err != nil || again != key {
		t.Fatalf("a pending key again: %q %v", again, err)
	}
	if list, err := sch.Schedules(ctx); err != nil || len(list) != 1 || list[0].Key != key || !list[0].Due.Equal(t0.Add(time.Hour)) {
		t.Fatalf("listed %+v %v", list, err)
	}
	if _, err := sch.Schedule(ctx, app.Scheduled{Name: ""}); err == nil {
		t.Fatal("a schedule without a callback name was stored")
	}
	e.fail.Store(1)
	e.clk.Advance(time.Hour)
	first := e.nextCall()
	if first.c.Key != key || first.c.Attempt != 1 || first.kind != app.KindHandle || first.id != id || string(first.c.Payload) != `["due"]` || !first.noCall {
		t.Fatalf("first run: %+v", first)
	}
	e.waitReminder(id, "sdk/"+key, t0.Add(time.Hour+time.Second)) // the backoff after attempt 1
	e.clk.Advance(time.Second)
	second := e.nextCall()
	if second.c.Key != key || second.c.Attempt != 2 || !second.saved {
		t.Fatalf("second run: %+v", second)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(e.record(id).GetSchedules()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a completed schedule is still stored after 20s")
		}
		time.Sleep(20 * time.Millisecond) // polling the store, not synchronisation
	}
	if got := e.record(id).GetAppState()["notes"]; string(got.GetValue()) != `["due"]` {
		t.Fatalf("the callback's save: %v", got)
	}

	// Another principal's requests, straight to the grain, get one answer
	// and change nothing.
	for _, m := range []proto.Message{
		&pb.HandleSchedule{Principal: bob, Schedule: &pb.SdkSchedule{Name: "note", DueAtMs: t0.UnixMilli()}},
		&pb.HandleListSchedules{Principal: bob},
		&pb.HandleCancelSchedule{Principal: bob, Key: key},
		&pb.HandleSave{Principal: bob, Name: "notes", State: &pb.HandleState{Value: []byte(`["bob"]`)}, IfRevision: 1},
		&pb.HandleDrop{Principal: bob},
	} {
		r, err := e.req.Request(ctx, handle.KindName, id, m)
		if err != nil || !r.(*pb.HandleReply).GetUnknown() {
			t.Errorf("bob's %T: %v %v, want unknown", m, r, err)
		}
	}
	if rec := e.record(id); string(rec.GetAppState()["notes"].GetValue()) != `["due"]` || len(rec.GetSchedules()) != 0 {
		t.Fatalf("bob's requests changed the handle: %v", rec)
	}

	other, err := sch.Schedule(ctx, app.Scheduled{Name: "note", Due: t0.Add(5 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.CancelSchedule(ctx, other); err != nil {
		t.Fatal(err)
	}
	if list, err := sch.Schedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after cancel: %+v %v", list, err)
	}
	rs, err := e.st.Reminders(ctx, grain.Key(handle.KindName, id))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Name != "expire" {
			t.Errorf("reminder %s left after completion and cancel", r.Name)
		}
	}
}
