package engine_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// outageStore fails the first writes the way a store that is restarting
// does. This is injected (not a real outage) because the moment a journal
// write runs cannot be lined up with a real database restart in a unit
// test; the chaos harness's "postgres" round restarts a real Postgres
// under load (docs/reliability.md).
type outageStore struct {
	engine.RunStore
	fail  int   // writes still to fail
	with  error // what they fail with
	hang  bool  // writes wait for their context to end (a store that does not answer)
	calls int
}

func (s *outageStore) WriteRun(ctx context.Context, grain string, epoch uint64, w runstore.RunWrite) error {
	s.calls++
	if s.hang {
		<-ctx.Done()
		return fmt.Errorf("store: write run %s: %w", w.RunID, ctx.Err())
	}
	if s.fail > 0 {
		s.fail--
		return fmt.Errorf("store: write run %s: %w", w.RunID, s.with)
	}
	return s.RunStore.WriteRun(ctx, grain, epoch, w)
}

func TestStoreJournalRidesOutAStoreOutage(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	own, err := st.Acquire(context.Background(), "session/s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	run := runstore.Run{ID: "run-1", Session: "s1", Code: "return 1", Spec: `{}`, Created: time.UnixMilli(1)}

	// Unavailable three times, then back: the write lands.
	s := &outageStore{RunStore: runstore.New(st), fail: 3, with: driver.ErrBadConn}
	j := engine.StoreJournal{Store: s, Grain: own.Grain, Epoch: own.Epoch}
	if err := j.Write(context.Background(), engine.JournalWrite{RunID: run.ID, Run: &run}); err != nil || s.calls != 4 {
		t.Fatalf("through a short outage: %v after %d attempts, want success after 4", err, s.calls)
	}
	if got, _, err := runstore.New(st).GetRun(context.Background(), "run-1"); err != nil || got.Code != "return 1" {
		t.Fatalf("run not written: %+v %v", got, err)
	}

	// An error that is not an outage is not retried.
	s = &outageStore{RunStore: runstore.New(st), fail: 1, with: store.ErrFenced}
	j.Store = s
	if err := j.Write(context.Background(), engine.JournalWrite{RunID: run.ID, Run: &run}); !errors.Is(err, store.ErrFenced) || s.calls != 1 {
		t.Fatalf("fenced write: %v after %d attempts, want ErrFenced at once", err, s.calls)
	}

	// An outage that outlasts the caller's deadline returns its error.
	s = &outageStore{RunStore: runstore.New(st), fail: 1 << 30, with: driver.ErrBadConn}
	j.Store = s
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := j.Write(ctx, engine.JournalWrite{RunID: run.ID, Run: &run}); !store.Unavailable(err) || s.calls < 2 {
		t.Fatalf("long outage: %v after %d attempts, want the outage error after retries", err, s.calls)
	}

	// A store that does not answer before the journal's deadline is
	// unavailable too (a plain deadline error read as an internal failure,
	// and the client was not told to retry: CI chaos, Postgres round).
	s = &outageStore{RunStore: runstore.New(st), hang: true}
	j.Store = s
	hctx, hcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer hcancel()
	if err := j.Write(hctx, engine.JournalWrite{RunID: run.ID, Run: &run}); !store.Unavailable(err) {
		t.Fatalf("hung store: %v, want an unavailable error", err)
	}
}
