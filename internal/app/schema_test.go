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
	// Versions are reserved per change; one not (yet) taken leaves a gap.
	want := []struct {
		version int
		name    string
	}{
		{1, "grain ownership and epochs"},
		{2, "durable reminders"},
		{3, "mcp sse event log"},
		{4, "paused execution directory"},
		{5, "settled executions stay in the directory until pruned"},
		{6, "durable executions: runs and their tool-call journal"},
		{7, "the sse event log is pruned by age"},
		{8, "who decided a paused execution, and how"},
		{9, "tasks extension: durable tasks"},
		{10, "tasks extension: the handover lease of a task's running work"},
		{11, "tasks extension: the roles a task's rounds run with"},
		{12, "the sse event log is kept within a budget per principal and for the store"},
		{13, "why a paused execution was declined"},
		{14, "durable tool calls of the SDK: Step and Ask journals"},
		{15, "SDK handles: a principal's live handles"},
		{18, "the trace context of the span that set a reminder"},
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
	last := 0
	for rows.Next() {
		var (
			v    int
			name string
		)
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		if i := len(got); i >= len(want) || v != want[i].version || v <= last {
			t.Fatalf("step %q has version %d, applied after version %d (want the steps below, in version order)", name, v, last)
		}
		last = v
		got = append(got, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || store.SchemaVersion() != want[len(want)-1].version {
		t.Fatalf("migrated %d steps (schema version %d), want %d: %q", len(got), store.SchemaVersion(), len(want), got)
	}
	for i := range want {
		if got[i] != want[i].name {
			t.Errorf("step %d is %q, want %q", want[i].version, got[i], want[i].name)
		}
	}
}
