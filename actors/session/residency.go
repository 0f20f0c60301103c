package session

import "github.com/mcpgrain/mcpgrain/cluster/residency"

func residencyEntry(id string, r *resident) residency.Entry {
	return residency.Entry{ID: id, CanEvict: r.canEvict}
}
