package store_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv"
)

// backends lists every Store implementation; each contract test runs on all.
func backends(t *testing.T) map[string]func(t *testing.T) (store.Store, string) {
	return map[string]func(t *testing.T) (store.Store, string){
		"sqlite": func(t *testing.T) (store.Store, string) {
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "mcpgrain.db")
			return open(t, dsn), dsn
		},
		"postgres": func(t *testing.T) (store.Store, string) {
			dsn := testenv.Postgres(t)
			return open(t, dsn), dsn
		},
	}
}

func open(t *testing.T, dsn string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func forEachBackend(t *testing.T, fn func(t *testing.T, s store.Store, dsn string)) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s, dsn := mk(t)
			fn(t, s, dsn)
		})
	}
}

func TestAcquireStartsAtEpochOneAndIncrements(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, err := s.Acquire(ctx, "probe/a", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if o.Epoch != 1 || o.Owner != "n1" || o.Record != nil {
			t.Fatalf("first acquire = %+v, want epoch 1 owner n1 no record", o)
		}
		o2, err := s.Acquire(ctx, "probe/a", "n2")
		if err != nil {
			t.Fatal(err)
		}
		if o2.Epoch != 2 || o2.Owner != "n2" {
			t.Fatalf("second acquire = %+v, want epoch 2 owner n2", o2)
		}
		other, err := s.Acquire(ctx, "probe/b", "n1")
		if err != nil || other.Epoch != 1 {
			t.Fatalf("other grain acquire = %+v, %v; want independent epoch 1", other, err)
		}
	})
}

func TestAcquireExistingWritesNothingForAMissingGrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		if _, err := s.AcquireExisting(ctx, "session/guess", "n1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing grain: %v, want ErrNotFound", err)
		}
		if _, err := s.Load(ctx, "session/guess"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("AcquireExisting of a missing grain wrote a row: %v", err)
		}
		if _, err := s.Acquire(ctx, "session/real", "n1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(ctx, "session/real", 1, []byte("rec")); err != nil {
			t.Fatal(err)
		}
		o, err := s.AcquireExisting(ctx, "session/real", "n2")
		if err != nil || o.Epoch != 2 || o.Owner != "n2" || string(o.Record) != "rec" {
			t.Fatalf("existing grain: %+v %v, want epoch 2 owner n2 with its record", o, err)
		}
		if err := s.Save(ctx, "session/real", 1, []byte("stale")); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("the previous epoch still writes: %v", err)
		}
	})
}

func TestSaveIsFencedByEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		old, _ := s.Acquire(ctx, "probe/x", "n1")
		if err := s.Save(ctx, "probe/x", old.Epoch, []byte("v1")); err != nil {
			t.Fatalf("save at current epoch: %v", err)
		}
		cur, err := s.Acquire(ctx, "probe/x", "n2")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cur.Record, []byte("v1")) {
			t.Fatalf("new activation restored %q, want v1", cur.Record)
		}
		err = s.Save(ctx, "probe/x", old.Epoch, []byte("stale"))
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale save err = %v, want ErrFenced", err)
		}
		got, _ := s.Load(ctx, "probe/x")
		if !bytes.Equal(got.Record, []byte("v1")) || got.Epoch != cur.Epoch || got.Owner != "n2" {
			t.Fatalf("after stale save: %+v, want record v1 epoch %d owner n2", got, cur.Epoch)
		}
		if err := s.Save(ctx, "probe/x", cur.Epoch, []byte("v2")); err != nil {
			t.Fatalf("save at new epoch: %v", err)
		}
		got, _ = s.Load(ctx, "probe/x")
		if !bytes.Equal(got.Record, []byte("v2")) {
			t.Fatalf("record = %q, want v2", got.Record)
		}
	})
}

func TestSaveUnknownGrainIsFenced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		err := s.Save(context.Background(), "probe/never", 1, []byte("x"))
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("save without acquire err = %v, want ErrFenced", err)
		}
	})
}

func TestReleaseClearsOwnerOnlyAtCurrentEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		a, _ := s.Acquire(ctx, "probe/r", "n1")
		b, _ := s.Acquire(ctx, "probe/r", "n2")
		if err := s.Release(ctx, "probe/r", a.Epoch); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale release err = %v, want ErrFenced", err)
		}
		if got, _ := s.Load(ctx, "probe/r"); got.Owner != "n2" {
			t.Fatalf("stale release changed owner to %q", got.Owner)
		}
		if err := s.Release(ctx, "probe/r", b.Epoch); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Load(ctx, "probe/r")
		if got.Owner != "" || got.Epoch != b.Epoch {
			t.Fatalf("after release: %+v, want no owner, epoch kept", got)
		}
	})
}

func TestDeleteRemovesGrainAndRemindersOnlyAtCurrentEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		a, _ := s.Acquire(ctx, "probe/d", "n1")
		b, _ := s.Acquire(ctx, "probe/d", "n2")
		if _, err := s.RegisterReminders(ctx, "probe/d", b.Epoch, []store.Reminder{{Name: "r", DueAt: time.UnixMilli(1)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "probe/d", a.Epoch); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("stale delete err = %v, want ErrFenced", err)
		}
		if rs, _ := s.Reminders(ctx, "probe/d"); len(rs) != 1 {
			t.Fatalf("a stale delete dropped reminders: %v", rs)
		}
		if err := s.Delete(ctx, "probe/d", b.Epoch); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, "probe/d"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after delete: load err = %v, want ErrNotFound", err)
		}
		if rs, _ := s.Reminders(ctx, "probe/d"); len(rs) != 0 {
			t.Fatalf("after delete: reminders %v", rs)
		}
		if err := s.Save(ctx, "probe/d", b.Epoch, []byte("x")); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("save after delete err = %v, want ErrFenced", err)
		}
	})
}

func TestLoadMissingIsNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		_, err := s.Load(context.Background(), "probe/missing")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestRecordRoundTripsBinaryAndEmpty(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		o, _ := s.Acquire(ctx, "probe/bin", "n1")
		big := make([]byte, 1<<20)
		for i := range big {
			big[i] = byte(i * 7)
		}
		for _, rec := range [][]byte{{0, 1, 2, 255, 0}, big, {}} {
			if err := s.Save(ctx, "probe/bin", o.Epoch, rec); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load(ctx, "probe/bin")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Record, rec) || got.Record == nil {
				t.Fatalf("record round trip of %d bytes failed (got %d bytes, nil=%v)", len(rec), len(got.Record), got.Record == nil)
			}
		}
	})
}

// Concurrent activations (duplicates racing) each get a distinct epoch and
// only the newest may write.
func TestConcurrentAcquireYieldsUniqueEpochs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, _ string) {
		ctx := context.Background()
		const n = 16
		epochs := make([]uint64, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, err := s.Acquire(ctx, "probe/race", "n")
				epochs[i], errs[i] = o.Epoch, err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		sort.Slice(epochs, func(i, j int) bool { return epochs[i] < epochs[j] })
		for i, e := range epochs {
			if e != uint64(i+1) {
				t.Fatalf("epochs = %v, want 1..%d each once", epochs, n)
			}
		}
		for _, e := range epochs[:n-1] {
			if err := s.Save(ctx, "probe/race", e, []byte("x")); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("save at superseded epoch %d: %v, want ErrFenced", e, err)
			}
		}
		if err := s.Save(ctx, "probe/race", epochs[n-1], []byte("x")); err != nil {
			t.Fatalf("save at newest epoch: %v", err)
		}
	})
}

// Reopening a migrated database, or opening it from several processes at
// once, must neither fail nor lose data.
func TestMigrationsAreIdempotentAndConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, dsn string) {
		ctx := context.Background()
		o, _ := s.Acquire(ctx, "probe/m", "n1")
		if err := s.Save(ctx, "probe/m", o.Epoch, []byte("kept")); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s2, err := store.Open(ctx, dsn)
				if err != nil {
					errs <- err
					return
				}
				errs <- s2.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
		}
		got, err := s.Load(ctx, "probe/m")
		if err != nil || string(got.Record) != "kept" {
			t.Fatalf("after reopen: %+v %v", got, err)
		}
	})
}

func TestOpenRejectsUnknownDSNWithoutLeakingPassword(t *testing.T) {
	_, err := store.Open(context.Background(), "mysql://u:secret@h/db")
	if err == nil {
		t.Fatal("want error for unsupported DSN")
	}
	if bytes.Contains([]byte(err.Error()), []byte("secret")) {
		t.Fatalf("error leaks password: %v", err)
	}
}

func TestOpenPostgresUnreachableSaysWhatToFix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	_, err := store.Open(ctx, "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2")
	if err == nil {
		t.Fatal("want error for unreachable postgres")
	}
	msg := err.Error()
	if bytes.Contains([]byte(msg), []byte("hunter2")) {
		t.Fatalf("error leaks password: %v", err)
	}
	if !bytes.Contains([]byte(msg), []byte("cannot reach postgres")) {
		t.Fatalf("error should say postgres is unreachable: %v", err)
	}
}
