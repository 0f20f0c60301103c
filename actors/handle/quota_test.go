package handle_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/actors/app"
	"github.com/mcpgrain/mcpgrain/actors/handle"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestQuotaAdd(t *testing.T) {
	now := t0.Add(time.Hour)
	old := now.Add(-handle.PendingGrace).UnixMilli()
	recent := now.Add(-handle.PendingGrace + time.Millisecond).UnixMilli()
	e := func(id string, at int64, pending bool) *pb.HandleQuotaEntry {
		return &pb.HandleQuotaEntry{Handle: id, AddedAtMs: at, Pending: pending}
	}
	for _, c := range []struct {
		name string
		live []*pb.HandleQuotaEntry
		cap  int
		ok   bool
		want []string // the handles afterwards
	}{
		{"empty", nil, 2, true, []string{"x"}},
		{"below the cap", []*pb.HandleQuotaEntry{e("a", old, false)}, 2, true, []string{"a", "x"}},
		{"at the cap", []*pb.HandleQuotaEntry{e("a", old, false), e("b", old, false)}, 2, false, []string{"a", "b"}},
		{"over the cap (lowered)", []*pb.HandleQuotaEntry{e("a", old, false), e("b", old, false), e("c", old, false)}, 2, false, []string{"a", "b", "c"}},
		{"counted already: a retry", []*pb.HandleQuotaEntry{e("a", old, false), e("x", recent, true)}, 2, true, []string{"a", "x"}},
		{"counted already at the cap", []*pb.HandleQuotaEntry{e("x", old, false), e("b", old, false)}, 2, true, []string{"x", "b"}},
		{"at the cap, an old pending one reclaimed", []*pb.HandleQuotaEntry{e("a", old, true), e("b", old, false)}, 2, true, []string{"b", "x"}},
		{"at the cap, a recent pending one kept", []*pb.HandleQuotaEntry{e("a", recent, true), e("b", old, false)}, 2, false, []string{"a", "b"}},
		{"below the cap, an old pending one kept", []*pb.HandleQuotaEntry{e("a", old, true)}, 2, true, []string{"a", "x"}},
		{"a cap of 0", nil, 0, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := proto.Clone(&pb.HandleQuotaRecord{Live: c.live})
			next, ok := handle.QuotaAdd(c.live, "x", c.cap, now)
			var got []string
			for _, n := range next {
				got = append(got, n.GetHandle())
			}
			if ok != c.ok || !slices.Equal(got, c.want) {
				t.Fatalf("QuotaAdd: %v %v, want %v %v", got, ok, c.want, c.ok)
			}
			if !proto.Equal(before, &pb.HandleQuotaRecord{Live: c.live}) {
				t.Fatal("QuotaAdd changed its input")
			}
			if i := slices.IndexFunc(next, func(n *pb.HandleQuotaEntry) bool { return n.GetHandle() == "x" }); ok && len(c.live) < len(next) && (!next[i].GetPending() || next[i].GetAddedAtMs() != now.UnixMilli()) {
				t.Fatalf("the added entry: %v", next[i])
			}
		})
	}
}

// quotaLive is the handles p's quota grain stores (nil: no row).
func (e *env) quotaLive(p *pb.Principal) []string {
	e.t.Helper()
	var rec pb.HandleQuotaRecord
	o, err := e.st.Load(context.Background(), grain.Key(handle.QuotaKindName, "4:acme/"+p.GetUser()))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	if err := proto.Unmarshal(o.Record, &rec); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, l := range rec.GetLive() {
		if l.GetPending() {
			e.t.Errorf("handle %s still pending after its mint", l.GetHandle())
		}
		out = append(out, l.GetHandle())
	}
	slices.Sort(out)
	return out
}

// The cap on a principal's live handles, on SQLite and on Postgres: a
// mint past it is refused before any handle is created (no row, counted
// refused); another principal at the same time mints as usual; a drop and
// an expiry make room; the quota's record holds exactly the live handles.
// A mint whose handle was counted but never created (the node died in
// between) is reclaimed at the cap once PendingGrace has passed.
func TestHandleQuota(t *testing.T) {
	for _, s := range []struct {
		name string
		dsn  func(testing.TB) string
	}{
		{"sqlite", func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "h.db") }},
		{"postgres", testenv.Postgres},
	} {
		t.Run(s.name, func(t *testing.T) { testHandleQuota(t, s.dsn(t)) })
	}
}

func testHandleQuota(t *testing.T, dsn string) {
	const ttl = 30 * time.Hour
	e := newEnvOn(t, dsn, handle.Config{IdleTTL: ttl, MaxPerPrincipal: 3})
	ctx := context.Background()
	first := e.mint(alice)
	e.clk.Advance(time.Hour)
	a := []string{first, e.mint(alice), e.mint(alice)}
	if _, err := e.h.Mint(ctx, alice); !errors.Is(err, app.ErrTooManyHandles) {
		t.Fatalf("alice's fourth handle: %v, want ErrTooManyHandles", err)
	}
	if got := metric(t, e, "refused"); got != 1 {
		t.Errorf("refused mints counted: %v", got)
	}
	if got := metric(t, e, "minted"); got != 3 {
		t.Fatalf("%v handles created after a refused mint, want 3", got)
	}
	// Bob is not affected by alice's cap.
	b := []string{e.mint(bob), e.mint(bob), e.mint(bob)}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if got := e.quotaLive(alice); !slices.Equal(got, sorted(a)) {
		t.Fatalf("alice's quota %v, want %v", got, a)
	}
	if got := e.quotaLive(bob); !slices.Equal(got, sorted(b)) {
		t.Fatalf("bob's quota %v, want %v", got, b)
	}
	// A drop makes room; so does an expiry (the first handle, idle since t0).
	if err := e.h.Drop(ctx, alice, a[1]); err != nil {
		t.Fatal(err)
	}
	fourth := e.mint(alice)
	e.open(alice, a[2]) // keeps them used
	e.open(alice, fourth)
	e.clk.Advance(ttl - 30*time.Minute) // past the first one's expiry only
	// The expiry uncounts the handle, then deletes its record (two
	// writes): wait for both, or a poll between them sees the record.
	deadline := time.Now().Add(20 * time.Second)
	for slices.Contains(e.quotaLive(alice), first) || e.record(first) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s the expired handle is counted %v, its record kept %v",
				slices.Contains(e.quotaLive(alice), first), e.record(first) != nil)
		}
		time.Sleep(20 * time.Millisecond) // polling the store, not synchronisation
	}
	e.mint(alice)

	// Bob at his cap: a count whose handle was never created (as if the
	// minting node died in between) holds his last slot until it is older
	// than PendingGrace, then it is reclaimed.
	if err := e.h.Drop(ctx, bob, b[0]); err != nil {
		t.Fatal(err)
	}
	r, err := e.req.Request(ctx, handle.QuotaKindName, "4:acme/bob", &pb.HandleQuotaAdd{Handle: "h_never_created", Cap: 3})
	if err != nil || r.(*pb.HandleQuotaReply).GetRefused() {
		t.Fatalf("a count for a mint that dies: %v %v", r, err)
	}
	if _, err := e.h.Mint(ctx, bob); !errors.Is(err, app.ErrTooManyHandles) {
		t.Fatalf("bob's mint with a fresh pending count: %v, want ErrTooManyHandles", err)
	}
	e.clk.Advance(handle.PendingGrace)
	e.mint(bob)
	if got := e.quotaLive(bob); len(got) != 3 || slices.Contains(got, "h_never_created") {
		t.Fatalf("bob's quota after the reclaim: %v", got)
	}
}
