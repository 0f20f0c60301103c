package mcpruntime

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/mcpruntime/eventstore"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

func TestOverBudget(t *testing.T) {
	a := eventstore.EventBytes{Org: "acme", User: "alice", Bytes: 101}
	b := eventstore.EventBytes{Org: "acme", User: "bob", Bytes: 100}
	for _, c := range []struct {
		name   string
		budget int64
		want   []eventstore.EventBytes
	}{
		{"over the budget, and at it", 100, []eventstore.EventBytes{a}},
		{"within it", 101, nil},
		{"both over", 99, []eventstore.EventBytes{a, b}},
		{"no bound", 0, nil},
	} {
		if got := overBudget([]eventstore.EventBytes{a, b}, c.budget); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTrimTargetAndStoreCheck(t *testing.T) {
	for _, c := range []struct{ budget, target int64 }{{64 << 20, 56 << 20}, {800, 700}, {7, 7}} {
		if got := trimTarget(c.budget); got != c.target {
			t.Errorf("trimTarget(%d) = %d, want %d", c.budget, got, c.target)
		}
	}
	for _, c := range []struct {
		written, budget int64
		due             bool
	}{
		{31, 1024, false}, {32, 1024, true}, {1 << 20, 0, false}, {1, 10, true}, {0, 10, false},
	} {
		if got := storeCheckDue(c.written, c.budget); got != c.due {
			t.Errorf("storeCheckDue(%d, %d) = %v, want %v", c.written, c.budget, got, c.due)
		}
	}
}

// testStoreDSN opens a fresh SQLite store and returns its DSN as well.
func testStoreDSN(t *testing.T) (*eventstore.Store, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "e.db")
	return openStore(t, dsn), dsn
}

func openStore(t *testing.T, dsn string) *eventstore.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return eventstore.New(st)
}

// keptBytes measures, with SQL of its own on the store's database (not the
// store's counts), the data of the stored events of the sessions whose
// ids start with prefix ("" for all).
func keptBytes(t *testing.T, dsn, prefix string) int64 {
	t.Helper()
	driver, name := "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		driver, name = "sqlite", path
	}
	db, err := sql.Open(driver, name)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(`SELECT COALESCE(SUM(LENGTH(data)), 0) FROM mcp_events WHERE session LIKE $1`, prefix+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// writeSessions has p's sessions prefix-0 … prefix-(sessions-1) each log
// events events of size bytes on w, flushing after each; after, if set,
// runs after each flush.
func writeSessions(w *eventWriter, p *pb.Principal, prefix string, sessions, events, size int, after func()) error {
	ctx := context.Background()
	logs := make([]*eventLog, sessions)
	for i := range logs {
		logs[i] = w.newLog(fmt.Sprintf("%s-%d", prefix, i), p)
	}
	for e := range events {
		for _, l := range logs {
			if err := l.Append(ctx, "sdk", fmt.Sprint("stream-", e), []byte(strings.Repeat("e", size))); err != nil {
				return err
			}
			if err := w.flush(ctx); err != nil {
				return err
			}
			if after != nil {
				after()
			}
		}
	}
	for _, l := range logs {
		if err := l.close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// One principal's sessions, each well within its own budget, store no
// more together than the principal budget: its oldest events go first,
// whichever session holds them, and another principal's events stay.
func TestEventWriterKeepsEachPrincipalWithinItsBudget(t *testing.T) {
	st, dsn := testStoreDSN(t)
	const principal, event = 2000, 100
	w := testWriter(t, st, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20, principal: principal})
	bob := &pb.Principal{User: "bob", Org: "acme"}
	if err := writeSessions(w, bob, "bob", 2, 3, event, nil); err != nil {
		t.Fatal(err)
	}
	// Alice writes 20 × 5 events of 100 bytes: 10,000 bytes, 500 a session.
	err := writeSessions(w, alice, "alice", 20, 5, event, func() {
		if kept := keptBytes(t, dsn, "alice"); kept > principal {
			t.Fatalf("alice's sessions keep %d bytes, over the principal budget %d", kept, principal)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if kept := keptBytes(t, dsn, "alice"); kept < trimTarget(principal) {
		t.Fatalf("alice's sessions keep %d bytes, want at least %d (the newest)", kept, trimTarget(principal))
	}
	if kept := keptBytes(t, dsn, "bob"); kept != 2*3*event {
		t.Fatalf("bob's sessions keep %d bytes, want all %d", kept, 2*3*event)
	}
	// The newest round of every session of alice's is kept, the oldest gone.
	ctx := context.Background()
	if data, _, err := st.Events(ctx, "alice-19", "stream-4", -1); err != nil || len(data) != 1 {
		t.Fatalf("alice's newest event: %d %v", len(data), err)
	}
	if data, _, _ := st.Events(ctx, "alice-0", "stream-0", -1); len(data) != 0 {
		t.Fatal("alice's oldest event was kept")
	}
}

// What the store keeps for every principal together stays within the
// store budget: once a node has written a thirty-second of it, it looks,
// and trims the oldest events, whoever owns them.
func TestEventWriterKeepsTheStoreWithinItsBudget(t *testing.T) {
	st, dsn := testStoreDSN(t)
	const stored, event = 3200, 100
	w := testWriter(t, st, eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20, principal: 1 << 20, stored: stored})
	for i, u := range []string{"alice", "bob", "carol"} {
		p := &pb.Principal{User: u, Org: "acme"}
		err := writeSessions(w, p, u, 4, 5, event, func() {
			if kept := keptBytes(t, dsn, ""); kept > stored {
				t.Fatalf("principal %d: the store keeps %d bytes, over its budget %d", i, kept, stored)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if kept := keptBytes(t, dsn, ""); kept < trimTarget(stored) {
		t.Fatalf("the store keeps %d bytes, want at least %d", kept, trimTarget(stored))
	}
	if kept := keptBytes(t, dsn, "alice"); kept != 0 {
		t.Fatalf("alice's events, the oldest, keep %d bytes after 6,000 newer ones", kept)
	}
	if kept := keptBytes(t, dsn, "carol"); kept != 4*5*event {
		t.Fatalf("carol's events, the newest, keep %d bytes, want all %d", kept, 4*5*event)
	}
}

// Nodes sharing one Postgres write one principal's sessions at once: the
// store counts what they all write, so the principal stays within its
// budget (plus the flushes in flight), and another principal's events
// stay.
func TestEventBudgetsHoldAcrossNodesSharingAStore(t *testing.T) {
	dsn := testenv.Postgres(t)
	const principal, event, nodes = 4000, 100, 3
	bob := &pb.Principal{User: "bob", Org: "acme"}
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for n := range nodes {
		st := openStore(t, dsn)
		w := newEventWriter(st, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Real(),
			flushPolicy{window: time.Millisecond, events: maxGroupEvents, bytes: maxGroupBytes},
			eventLimits{memory: 1 << 20, maxEvent: 1 << 10, budget: 1 << 20, principal: principal}, nil)
		t.Cleanup(func() { _ = w.close(context.Background()) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if n == 0 {
				err = writeSessions(w, bob, "bob", 1, 4, event, nil)
			}
			if err == nil {
				err = writeSessions(w, alice, fmt.Sprint("alice-node", n), 5, 10, event, nil)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if kept := keptBytes(t, dsn, "alice"); kept > principal || kept < principal/2 {
		t.Fatalf("alice's sessions on %d nodes keep %d bytes, want at most the budget %d (and most of it)", nodes, kept, principal)
	}
	if kept := keptBytes(t, dsn, "bob"); kept != 4*event {
		t.Fatalf("bob's session keeps %d bytes, want all %d", kept, 4*event)
	}
}
