package store

// pendingMigrations are the domains' steps that still live here (moving
// to their domain packages).
var pendingMigrations = []Migration{
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

func init() { RegisterMigrations("cluster/store (pending)", pendingMigrations...) }
