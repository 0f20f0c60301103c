package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// dialect holds what differs between the SQL engines; the statements
// themselves are shared (both engines accept $N placeholders, ON CONFLICT and
// RETURNING).
type dialect struct {
	name string
	// blob is the column type for byte strings.
	blob string
	// lockMigrations serialises migration runs across processes inside tx.
	lockMigrations func(ctx context.Context, tx *sql.Tx) error
}

// sqlStore implements [Store] over database/sql.
type sqlStore struct {
	db  *sql.DB
	d   dialect
	now func() time.Time
}

var _ Store = (*sqlStore)(nil)

func (s *sqlStore) Acquire(ctx context.Context, grain, node string) (Ownership, error) {
	o, err := s.acquire(ctx, `
INSERT INTO grains (grain, owner_node, epoch, updated_at_ms) VALUES ($1, $2, 1, $3)
ON CONFLICT (grain) DO UPDATE SET owner_node = excluded.owner_node, epoch = grains.epoch + 1, updated_at_ms = excluded.updated_at_ms
RETURNING epoch, record, record IS NULL`, grain, node)
	if err != nil {
		return Ownership{}, fmt.Errorf("store: acquire %s for %s: %w", grain, node, err)
	}
	return o, nil
}

func (s *sqlStore) AcquireExisting(ctx context.Context, grain, node string) (Ownership, error) {
	o, err := s.acquire(ctx, `
UPDATE grains SET owner_node = $2, epoch = epoch + 1, updated_at_ms = $3 WHERE grain = $1
RETURNING epoch, record, record IS NULL`, grain, node)
	if errors.Is(err, sql.ErrNoRows) {
		return Ownership{}, fmt.Errorf("%w: grain %s", ErrNotFound, grain)
	}
	if err != nil {
		return Ownership{}, fmt.Errorf("store: acquire existing %s for %s: %w", grain, node, err)
	}
	return o, nil
}

// acquire runs an ownership-taking statement (arguments grain, node, now in
// ms; it returns epoch, record, record IS NULL) and builds the Ownership.
func (s *sqlStore) acquire(ctx context.Context, query, grain, node string) (Ownership, error) {
	now := s.now()
	var (
		epoch  int64
		record []byte
		null   bool
	)
	if err := s.db.QueryRowContext(ctx, query, grain, node, now.UnixMilli()).Scan(&epoch, &record, &null); err != nil {
		return Ownership{}, err
	}
	if !null && record == nil {
		record = []byte{}
	}
	return Ownership{Grain: grain, Owner: node, Epoch: uint64(epoch), Record: record, UpdatedAt: time.UnixMilli(now.UnixMilli())}, nil
}

func (s *sqlStore) Save(ctx context.Context, grain string, epoch uint64, record []byte) error {
	if record == nil {
		record = []byte{}
	}
	res, err := s.db.ExecContext(ctx, `UPDATE grains SET record = $1, updated_at_ms = $2 WHERE grain = $3 AND epoch = $4`,
		record, s.now().UnixMilli(), grain, int64(epoch))
	if err != nil {
		return fmt.Errorf("store: save %s at epoch %d: %w", grain, epoch, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) Release(ctx context.Context, grain string, epoch uint64) error {
	res, err := s.db.ExecContext(ctx, `UPDATE grains SET owner_node = '', updated_at_ms = $1 WHERE grain = $2 AND epoch = $3`,
		s.now().UnixMilli(), grain, int64(epoch))
	if err != nil {
		return fmt.Errorf("store: release %s at epoch %d: %w", grain, epoch, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) Delete(ctx context.Context, grain string, epoch uint64) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM grains WHERE grain = $1 AND epoch = $2`, grain, int64(epoch))
		if err != nil {
			return fmt.Errorf("store: delete %s at epoch %d: %w", grain, epoch, err)
		}
		if err := fencedResult(res, grain, epoch); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM reminders WHERE grain = $1`, grain); err != nil {
			return fmt.Errorf("store: delete reminders of %s: %w", grain, err)
		}
		return nil
	})
}

func fencedResult(res sql.Result, grain string, epoch uint64) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: rows affected for %s: %w", grain, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s epoch %d", ErrFenced, grain, epoch)
	}
	return nil
}

func (s *sqlStore) Load(ctx context.Context, grain string) (Ownership, error) {
	var (
		o       = Ownership{Grain: grain}
		epoch   int64
		updated int64
		null    bool
	)
	err := s.db.QueryRowContext(ctx, `SELECT owner_node, epoch, record, record IS NULL, updated_at_ms FROM grains WHERE grain = $1`, grain).
		Scan(&o.Owner, &epoch, &o.Record, &null, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Ownership{}, fmt.Errorf("%w: grain %s", ErrNotFound, grain)
	}
	if err != nil {
		return Ownership{}, fmt.Errorf("store: load %s: %w", grain, err)
	}
	o.Epoch, o.UpdatedAt = uint64(epoch), time.UnixMilli(updated)
	if !null && o.Record == nil {
		o.Record = []byte{} // SQLite reads an empty blob as nil
	}
	return o, nil
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: %s unreachable: %w", s.d.name, err)
	}
	return nil
}

func (s *sqlStore) Close() error { return s.db.Close() }
