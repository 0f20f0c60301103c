package mcpgrain_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/actors/tasks"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// A Server's Tasks reach the node through its pack (app.Pack.Tasks): a
// selected pack's tools run as tasks in their mode, an unselected pack's
// do not, a built-in fixture keeps its own; an empty tool name or an
// unknown mode is refused.
func TestServerTasksArePartOfItsPack(t *testing.T) {
	reg := func(*mcp.Server) {}
	p, err := mcpgrain.Server{Name: "deploy", Register: reg, Tasks: map[string]mcpgrain.TaskMode{
		"deploy": mcpgrain.TaskOptional, "migrate": mcpgrain.TaskRequired, "status": mcpgrain.TaskNone}}.Pack()
	if err != nil {
		t.Fatal(err)
	}
	support := toolpacks.TaskSupportWith([]mcpgrain.Pack{p}, []string{"deploy", "conformance"})
	for tool, want := range map[string]tasks.Mode{"deploy": tasks.Optional, "migrate": tasks.Required, "status": tasks.None,
		"other": tasks.None, "failing_job": tasks.Required} {
		if got := support(tool).Mode; got != want {
			t.Errorf("task support of %s: %v, want %v", tool, got, want)
		}
	}
	if got := toolpacks.TaskSupportWith([]mcpgrain.Pack{p}, []string{"hello"})("deploy").Mode; got != tasks.None {
		t.Errorf("an unselected pack's tool runs as a task: %v", got)
	}
	for name, bad := range map[string]map[string]mcpgrain.TaskMode{
		"empty tool":   {"": mcpgrain.TaskOptional},
		"unknown mode": {"deploy": mcpgrain.TaskMode(7)},
		"negative":     {"deploy": mcpgrain.TaskMode(-1)},
	} {
		if _, err := (mcpgrain.Server{Name: "deploy", Register: reg, Tasks: bad}).Pack(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
