//lint:file-ignore SA1019 the client of a stateful (2025-11-25) session gets the callback's log (SEP-2577 deprecates logging, still served).

package mcpgrain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
)

type remindArgs struct {
	Text string `json:"text"`
}

// A tool schedules a durable callback on its session; the server
// registers the callback by name. The callback runs when it is due, at
// least once, bound to the same session, even if the session hibernated
// or its node died meanwhile (examples/watch is the whole program).
func ExampleScheduleAt() {
	remindMe := func(ctx context.Context, _ *mcp.CallToolRequest, args remindArgs) (*mcp.CallToolResult, any, error) {
		payload, _ := json.Marshal(args)
		key, err := mcpgrain.ScheduleAt(ctx, mcpgrain.Schedule{Name: "remind", After: 10 * time.Minute, Payload: payload})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "reminder " + key}}}, nil, nil
	}
	remind := func(ctx context.Context, c mcpgrain.ScheduleCall) error {
		var args remindArgs
		if err := json.Unmarshal(c.Payload, &args); err != nil {
			return err
		}
		// Make the effect happen once per c.Key (the callback may run
		// again), then tell the client if it is connected.
		if c.Session != nil {
			_ = c.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "reminder: " + args.Text})
		}
		return nil // nil completes the schedule; an error retries it
	}
	mcpgrain.Main(mcpgrain.Server{
		Name:      "watch",
		Register:  func(s *mcp.Server) { mcp.AddTool(s, &mcp.Tool{Name: "remind_me"}, remindMe) },
		Schedules: map[string]mcpgrain.ScheduleFunc{"remind": remind},
	})
}

// The schedule calls act on the session of the request (or callback) ctx
// belongs to; outside one they fail with ErrNoScope.
func ExampleSchedules() {
	_, err := mcpgrain.Schedules(context.Background())
	fmt.Println(errors.Is(err, mcpgrain.ErrNoScope))
	err = mcpgrain.CancelSchedule(context.Background(), "some-key")
	fmt.Println(errors.Is(err, mcpgrain.ErrNoScope))
	// Output:
	// true
	// true
}
