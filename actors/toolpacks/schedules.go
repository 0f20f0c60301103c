package toolpacks

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/app"
)

// SchedulesOf returns the schedule callbacks of the packs NewServer
// registered on s, by name (nil: none, or s was not built by NewServer or
// is closed). The caller must not modify the map.
func SchedulesOf(s *mcp.Server) map[string]app.ScheduleFunc { return app.SchedulesOf(s) }

// mergeSchedules adds a pack's callbacks; a name two packs register is a
// conflict.
func (m *merger) mergeSchedules(packName string, fs map[string]app.ScheduleFunc) {
	for name, f := range fs {
		if f == nil {
			continue
		}
		m.claim(packName, "schedule "+name, true, func() {
			if m.schedules == nil {
				m.schedules = map[string]app.ScheduleFunc{}
			}
			m.schedules[name] = f
		})
	}
}

// ContinuationsOf returns the continuations of the packs NewServer
// registered on s, by name (nil: none). The caller must not modify the
// map.
func ContinuationsOf(s *mcp.Server) map[string]app.ContinueFunc { return app.ContinuationsOf(s) }

// mergeContinuations adds a pack's continuations; a name two packs
// register is a conflict.
func (m *merger) mergeContinuations(packName string, fs map[string]app.ContinueFunc) {
	for name, f := range fs {
		if f == nil {
			continue
		}
		m.claim(packName, "continuation "+name, true, func() {
			if m.continuations == nil {
				m.continuations = map[string]app.ContinueFunc{}
			}
			m.continuations[name] = f
		})
	}
}
