// Command watch is an MCP server on mcpgrain with durable reminders: its
// tool remind_me schedules a callback on the caller's session
// (mcpgrain.ScheduleAt), which runs when it is due — at least once, even
// if the session hibernated, the node restarted or the node that owned the
// session died meanwhile. Run it as a node:
//
//	WATCH_DIR=/tmp/watch go run ./examples/watch dev --no-auth
//
// and call remind_me {"after": "10s", "text": "tea"} with any MCP client.
// When it is due, the callback records the reminder in WATCH_DIR (one
// file per schedule key, written once however many times the callback
// runs: its idempotency) and logs it to the session's client, if that is
// connected and asked for logs (logging/setLevel).
package main

import (
	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/examples/watch/watchtool"
)

func main() {
	mcpgrain.Main(mcpgrain.Server{
		Name:      "watch",
		Version:   "1.0.0",
		Register:  watchtool.Register,
		Schedules: watchtool.Schedules(),
	})
}
