package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
	db  *sql.DB // reads; Postgres' writes too
	rd  querier // reads: db, through a statement cache for SQLite
	w   *committer
	d   dialect
	now func() time.Time
}

// write runs fn's statements atomically: in SQLite's single writer (group
// commit, see committer), or in a Postgres transaction.
func (s *sqlStore) write(ctx context.Context, fn writeFunc) error {
	if s.w != nil {
		return s.w.do(ctx, fn)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx) })
}

// writeOne is write for fn that runs a single statement: Postgres runs it
// without an explicit transaction (one round trip instead of three).
func (s *sqlStore) writeOne(ctx context.Context, fn writeFunc) error {
	if s.w != nil {
		return s.w.do(ctx, fn)
	}
	return fn(ctx, s.db)
}

var _ Store = (*sqlStore)(nil)

// acquireQuery takes ownership of a grain, creating its row at epoch 1.
const acquireQuery = `
INSERT INTO grains (grain, owner_node, epoch, updated_at_ms) VALUES ($1, $2, 1, $3)
ON CONFLICT (grain) DO UPDATE SET owner_node = excluded.owner_node, epoch = grains.epoch + 1, updated_at_ms = excluded.updated_at_ms
RETURNING epoch, record, record IS NULL`

func (s *sqlStore) Acquire(ctx context.Context, grain, node string) (Ownership, error) {
	o, err := s.acquire(ctx, acquireQuery, grain, node)
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
func (s *sqlStore) acquire(ctx context.Context, query, grain, node string) (o Ownership, err error) {
	err = s.writeOne(ctx, func(ctx context.Context, q querier) error {
		o, err = acquireIn(ctx, q, query, grain, node, s.now())
		return err
	})
	return o, err
}

// acquireIn runs an ownership-taking statement on q.
func acquireIn(ctx context.Context, q querier, query, grain, node string, now time.Time) (Ownership, error) {
	var (
		epoch  int64
		record []byte
		null   bool
	)
	if err := q.QueryRowContext(ctx, query, grain, node, now.UnixMilli()).Scan(&epoch, &record, &null); err != nil {
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
	return s.writeOne(ctx, func(ctx context.Context, q querier) error { return saveIn(ctx, q, grain, epoch, record, s.now()) })
}

// saveIn replaces grain's record on q, fenced by epoch.
func saveIn(ctx context.Context, q querier, grain string, epoch uint64, record []byte, now time.Time) error {
	res, err := q.ExecContext(ctx, `UPDATE grains SET record = $1, updated_at_ms = $2 WHERE grain = $3 AND epoch = $4`,
		record, now.UnixMilli(), grain, int64(epoch))
	if err != nil {
		return fmt.Errorf("store: save %s at epoch %d: %w", grain, epoch, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) Apply(ctx context.Context, grain string, epoch uint64, w Writes) ([]Reminder, error) {
	if err := checkReminders(w.SetReminders); err != nil {
		return nil, err
	}
	now := s.now()
	if shape := foldable(s.d, w); shape != "" {
		return s.applyFolded(ctx, shape, grain, epoch, w, now)
	}
	var stored []Reminder
	write := s.write
	if rowOnly(w) {
		// One fenced statement is atomic alone: on Postgres, no
		// transaction around it (one round trip instead of three).
		write = s.writeOne
	}
	err := write(ctx, func(ctx context.Context, q querier) error {
		var err error
		stored, err = applyIn(ctx, q, grain, epoch, w, now)
		return err
	})
	return stored, err
}

// rowOnly reports whether w changes nothing but the grain's row (record,
// owner), which applyIn writes in one statement.
func rowOnly(w Writes) bool {
	return len(w.SetReminders) == 0 && len(w.CancelReminders) == 0 && !w.CancelOtherReminders && len(w.Also) == 0
}

func (s *sqlStore) Create(ctx context.Context, grain, node string, w Writes) (Ownership, []Reminder, error) {
	if err := checkReminders(w.SetReminders); err != nil {
		return Ownership{}, nil, err
	}
	now := s.now()
	var (
		o      Ownership
		stored []Reminder
	)
	if createFoldable(s.d, w) {
		return s.createFolded(ctx, grain, node, w, now)
	}
	write := s.write
	if rowOnly(w) && !w.Release {
		write = s.writeOne // createQuery alone
	}
	err := write(ctx, func(ctx context.Context, q querier) error {
		var err error
		if o, err = createIn(ctx, q, grain, node, w.Record, now); err != nil {
			return err
		}
		// The record is written and the row locked at the new epoch
		// until the transaction ends: the rest of w needs no fence.
		if w.Release {
			if err := releaseIn(ctx, q, grain, o.Epoch, now); err != nil {
				return err
			}
		}
		if stored, err = remindersIn(ctx, q, grain, w, now); err != nil {
			return err
		}
		return alsoIn(ctx, q, grain, o.Epoch, w)
	})
	if err != nil {
		return Ownership{}, nil, err
	}
	return o, stored, nil
}

// createQuery takes ownership of a grain that has no record (creating its
// row at epoch 1) and writes its first record, in one statement. A grain
// with a record is left as it is, and the statement returns no row.
const createQuery = `
INSERT INTO grains (grain, owner_node, epoch, record, updated_at_ms) VALUES ($1, $2, 1, $4, $3)
ON CONFLICT (grain) DO UPDATE SET owner_node = excluded.owner_node, epoch = grains.epoch + 1, record = excluded.record, updated_at_ms = excluded.updated_at_ms
WHERE grains.record IS NULL
RETURNING epoch`

// createIn runs createQuery on q: the grain owned by node at a new epoch
// with record, or [ErrFenced] and nothing changed if it has a record.
func createIn(ctx context.Context, q querier, grain, node string, record []byte, now time.Time) (Ownership, error) {
	var epoch int64
	err := q.QueryRowContext(ctx, createQuery, grain, node, now.UnixMilli(), record).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return Ownership{}, fmt.Errorf("%w: %s was created by another activation", ErrFenced, grain)
	}
	if err != nil {
		return Ownership{}, fmt.Errorf("store: create %s for %s: %w", grain, node, err)
	}
	return Ownership{Grain: grain, Owner: node, Epoch: uint64(epoch), Record: record, UpdatedAt: time.UnixMilli(now.UnixMilli())}, nil
}

// applyIn applies w to grain on q, fenced by epoch.
func applyIn(ctx context.Context, q querier, grain string, epoch uint64, w Writes, now time.Time) ([]Reminder, error) {
	if err := rowIn(ctx, q, grain, epoch, w, now); err != nil {
		return nil, err
	}
	stored, err := remindersIn(ctx, q, grain, w, now)
	if err != nil {
		return nil, err
	}
	if err := alsoIn(ctx, q, grain, epoch, w); err != nil {
		return nil, err
	}
	return stored, nil
}

// alsoFence is the CTE f of a domain statement in a transaction whose
// grain's row was written (or fenced) before it: the grain's key while
// epoch is current.
const alsoFence = `WITH f AS (SELECT grain FROM grains WHERE grain = $1 AND epoch = $2) `

// alsoIn runs w's domain statements on q (after the grain's own writes,
// which fenced the transaction).
func alsoIn(ctx context.Context, q querier, grain string, epoch uint64, w Writes) error {
	for _, st := range w.Also {
		if _, err := q.ExecContext(ctx, alsoFence+st.SQL, append([]any{grain, int64(epoch)}, st.Args...)...); err != nil {
			return fmt.Errorf("store: a step's statement for %s at epoch %d: %w", grain, epoch, err)
		}
	}
	return nil
}

// remindersIn applies w's reminder changes to grain on q (fenced by the
// caller).
func remindersIn(ctx context.Context, q querier, grain string, w Writes, now time.Time) ([]Reminder, error) {
	var cancel []string
	for _, n := range w.CancelReminders {
		if !slices.ContainsFunc(w.SetReminders, func(r Reminder) bool { return r.Name == n }) {
			cancel = append(cancel, n)
		}
	}
	if err := cancelIn(ctx, q, grain, cancel); err != nil {
		return nil, err
	}
	if w.CancelOtherReminders {
		if err := cancelOthersIn(ctx, q, grain, w.SetReminders); err != nil {
			return nil, err
		}
	}
	if len(w.SetReminders) == 0 {
		return nil, nil
	}
	// Versions start from the clock in nanoseconds and only grow (see
	// RegisterReminders).
	return registerIn(ctx, q, grain, w.SetReminders, now.UnixNano())
}

// rowIn writes w's change to grain's row on q in one statement fenced by
// epoch — the record, the release, both, or neither (then it only fences).
func rowIn(ctx context.Context, q querier, grain string, epoch uint64, w Writes, now time.Time) error {
	switch {
	case w.Record != nil && w.Release:
		res, err := q.ExecContext(ctx, `UPDATE grains SET record = $1, owner_node = '', updated_at_ms = $2 WHERE grain = $3 AND epoch = $4`,
			w.Record, now.UnixMilli(), grain, int64(epoch))
		if err != nil {
			return fmt.Errorf("store: save and release %s at epoch %d: %w", grain, epoch, err)
		}
		return fencedResult(res, grain, epoch)
	case w.Record != nil:
		return saveIn(ctx, q, grain, epoch, w.Record, now)
	case w.Release:
		return releaseIn(ctx, q, grain, epoch, now)
	default:
		return fence(ctx, q, grain, epoch)
	}
}

func (s *sqlStore) Release(ctx context.Context, grain string, epoch uint64) error {
	return s.writeOne(ctx, func(ctx context.Context, q querier) error { return releaseIn(ctx, q, grain, epoch, s.now()) })
}

// releaseIn clears grain's owner on q, fenced by epoch.
func releaseIn(ctx context.Context, q querier, grain string, epoch uint64, now time.Time) error {
	res, err := q.ExecContext(ctx, `UPDATE grains SET owner_node = '', updated_at_ms = $1 WHERE grain = $2 AND epoch = $3`,
		now.UnixMilli(), grain, int64(epoch))
	if err != nil {
		return fmt.Errorf("store: release %s at epoch %d: %w", grain, epoch, err)
	}
	return fencedResult(res, grain, epoch)
}

func (s *sqlStore) Delete(ctx context.Context, grain string, epoch uint64) error {
	return s.write(ctx, func(ctx context.Context, tx querier) error {
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
	err := s.rd.QueryRowContext(ctx, `SELECT owner_node, epoch, record, record IS NULL, updated_at_ms FROM grains WHERE grain = $1`, grain).
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

func (s *sqlStore) DB() *DB { return &DB{s: s} }

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: %s unreachable: %w", s.d.name, err)
	}
	return nil
}

func (s *sqlStore) Close() error {
	var err error
	if s.w != nil {
		err = s.w.close()
	}
	if c, ok := s.rd.(cachedDB); ok {
		c.c.close()
	}
	return errors.Join(err, s.db.Close())
}
