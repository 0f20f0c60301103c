package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Migration is one schema step. Statements are shared by both engines;
// "{{blob}}" expands to the engine's byte-string type. Never edit a
// released step: add a new one.
type Migration struct {
	// Version orders the step among every registered one (all owners);
	// each version is applied once per database, in its own transaction,
	// and recorded in schema_migrations.
	Version int
	// Name says what the step does.
	Name string
	// Stmts are the step's statements, in order.
	Stmts []string
}

// Schema versions are one sequence for the whole database, whichever
// package owns the tables, so a database migrated by an earlier build
// (where every step lived here) keeps its history: 1–2 are the cluster's
// (below); 3, 7 and 12 the SSE event log's (actors/mcpruntime/eventstore);
// 4, 5 and 8 the execution directory's (exchange/directory); 6 the journal
// runs' (actors/engine/runstore); 9–11 the tasks' (actors/tasks/taskstore);
// 13 the directory's again; 14 the SDK's durable tool calls'
// (actors/mcpruntime/callstore); 15 the SDK handles' index
// (actors/handle); 18 the cluster's again (the reminders' trace context).
// A new step takes the next free version.
var clusterMigrations = []Migration{
	{1, "grain ownership and epochs", []string{
		`CREATE TABLE grains (
			grain TEXT PRIMARY KEY,
			owner_node TEXT NOT NULL,
			epoch BIGINT NOT NULL,
			record {{blob}},
			updated_at_ms BIGINT NOT NULL
		)`,
	}},
	{2, "durable reminders", []string{
		`CREATE TABLE reminders (
			grain TEXT NOT NULL,
			name TEXT NOT NULL,
			due_at_ms BIGINT NOT NULL,
			period_ms BIGINT NOT NULL,
			version BIGINT NOT NULL,
			PRIMARY KEY (grain, name)
		)`,
		`CREATE INDEX reminders_due ON reminders (due_at_ms)`,
	}},
	{18, "the trace context of the span that set a reminder", []string{
		`ALTER TABLE reminders ADD COLUMN trace_context TEXT NOT NULL DEFAULT ''`,
	}},
}

// registry holds every registered migration by version, with its owner.
var registry = struct {
	sync.Mutex
	steps map[int]Migration
	owner map[int]string
}{steps: map[int]Migration{}, owner: map[int]string{}}

func init() { RegisterMigrations("cluster/store", clusterMigrations...) }

// RegisterMigrations adds owner's schema steps (owner names the package
// that owns their tables, for messages) to those [Open] applies: a domain
// package that keeps tables in the store registers them in its init, as
// database/sql drivers register, so every program that links the package
// migrates its tables. It panics if a version is already registered (two
// owners chose the same number: a programming error).
func RegisterMigrations(owner string, ms ...Migration) {
	registry.Lock()
	defer registry.Unlock()
	seen := map[int]bool{}
	for _, m := range ms {
		if prev, ok := registry.owner[m.Version]; ok || seen[m.Version] {
			panic(fmt.Sprintf("store: migration %d of %s is already registered (by %s)", m.Version, owner, cmp.Or(prev, owner)))
		}
		seen[m.Version] = true
	}
	for _, m := range ms {
		registry.steps[m.Version], registry.owner[m.Version] = m, owner
	}
}

// migrations is every registered step, in version order.
func migrations() []Migration {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Migration, 0, len(registry.steps))
	for _, m := range registry.steps {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out
}

// SchemaVersion is the highest schema version this program migrates to
// (of the steps registered by the packages it links).
func SchemaVersion() int {
	ms := migrations()
	return ms[len(ms)-1].Version
}

// migrate applies every pending migration, each in its own transaction,
// holding the dialect's cross-process lock so concurrent nodes starting
// against one database do not race.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	for _, m := range migrations() {
		if err := applyMigration(ctx, db, d, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, d dialect, m Migration) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin migration %d: %w", m.Version, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if d.lockMigrations != nil {
		if err := d.lockMigrations(ctx, tx); err != nil {
			return fmt.Errorf("store: lock for migration %d: %w", m.Version, err)
		}
	}
	// Created under the lock: concurrent CREATE TABLE IF NOT EXISTS can
	// still collide on Postgres' catalog.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at_ms BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("store: create schema_migrations: %w", err)
	}
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&done); err != nil {
		return fmt.Errorf("store: read schema_migrations: %w", err)
	}
	if done > 0 {
		return tx.Commit()
	}
	for _, stmt := range m.Stmts {
		if _, err := tx.ExecContext(ctx, strings.ReplaceAll(stmt, "{{blob}}", d.blob)); err != nil {
			return fmt.Errorf("store: migration %d (%s): %w", m.Version, m.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)`,
		m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("store: record migration %d: %w", m.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit migration %d: %w", m.Version, err)
	}
	return nil
}
