package handle_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A principal's handles are listed from the store's index — newest first,
// with when each was minted, last used and expires — and never another
// principal's (another user, the same user name in another org); a drop
// and an expiry take the handle off the list and out of the index in the
// transaction that deletes it; mcpgrain_live_handles counts the index,
// once per scrape at most and at most every 10 s. On SQLite and Postgres.
func TestHandleListAndLiveGauge(t *testing.T) {
	for _, s := range []struct {
		name string
		dsn  func(testing.TB) string
	}{
		{"sqlite", func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "h.db") }},
		{"postgres", testenv.Postgres},
	} {
		t.Run(s.name, func(t *testing.T) { testHandleList(t, s.dsn(t)) })
	}
}

func testHandleList(t *testing.T, dsn string) {
	const ttl = 30 * time.Hour
	e := newEnvOn(t, dsn, handle.Config{IdleTTL: ttl})
	ctx := context.Background()
	var a []string // alice's, oldest first
	for range 3 {
		a = append(a, e.mint(alice))
		e.clk.Advance(time.Minute)
	}
	b := e.mint(bob)
	twin := &pb.Principal{User: "alice", Org: "other", Role: "member"} // alice's name in another org
	mintedB := e.clk.Now()
	if got := e.live(); got != 4 {
		t.Fatalf("mcpgrain_live_handles = %v, want 4", got)
	}

	list := e.list(alice)
	if ids := idsOf(list); !slices.Equal(ids, []string{a[2], a[1], a[0]}) {
		t.Fatalf("alice's handles %v, want %v newest first", ids, a)
	}
	if h := list[2]; !h.Created.Equal(t0) || !h.LastUsed.Equal(t0) || !h.Expires.Equal(t0.Add(ttl)) {
		t.Fatalf("alice's first handle: %+v, want minted and used at %v, expiring after the TTL", h, t0)
	}
	if ids := idsOf(e.list(bob)); !slices.Equal(ids, []string{b}) {
		t.Fatalf("bob's handles %v, want only his own %s", ids, b)
	}
	if got := e.list(twin); len(got) != 0 {
		t.Fatalf("alice of another org lists %v", idsOf(got))
	}
	if _, err := e.h.List(ctx, &pb.Principal{}); err == nil {
		t.Fatal("a caller without a principal listed handles")
	}

	// A save moves the last use (and the expiry).
	e.clk.Advance(time.Hour)
	saved := e.clk.Now()
	if !saveIf(t, e.open(alice, a[0]), `["x"]`, 0) {
		t.Fatal("save refused")
	}
	if h := e.list(alice)[2]; h.ID != a[0] || !h.Created.Equal(t0) || !h.LastUsed.Equal(saved) || !h.Expires.Equal(saved.Add(ttl)) {
		t.Fatalf("after a save: %+v, want last used %v", h, saved)
	}

	// A drop takes it off; an expiry too (alice's other two and bob's
	// were not used since they were minted).
	if err := e.h.Drop(ctx, alice, a[1]); err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(e.list(alice)); !slices.Equal(ids, []string{a[2], a[0]}) {
		t.Fatalf("after a drop alice lists %v", ids)
	}
	e.clk.Advance(mintedB.Add(ttl).Sub(e.clk.Now()))
	deadline := time.Now().Add(20 * time.Second)
	for e.indexed() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s the index holds %d handles, want alice's saved one", e.indexed())
		}
		time.Sleep(20 * time.Millisecond) // polling the store, not synchronisation
	}
	if ids := idsOf(e.list(alice)); !slices.Equal(ids, []string{a[0]}) {
		t.Fatalf("after the expiries alice lists %v", ids)
	}
	if got := e.list(bob); len(got) != 0 {
		t.Fatalf("bob's expired handle is listed: %v", idsOf(got))
	}
	if got := e.live(); got != 1 {
		t.Fatalf("mcpgrain_live_handles = %v after drop and expiries, want 1", got)
	}
}

// A scrape counts the live handles once, and a scrape within 10 s of the
// last count reuses it: every node of a cluster reports the store's
// count, and a cluster's scrapes should not each count a large table.
func TestLiveHandlesCountedOncePerScrape(t *testing.T) {
	e := newEnv(t, 0)
	queries := 0
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(handle.NewLiveCollectorForTest(func(context.Context) (int64, error) {
		queries++
		return int64(queries), nil
	}, e.clk))
	value := func() float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(fams) != 1 || fams[0].GetName() != "mcpgrain_live_handles" {
			t.Fatalf("gathered %v", fams)
		}
		return fams[0].GetMetric()[0].GetGauge().GetValue()
	}
	if v := value(); v != 1 || queries != 1 {
		t.Fatalf("first scrape: %v after %d queries", v, queries)
	}
	e.clk.Advance(9 * time.Second)
	if v := value(); v != 1 || queries != 1 {
		t.Fatalf("a scrape 9 s later: %v after %d queries, want the count reused", v, queries)
	}
	e.clk.Advance(time.Second)
	if v := value(); v != 2 || queries != 2 {
		t.Fatalf("a scrape 10 s later: %v after %d queries, want a new count", v, queries)
	}
}

func (e *env) list(p *pb.Principal) []app.HandleInfo {
	e.t.Helper()
	l, err := e.h.List(context.Background(), p)
	if err != nil {
		e.t.Fatalf("list %s/%s: %v", p.GetOrg(), p.GetUser(), err)
	}
	return l
}

// live is mcpgrain_live_handles as a scrape reads it now, 10 s after the
// previous one (so it counts again).
func (e *env) live() float64 {
	e.t.Helper()
	e.clk.Advance(10 * time.Second)
	fams, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "mcpgrain_live_handles" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	e.t.Fatal("no mcpgrain_live_handles")
	return 0
}

// indexed counts the rows of the handles index.
func (e *env) indexed() int {
	e.t.Helper()
	var n int
	if err := e.st.DB().Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM handles`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func idsOf(l []app.HandleInfo) []string {
	var out []string
	for _, h := range l {
		out = append(out, h.ID)
	}
	return out
}

// BenchmarkHandleSave is one compare-and-set save of a handle's state
// (record, expire reminder and index row in one transaction), on SQLite
// and Postgres.
func BenchmarkHandleSave(b *testing.B) {
	for _, s := range []struct {
		name string
		dsn  func(testing.TB) string
	}{
		{"sqlite", func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "h.db") }},
		{"postgres", testenv.Postgres},
	} {
		b.Run(s.name, func(b *testing.B) {
			e := newEnvOn(b, s.dsn(b), handle.Config{})
			sc := e.open(alice, e.mint(alice))
			b.ResetTimer()
			for i := range b.N {
				ok, err := sc.(app.ConditionalSaver).SaveStateIf(context.Background(), "notes", app.Saved{Version: 1, Value: []byte(`["a note of some bytes"]`)}, uint64(i))
				if err != nil || !ok {
					b.Fatalf("save %d: %v %v", i, ok, err)
				}
			}
		})
	}
}
