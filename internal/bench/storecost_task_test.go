package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// taskExtension is the tasks extension a 2026-07-28 client declares to
// have a task-supporting tool run as a task.
const taskExtension = "io.modelcontextprotocol/tasks"

// modernRPC posts one 2026-07-28 request (no session; the tasks extension
// declared) to the target and returns its result, or the JSON-RPC error
// as an error.
func modernRPC(ctx context.Context, tg *target, method, name string, params map[string]any) (map[string]any, error) {
	caps := map[string]any{"extensions": map[string]any{taskExtension: map[string]any{}}}
	status, raw, err := mcpclient.PostModern(ctx, tg.hc, tg.endpoint, 1, method, name, "storecost", caps, params)
	if err != nil {
		return nil, err
	}
	var a struct {
		Result map[string]any   `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d, answer %q: %w", method, status, raw, err)
	}
	if a.Error != nil {
		return nil, fmt.Errorf("%s: %s", method, *a.Error)
	}
	return a.Result, nil
}

// taskPolls counts the tasks/get requests the task phases sent.
type taskPolls struct{ n atomic.Int64 }

// startTask calls execute with code as a task and returns the task's id.
func startTask(ctx context.Context, tg *target, code string) (string, error) {
	r, err := modernRPC(ctx, tg, "tools/call", "execute", map[string]any{"name": "execute", "arguments": map[string]any{"code": code}})
	if err != nil {
		return "", err
	}
	id, _ := r["taskId"].(string)
	if r["resultType"] != "task" || id == "" {
		return "", fmt.Errorf("execute: %v, want a task", r)
	}
	return id, nil
}

// awaitTask polls tasks/get until the task leaves "working" (a client's
// polling: 2 ms, doubling to 32 ms) and returns its last answer.
func awaitTask(ctx context.Context, tg *target, id string, polls *taskPolls) (map[string]any, error) {
	wait := 2 * time.Millisecond
	for {
		polls.n.Add(1)
		r, err := modernRPC(ctx, tg, "tasks/get", id, map[string]any{"taskId": id})
		if err != nil {
			return nil, err
		}
		if r["status"] != "working" {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 32*time.Millisecond)
	}
}

// taskRun is a task's whole life without a pause: execute as a task,
// polled to completed.
func taskRun(ctx context.Context, tg *target, polls *taskPolls) error {
	id, err := startTask(ctx, tg, `return 1`)
	if err != nil {
		return err
	}
	r, err := awaitTask(ctx, tg, id, polls)
	if err != nil {
		return err
	}
	if r["status"] != "completed" {
		return fmt.Errorf("task %s: %v, want completed", id, r)
	}
	return nil
}

// taskApproveCycle is a task that pauses for approval (its input_required),
// is accepted by its client's tasks/update and is polled to completed.
func taskApproveCycle(ctx context.Context, tg *target, polls *taskPolls) error {
	id, err := startTask(ctx, tg, approveCode)
	if err != nil {
		return err
	}
	r, err := awaitTask(ctx, tg, id, polls)
	if err != nil {
		return err
	}
	requests, _ := r["inputRequests"].(map[string]any)
	if r["status"] != "input_required" || len(requests) != 1 {
		return fmt.Errorf("task %s: %v, want input_required with one request", id, r)
	}
	responses := map[string]any{}
	for key := range requests {
		responses[key] = map[string]any{"action": "accept", "content": map[string]any{}}
	}
	if _, err := modernRPC(ctx, tg, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": responses}); err != nil {
		return err
	}
	if r, err = awaitTask(ctx, tg, id, polls); err != nil {
		return err
	}
	if r["status"] != "completed" {
		return fmt.Errorf("task %s after the approval: %v, want completed", id, r)
	}
	return nil
}
