package eventstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

// stepClock is a store clock that moves one second each time it is
// read: every write of the test is stored at its own time.
func stepClock() func() time.Time {
	var t atomic.Int64
	t.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	return func() time.Time { return time.Unix(t.Add(1), 0) }
}

// rawEventBytes measures, with SQL of its own on the store's database, the
// data the stored events matching where hold (not the store's counts).
func rawEventBytes(t *testing.T, dsn, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := storetest.RawDB(t, dsn).QueryRow(`SELECT COALESCE(SUM(LENGTH(data)), 0) FROM mcp_events `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func events(org, user, session string, from, n, size int) []eventstore.Event {
	var evs []eventstore.Event
	for i := from; i < from+n; i++ {
		evs = append(evs, eventstore.Event{Session: session, Stream: "a", Index: i, Data: []byte(strings.Repeat("x", size)), Org: org, User: user})
	}
	return evs
}

func mustAppend(t *testing.T, s *eventstore.Store, evs []eventstore.Event) []eventstore.EventBytes {
	t.Helper()
	totals, err := s.AppendEvents(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	return totals
}

func usage(t *testing.T, s *eventstore.Store) eventstore.EventUsage {
	t.Helper()
	u, err := s.EventUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// The store counts each principal's bytes as its events are stored and
// dropped, whichever way they go: AppendEvents returns the totals of the
// principals it wrote for, an event already stored adds nothing, and
// trims, deletes and prunes take off what they drop.
func TestEventLogCountsEachPrincipalsBytes(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, dsn string) {
		s := eventstore.New(st)
		ctx := context.Background()
		totals := mustAppend(t, s, append(events("acme", "alice", "s1", 0, 3, 10), events("acme", "bob", "s2", 0, 1, 7)...))
		want := map[string]int64{"alice": 30, "bob": 7}
		if len(totals) != 2 || totals[0].Bytes != want[totals[0].User] || totals[1].Bytes != want[totals[1].User] || totals[0].Org != "acme" {
			t.Fatalf("totals after the first append: %+v, want alice 30 and bob 7", totals)
		}
		// A retried flush: the stored event stays, nothing is counted twice.
		if totals := mustAppend(t, s, events("acme", "alice", "s1", 2, 1, 99)); len(totals) != 0 {
			t.Fatalf("re-appending a stored event counted %+v", totals)
		}
		if totals := mustAppend(t, s, events("acme", "alice", "s1", 3, 1, 5)); len(totals) != 1 || totals[0].Bytes != 35 {
			t.Fatalf("totals after one more event: %+v, want alice 35", totals)
		}
		if u := usage(t, s); u != (eventstore.EventUsage{Bytes: 42, Principals: 2, LargestPrincipal: 35}) {
			t.Fatalf("usage %+v, want 42 bytes, 2 principals, largest 35", u)
		}
		if n, err := s.TrimEvents(ctx, "s1", 15); err != nil || n != 2 {
			t.Fatalf("trim s1: %d %v, want 2 dropped", n, err)
		}
		if u := usage(t, s); u.Bytes != 22 || u.Bytes != rawEventBytes(t, dsn, "") {
			t.Fatalf("usage after the trim %+v, want 22 bytes as stored (%d)", u, rawEventBytes(t, dsn, ""))
		}
		if err := s.DeleteEvents(ctx, "s2"); err != nil {
			t.Fatal(err)
		}
		if u := usage(t, s); u != (eventstore.EventUsage{Bytes: 15, Principals: 1, LargestPrincipal: 15}) {
			t.Fatalf("usage after deleting bob's session %+v, want alice's 15 bytes only", u)
		}
		if _, err := s.PruneEvents(ctx, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if u := usage(t, s); u != (eventstore.EventUsage{}) {
			t.Fatalf("usage after pruning everything %+v, want none", u)
		}
		if totals := mustAppend(t, s, events("acme", "alice", "s1", 10, 1, 4)); len(totals) != 1 || totals[0].Bytes != 4 {
			t.Fatalf("counting starts again after the prune: %+v, want alice 4", totals)
		}
	})
}

// TrimPrincipalEvents drops a principal's oldest events first, across its
// sessions, until it keeps the budget; other principals' events stay.
func TestEventLogTrimsAPrincipalOldestFirstAcrossSessions(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, dsn string) {
		s := eventstore.New(st)
		ctx := context.Background()
		eventstore.SetClock(s, stepClock())
		mustAppend(t, s, events("acme", "bob", "b1", 0, 1, 10)) // the oldest of all
		mustAppend(t, s, events("acme", "alice", "a1", 0, 4, 10))
		mustAppend(t, s, events("acme", "alice", "a2", 0, 4, 10))
		mustAppend(t, s, events("acme", "alice", "a1", 4, 2, 10))
		mustAppend(t, s, events("globex", "alice", "g1", 0, 1, 10)) // another org's alice
		if n, err := s.TrimPrincipalEvents(ctx, "acme", "alice", 100); err != nil || n != 0 {
			t.Fatalf("trim within the budget: %d %v", n, err)
		}
		// 100 bytes kept, 55 allowed: a1's first four go, then a2's first.
		if n, err := s.TrimPrincipalEvents(ctx, "acme", "alice", 55); err != nil || n != 5 {
			t.Fatalf("trim to 55 bytes: %d dropped %v, want 5", n, err)
		}
		if got := rawEventBytes(t, dsn, "WHERE session IN ('a1', 'a2')"); got != 50 {
			t.Fatalf("alice's sessions hold %d bytes, want 50", got)
		}
		if data, last, err := s.Events(ctx, "a1", "a", 3); err != nil || last != 5 || len(data) != 2 {
			t.Fatalf("a1's newest events: %d, last %d, %v", len(data), last, err)
		}
		if _, _, err := s.Events(ctx, "a1", "a", -1); err == nil {
			t.Fatal("a resume of a1 from before the dropped events did not see the gap")
		}
		if data, _, err := s.Events(ctx, "a2", "a", 0); err != nil || len(data) != 3 {
			t.Fatalf("a2 after its first event: %d %v", len(data), err)
		}
		for _, other := range []string{"b1", "g1"} {
			if data, _, err := s.Events(ctx, other, "a", -1); err != nil || len(data) != 1 {
				t.Fatalf("trimming acme/alice touched %s: %d %v", other, len(data), err)
			}
		}
		if u := usage(t, s); u != (eventstore.EventUsage{Bytes: 70, Principals: 3, LargestPrincipal: 50}) {
			t.Fatalf("usage %+v, want 70 bytes of 3 principals, alice's 50 the largest", u)
		}
	})
}

// TrimStoredEvents drops the oldest events of the store, whoever owns
// them, and takes each off its principal's count; a trim larger than one
// step of the store takes several.
func TestEventLogTrimsTheStoreOldestFirst(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, dsn string) {
		s := eventstore.New(st)
		ctx := context.Background()
		eventstore.SetClock(s, stepClock())
		mustAppend(t, s, events("acme", "alice", "a1", 0, 2, 10))
		mustAppend(t, s, events("acme", "bob", "b1", 0, 2, 10))
		mustAppend(t, s, events("acme", "alice", "a1", 2, 2, 10))
		// 60 bytes kept, 25 allowed: alice's two, bob's two (the one that
		// crosses the budget goes too).
		if n, err := s.TrimStoredEvents(ctx, 25); err != nil || n != 4 {
			t.Fatalf("trim the store to 25 bytes: %d %v, want 4", n, err)
		}
		if u := usage(t, s); u != (eventstore.EventUsage{Bytes: 20, Principals: 1, LargestPrincipal: 20}) || rawEventBytes(t, dsn, "") != 20 {
			t.Fatalf("usage %+v, want alice's newest 20 bytes", u)
		}
		if data, _, err := s.Events(ctx, "a1", "a", 1); err != nil || len(data) != 2 {
			t.Fatalf("a1's newest: %d %v", len(data), err)
		}
		// Many small events: the trim takes several steps.
		for i := range 3 {
			mustAppend(t, s, events("acme", "carol", "c1", i*500, 500, 1))
		}
		if n, err := s.TrimStoredEvents(ctx, 100); err != nil || n != 1402 {
			t.Fatalf("trim 1,520 bytes to 100: %d %v, want 1,402 (alice's 2, then carol's oldest)", n, err)
		}
		if u := usage(t, s); u.Bytes != 100 || rawEventBytes(t, dsn, "") != 100 {
			t.Fatalf("usage %+v and %d stored, want 100", u, rawEventBytes(t, dsn, ""))
		}
	})
}

// Several nodes write and trim one principal's sessions in one store at
// once: the store's count stays what the events hold, and the last trim
// leaves the principal within its budget.
func TestEventLogBudgetHoldsAcrossNodesSharingAStore(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, dsn string) {
		s := eventstore.New(st)
		const budget = 2000
		nodes := []*eventstore.Store{s, eventstore.New(storetest.Open(t, dsn))}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for n, st := range nodes {
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					session := fmt.Sprintf("n%d-s%d", n, g)
					for i := range 30 {
						totals, err := st.AppendEvents(ctx, append(events("acme", "alice", session, 2*i, 2, 40+g), events("acme", "bob", session+"-bob", i, 1, 3)...))
						if err == nil {
							for _, tot := range totals {
								if tot.User == "alice" && tot.Bytes > budget {
									_, err = st.TrimPrincipalEvents(ctx, "acme", "alice", budget)
								}
							}
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		alice := rawEventBytes(t, dsn, "WHERE org = 'acme' AND user_id = 'alice'")
		bob := rawEventBytes(t, dsn, "WHERE org = 'acme' AND user_id = 'bob'")
		if alice > budget || alice < budget/2 {
			t.Fatalf("alice keeps %d bytes, want at most the budget %d (and most of it)", alice, budget)
		}
		if bob != 8*30*3 {
			t.Fatalf("bob keeps %d bytes, want all %d", bob, 8*30*3)
		}
		if u := usage(t, s); u.Bytes != alice+bob || u.LargestPrincipal != alice {
			t.Fatalf("the store counts %+v, its events hold %d (alice %d)", u, alice+bob, alice)
		}
	})
}

// Events dropped without the store's counting (by a node of an older
// version during a rolling upgrade) leave a count higher than the events
// hold. A trim then counts again rather than dropping every event left.
func TestEventLogTrimsCountAgainWhatOthersDropped(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, dsn string) {
		s := eventstore.New(st)
		ctx := context.Background()
		mustAppend(t, s, events("acme", "alice", "a1", 0, 10, 10))
		mustAppend(t, s, events("acme", "bob", "b1", 0, 2, 10))
		// As an older node's prune: no count changes.
		if _, err := storetest.RawDB(t, dsn).Exec(`DELETE FROM mcp_events WHERE session = 'a1' AND idx < 6`); err != nil {
			t.Fatal(err)
		}
		if n, err := s.TrimPrincipalEvents(ctx, "acme", "alice", 50); err != nil || n != 0 {
			t.Fatalf("trim alice (counted 100, holding 40) to 50: %d dropped, %v; want none", n, err)
		}
		if got := rawEventBytes(t, dsn, "WHERE session = 'a1'"); got != 40 {
			t.Fatalf("alice's events hold %d bytes, want the 40 left", got)
		}
		if u := usage(t, s); u.Bytes != 60 || u.LargestPrincipal != 40 {
			t.Fatalf("usage %+v, want 60 bytes, alice's 40 the largest", u)
		}
		// The store's count, likewise: it counts 60 (alice 40, bob 20),
		// the events hold 40; trimmed to 15, the three oldest go.
		if _, err := storetest.RawDB(t, dsn).Exec(`DELETE FROM mcp_events WHERE session = 'b1'`); err != nil {
			t.Fatal(err)
		}
		if n, err := s.TrimStoredEvents(ctx, 15); err != nil || n != 3 {
			t.Fatalf("trim the store (counted 60, holding 40) to 15: %d dropped, %v; want 3", n, err)
		}
		if u := usage(t, s); u.Bytes != 10 || rawEventBytes(t, dsn, "") != 10 {
			t.Fatalf("usage %+v, want the 10 bytes stored", u)
		}
		// A principal without events keeps no count after a prune.
		mustAppend(t, s, events("acme", "carol", "c1", 0, 1, 10))
		if _, err := storetest.RawDB(t, dsn).Exec(`DELETE FROM mcp_events WHERE session = 'c1'`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PruneEvents(ctx, time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if u := usage(t, s); u != (eventstore.EventUsage{Bytes: 10, Principals: 1, LargestPrincipal: 10}) {
			t.Fatalf("usage after the prune %+v, want alice's 10 bytes only", u)
		}
	})
}
