package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// migration is one schema step. Statements are shared by both engines;
// "{{blob}}" expands to the engine's byte-string type.
type migration struct {
	version int
	name    string
	stmts   []string
}

// migrations is the schema history, oldest first. Never edit a released
// step: append a new one.
var migrations = []migration{
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
	{3, "mcp sse event log", []string{
		`CREATE TABLE mcp_events (
			session TEXT NOT NULL,
			stream TEXT NOT NULL,
			idx BIGINT NOT NULL,
			data {{blob}},
			created_at_ms BIGINT NOT NULL,
			PRIMARY KEY (session, stream, idx)
		)`,
	}},
	{4, "paused execution directory", []string{
		`CREATE TABLE executions (
			exec_id TEXT PRIMARY KEY,
			session TEXT NOT NULL,
			user_id TEXT NOT NULL,
			org TEXT NOT NULL,
			address TEXT NOT NULL,
			message TEXT NOT NULL,
			approval_text TEXT NOT NULL,
			args_json TEXT NOT NULL,
			deadline_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX executions_org ON executions (org, deadline_ms)`,
		`CREATE INDEX executions_session ON executions (session)`,
	}},
	{5, "settled executions stay in the directory until pruned", []string{
		`ALTER TABLE executions ADD COLUMN settled_at_ms BIGINT NOT NULL DEFAULT 0`,
		`CREATE INDEX executions_deadline ON executions (deadline_ms)`,
	}},
	{6, "durable executions: runs and their tool-call journal", []string{
		`CREATE TABLE execution_runs (
			run_id TEXT PRIMARY KEY,
			session TEXT NOT NULL,
			code TEXT NOT NULL,
			spec TEXT NOT NULL,
			pause_id TEXT NOT NULL,
			outcome TEXT NOT NULL,
			created_at_ms BIGINT NOT NULL,
			settled_at_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX execution_runs_session ON execution_runs (session, settled_at_ms)`,
		`CREATE TABLE execution_journal (
			run_id TEXT NOT NULL,
			seq INTEGER NOT NULL,
			state TEXT NOT NULL,
			pause_id TEXT NOT NULL,
			data TEXT NOT NULL,
			PRIMARY KEY (run_id, seq)
		)`,
		`CREATE INDEX execution_journal_pause ON execution_journal (pause_id)`,
	}},
	{7, "the sse event log is pruned by age", []string{
		`CREATE INDEX mcp_events_created ON mcp_events (created_at_ms)`,
	}},
	{8, "who decided a paused execution, and how", []string{
		`ALTER TABLE executions ADD COLUMN decided_by TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE executions ADD COLUMN decision TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX executions_org_settled ON executions (org, settled_at_ms)`,
	}},
	{9, "tasks extension: durable tasks", []string{
		`CREATE TABLE tasks (
			task_id TEXT PRIMARY KEY,
			grain TEXT NOT NULL,
			user_id TEXT NOT NULL,
			org TEXT NOT NULL,
			status TEXT NOT NULL,
			status_message TEXT NOT NULL,
			params TEXT NOT NULL,
			result TEXT NOT NULL,
			error TEXT NOT NULL,
			input_requests TEXT NOT NULL,
			input_responses TEXT NOT NULL,
			request_state TEXT NOT NULL,
			attempts BIGINT NOT NULL,
			ttl_ms BIGINT NOT NULL,
			poll_ms BIGINT NOT NULL,
			created_at_ms BIGINT NOT NULL,
			updated_at_ms BIGINT NOT NULL,
			expires_at_ms BIGINT NOT NULL
		)`,
		`CREATE INDEX tasks_expires ON tasks (expires_at_ms)`,
	}},
	{10, "tasks extension: the handover lease of a task's running work", []string{
		`ALTER TABLE tasks ADD COLUMN lease_until_ms BIGINT NOT NULL DEFAULT 0`,
	}},
	// Expand only: a node of the earlier version inserts without the
	// columns (they default to "", a principal without a role, which
	// decides nothing) and its updates leave them as they are.
	{11, "tasks extension: the roles a task's rounds run with", []string{
		`ALTER TABLE tasks ADD COLUMN role TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN responder_role TEXT NOT NULL DEFAULT ''`,
	}},
	{12, "the sse event log is kept within a budget per principal and for the store", []string{
		`ALTER TABLE mcp_events ADD COLUMN org TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE mcp_events ADD COLUMN user_id TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX mcp_events_principal ON mcp_events (org, user_id, created_at_ms)`,
		// The bytes of data each principal's events hold, kept by every
		// write of the log in its own transaction. Events stored before
		// are not counted (they are pruned within the hour).
		`CREATE TABLE mcp_event_bytes (
			org TEXT NOT NULL,
			user_id TEXT NOT NULL,
			bytes BIGINT NOT NULL,
			PRIMARY KEY (org, user_id)
		)`,
	}},
}

// SchemaVersion is the schema version this build migrates to.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// migrate applies every pending migration, each in its own transaction,
// holding the dialect's cross-process lock so concurrent nodes starting
// against one database do not race.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	for _, m := range migrations {
		if err := applyMigration(ctx, db, d, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin migration %d: %w", m.version, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if d.lockMigrations != nil {
		if err := d.lockMigrations(ctx, tx); err != nil {
			return fmt.Errorf("store: lock for migration %d: %w", m.version, err)
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
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&done); err != nil {
		return fmt.Errorf("store: read schema_migrations: %w", err)
	}
	if done > 0 {
		return tx.Commit()
	}
	for _, stmt := range m.stmts {
		if _, err := tx.ExecContext(ctx, strings.ReplaceAll(stmt, "{{blob}}", d.blob)); err != nil {
			return fmt.Errorf("store: migration %d (%s): %w", m.version, m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)`,
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("store: record migration %d: %w", m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit migration %d: %w", m.version, err)
	}
	return nil
}
