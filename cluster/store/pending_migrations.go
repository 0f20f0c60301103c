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
	{7, "the sse event log is pruned by age", []string{
		`CREATE INDEX mcp_events_created ON mcp_events (created_at_ms)`,
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
