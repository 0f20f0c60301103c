package mcpgrain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain"
	"github.com/mcpgrain/mcpgrain/actors/toolpacks"
)

// A Server's schedule callbacks go through the public pack mechanism (its
// pack's Handlers.Schedules); a nameless or nil one is refused; the
// schedule calls outside a session fail with ErrNoScope.
func TestServerSchedulesArePartOfItsPack(t *testing.T) {
	noop := func(context.Context, mcpgrain.ScheduleCall) error { return nil }
	reg := func(*mcp.Server) {}
	p, err := mcpgrain.Server{Name: "watch", Register: reg, Schedules: map[string]mcpgrain.ScheduleFunc{"remind": noop}}.Pack()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := p.Setup(toolpacks.Env{})
	if _, ok := h.Schedules["remind"]; !ok || len(h.Schedules) != 1 {
		t.Fatalf("the pack's handlers carry schedules %v, want remind", h.Schedules)
	}
	if _, err := (mcpgrain.Server{Name: "watch", Register: reg, Schedules: map[string]mcpgrain.ScheduleFunc{"": noop}}).Pack(); err == nil {
		t.Fatal("a nameless schedule callback was accepted")
	}
	if _, err := (mcpgrain.Server{Name: "watch", Register: reg, Schedules: map[string]mcpgrain.ScheduleFunc{"remind": nil}}).Pack(); err == nil {
		t.Fatal("a nil schedule callback was accepted")
	}
	if _, err := mcpgrain.ScheduleAt(t.Context(), mcpgrain.Schedule{Name: "remind"}); !errors.Is(err, mcpgrain.ErrNoScope) {
		t.Fatalf("ScheduleAt outside a session: %v, want ErrNoScope", err)
	}
}
