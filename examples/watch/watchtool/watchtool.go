// Package watchtool is examples/watch's tools and schedule callback:
// remind_me schedules a callback on the caller's session
// (mcpgrain.ScheduleAt) that records the reminder in WATCH_DIR, one file
// per schedule key written once however many times the callback runs.
//
//lint:file-ignore SA1019 logging reaches 2025-11-25 clients (SEP-2577 deprecates it in 2026-07-28, still served); docs/sdk.md §3.
package watchtool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

// RemindArgs are remind_me's arguments.
type RemindArgs struct {
	After string `json:"after" jsonschema:"how long from now, as a Go duration (10s, 5m)"`
	Text  string `json:"text" jsonschema:"what to be reminded of"`
	Key   string `json:"key,omitempty" jsonschema:"idempotency key: the same key again schedules nothing new"`
	// FailFirst makes the callback fail its first attempts (to watch the
	// retries).
	FailFirst int `json:"fail_first,omitempty" jsonschema:"fail this many attempts first (retries with backoff)"`
}

// reminder is a schedule's payload.
type reminder struct {
	Text      string `json:"text"`
	FailFirst int    `json:"fail_first,omitempty"`
}

// Fired is what the callback records of a reminder that fired.
type Fired struct {
	Key     string    `json:"key"`
	Text    string    `json:"text"`
	Attempt int       `json:"attempt"`
	Due     time.Time `json:"due"`
	At      time.Time `json:"at"`
}

func remindMe(ctx context.Context, _ *mcp.CallToolRequest, args RemindArgs) (*mcp.CallToolResult, any, error) {
	after, err := time.ParseDuration(args.After)
	if err != nil {
		return nil, nil, fmt.Errorf("after: %w", err)
	}
	payload, err := json.Marshal(reminder{Text: args.Text, FailFirst: args.FailFirst})
	if err != nil {
		return nil, nil, err
	}
	key, err := mcpgrain.ScheduleAt(ctx, mcpgrain.Schedule{Name: "remind", After: after, Payload: payload, Key: args.Key})
	if err != nil {
		return nil, nil, err
	}
	return text(key), nil, nil
}

func listReminders(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	list, err := mcpgrain.Schedules(ctx)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, nil, err
	}
	return text(string(b)), nil, nil
}

// CancelArgs are cancel_reminder's arguments.
type CancelArgs struct {
	Key string `json:"key" jsonschema:"the key remind_me returned"`
}

func cancelReminder(ctx context.Context, _ *mcp.CallToolRequest, args CancelArgs) (*mcp.CallToolResult, any, error) {
	if err := mcpgrain.CancelSchedule(ctx, args.Key); err != nil {
		return nil, nil, err
	}
	return text("cancelled " + args.Key), nil, nil
}

// remind is the schedule callback: it records the reminder in WATCH_DIR
// once per key and logs it to the session's client.
func remind(ctx context.Context, c mcpgrain.ScheduleCall) error {
	var r reminder
	if err := json.Unmarshal(c.Payload, &r); err != nil {
		return err
	}
	if c.Attempt <= r.FailFirst {
		return fmt.Errorf("failing attempt %d of %d on purpose", c.Attempt, r.FailFirst)
	}
	if err := record(Fired{Key: c.Key, Text: r.Text, Attempt: c.Attempt, Due: c.Due, At: time.Now()}); err != nil {
		return err
	}
	if c.Session != nil { // not delivered if the client asked for no logs
		_ = c.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "watch", Data: "reminder: " + r.Text})
	}
	return nil
}

// record writes f to WATCH_DIR/<key>.json unless it is there: a callback
// run again for the same key (at least once) changes nothing.
func record(f Fired) error {
	dir := os.Getenv("WATCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "watch")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".fired-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// A hard link fails if the key's file exists: the first run's record stays.
	if err := os.Link(tmp.Name(), filepath.Join(dir, f.Key+".json")); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// Register adds remind_me, list_reminders and cancel_reminder to s.
func Register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "remind_me", Description: "Remind me of something later (returns the reminder's key)."}, remindMe)
	mcp.AddTool(s, &mcp.Tool{Name: "list_reminders", Description: "List my pending reminders."}, listReminders)
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_reminder", Description: "Cancel a pending reminder."}, cancelReminder)
}

// Schedules returns the schedule callbacks Register's tools schedule
// (mcpgrain.Server.Schedules).
func Schedules() map[string]mcpgrain.ScheduleFunc {
	return map[string]mcpgrain.ScheduleFunc{"remind": remind}
}
