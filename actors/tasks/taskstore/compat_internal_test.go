package taskstore

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/testenv/storetest"
)

// Migration 11 only expands the tasks table: while a rolling upgrade runs,
// a node of the earlier version (schema 10) keeps writing tasks with its
// own statements, copied here as it ran them. Its insert works (the new
// columns take their default: a task without a role, which decides
// nothing), and its updates leave the roles a newer node recorded as they
// are.
func TestTaskWritesOfTheEarlierSchemaKeepWorking(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, st store.Store, _ string) { checkEarlierTaskWrites(t, st) })
}

// v10PutTask and v10SwapTask are PutTask's and SwapTask's statements at
// schema version 10.
const (
	v10PutTask = `
INSERT INTO tasks (grain, task_id, user_id, org, status, status_message, params, result, error, input_requests,
	input_responses, request_state, attempts, ttl_ms, poll_ms, created_at_ms, updated_at_ms, expires_at_ms, lease_until_ms)
SELECT $1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20 WHERE ` + store.FencedBy + `
ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, status_message = excluded.status_message,
	params = excluded.params, result = excluded.result, error = excluded.error,
	input_requests = excluded.input_requests, input_responses = excluded.input_responses,
	request_state = excluded.request_state, attempts = excluded.attempts, ttl_ms = excluded.ttl_ms,
	poll_ms = excluded.poll_ms, updated_at_ms = excluded.updated_at_ms, expires_at_ms = excluded.expires_at_ms,
	lease_until_ms = excluded.lease_until_ms`
	v10SwapTask = `
UPDATE tasks SET status = $3, status_message = $4, result = $5, error = $6, input_requests = $7,
	input_responses = $8, request_state = $9, attempts = $10, updated_at_ms = $11, lease_until_ms = $12
WHERE task_id = $1 AND status = $2 AND attempts = $13`
)

func checkEarlierTaskWrites(t *testing.T, st store.Store) {
	ctx := context.Background()
	s, db := New(st), st.DB().Reader()
	now := time.UnixMilli(1_900_000_000_000)
	own, err := st.Acquire(ctx, "task/c1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	v10Put := func(id, status string, responses string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, v10PutTask, own.Grain, int64(own.Epoch), id, "u", "o", status, "", `{"name":"execute"}`,
			"", "", "", responses, "", 1, int64(3600000), int64(500), now.UnixMilli(), now.UnixMilli(), now.Add(time.Hour).UnixMilli(), int64(0)); err != nil {
			t.Fatalf("the earlier schema's insert: %v", err)
		}
	}
	// A task the earlier version created has no role.
	v10Put("old", "working", "")
	if got, err := s.GetTask(ctx, "old", now); err != nil || got.Role != "" || got.ResponderRole != "" || got.Status != "working" {
		t.Fatalf("a task written by the earlier version: %+v, %v; want it without roles", got, err)
	}
	// A task this version created keeps its roles through the earlier
	// version's update and swap.
	task := Task{ID: "new", User: "u", Org: "o", Role: "viewer", Status: "input_required", Params: `{"name":"execute"}`,
		InputResponses: `{"approval":{"action":"accept"}}`, ResponderRole: "admin", Attempts: 1, TTL: time.Hour,
		PollInterval: 500 * time.Millisecond, Created: now, Updated: now, Expires: now.Add(time.Hour)}
	if err := s.PutTask(ctx, own.Grain, own.Epoch, task); err != nil {
		t.Fatal(err)
	}
	v10Put("new", "working", task.InputResponses)
	if _, err := db.ExecContext(ctx, v10SwapTask, "new", "working", "completed", "", `{"content":[]}`, "", "",
		task.InputResponses, "", 1, now.Add(time.Second).UnixMilli(), int64(0), 1); err != nil {
		t.Fatalf("the earlier schema's swap: %v", err)
	}
	got, err := s.GetTask(ctx, "new", now)
	if err != nil || got.Status != "completed" || got.Role != "viewer" || got.ResponderRole != "admin" {
		t.Fatalf("after the earlier version's writes: %+v, %v; want completed with its roles kept", got, err)
	}
}
