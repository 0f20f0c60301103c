package session_test

import (
	"time"

	"github.com/mcpgrain/mcpgrain/actors/residency"
	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster/clock"
)

func newBenchHost(e *env) (*session.Host, error) {
	return session.NewHost(session.Config{
		Builder:    session.BuilderFunc(e.build),
		SessionTTL: 24 * time.Hour,
		Residency:  residency.Config{SoftCap: 1 << 20}, // measure sessions, not evictions
		Evict:      e.evict,
		Clock:      clock.Real(),
		Logger:     logger(),
		Registerer: e.reg,
	})
}
