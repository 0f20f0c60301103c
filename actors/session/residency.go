package session

import "github.com/mcpgrain/mcpgrain/actors/residency"

func residencyEntry(id string, r *resident) residency.Entry {
	return residency.Entry{ID: id, CanEvict: r.canEvict}
}
