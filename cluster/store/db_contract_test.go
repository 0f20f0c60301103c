package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// A domain's own SQL runs through store.DB: a write is one transaction
// (a statement before a failing fence is rolled back with it), fenced by
// the grain's epoch with Fence or FencedBy, and may take a cross-process
// lock.
func TestDomainWritesThroughDBAreAtomicAndFenced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s store.Store, dsn string) {
		ctx := context.Background()
		db := s.DB()
		want := "postgres"
		if strings.HasPrefix(dsn, "sqlite:") {
			want = "sqlite"
		}
		if db.Dialect() != want {
			t.Fatalf("dialect %q, want %q", db.Dialect(), want)
		}
		if err := db.Write(ctx, func(ctx context.Context, tx store.Querier) error {
			_, err := tx.ExecContext(ctx, `CREATE TABLE probe_rows (k TEXT PRIMARY KEY, v TEXT NOT NULL)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		old, _ := s.Acquire(ctx, "probe/db", "n1")
		cur, _ := s.Acquire(ctx, "probe/db", "n2")
		put := func(epoch uint64, k string) error {
			return db.Write(ctx, func(ctx context.Context, tx store.Querier) error {
				if err := db.Lock(ctx, tx, 0x70726f6265); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO probe_rows (k, v) VALUES ($1, 'x')`, k); err != nil {
					return err
				}
				return store.Fence(ctx, tx, "probe/db", epoch)
			})
		}
		if err := put(old.Epoch, "stale"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("a write at the superseded epoch: %v, want ErrFenced", err)
		}
		if err := put(cur.Epoch, "current"); err != nil {
			t.Fatalf("a write at the current epoch: %v", err)
		}
		putIfCurrent := func(epoch uint64, k string) error {
			return db.WriteOne(ctx, func(ctx context.Context, tx store.Querier) error {
				res, err := tx.ExecContext(ctx, `INSERT INTO probe_rows (k, v) SELECT $3, 'y' WHERE `+store.FencedBy, "probe/db", int64(epoch), k)
				if err != nil {
					return err
				}
				return store.CheckFenced(res, "probe/db", epoch)
			})
		}
		if err := putIfCurrent(old.Epoch, "stale-one"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("a fenced statement at the superseded epoch: %v, want ErrFenced", err)
		}
		if err := putIfCurrent(cur.Epoch, "current-one"); err != nil {
			t.Fatalf("a fenced statement at the current epoch: %v", err)
		}
		var keys []string
		rows, err := db.Reader().QueryContext(ctx, `SELECT k FROM probe_rows ORDER BY k`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		if err := rows.Err(); err != nil || len(keys) != 2 || keys[0] != "current" || keys[1] != "current-one" {
			t.Fatalf("stored %q (%v), want only the current epoch's rows", keys, err)
		}
	})
}
