package app

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// The program migrates the schema history the store had before its
// domains took their tables (every step in cluster/store): the same
// versions, in the same order, under the same names, so a database
// migrated by an earlier build keeps working and migrates nothing again.
func TestTheProgramMigratesTheOneSchemaHistory(t *testing.T) {
	want := []string{
		"grain ownership and epochs",
		"durable reminders",
		"mcp sse event log",
		"paused execution directory",
		"settled executions stay in the directory until pruned",
		"durable executions: runs and their tool-call journal",
		"the sse event log is pruned by age",
		"who decided a paused execution, and how",
		"tasks extension: durable tasks",
		"tasks extension: the handover lease of a task's running work",
		"tasks extension: the roles a task's rounds run with",
		"the sse event log is kept within a budget per principal and for the store",
		"why a paused execution was declined",
		"durable tool calls of the SDK: Step and Ask journals",
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "schema.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rows, err := st.DB().Reader().QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY applied_at_ms, version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var (
			v    int
			name string
		)
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		if v != len(got)+1 {
			t.Fatalf("step %q has version %d, want %d (applied in version order)", name, v, len(got)+1)
		}
		got = append(got, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || store.SchemaVersion() != len(want) {
		t.Fatalf("migrated %d steps (schema version %d), want %d: %q", len(got), store.SchemaVersion(), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d is %q, want %q", i+1, got[i], want[i])
		}
	}
}
