package main

import (
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// On a 3-node cluster (Consul, Postgres) of watch binaries, the node that
// owns a session is killed (kill -9) before the session's reminder is
// due: a surviving node takes the session over and runs the callback, and
// its effect is there once (the record is written once per key, however
// many times the callback ran).
func TestWatchReminderSurvivesKillOfItsOwner(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WATCH_DIR", dir) // the nodes inherit it
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Binary: binary(t), ExtraArgs: []string{"--reminder-poll", "200ms"}})
	cs := testcluster.ConnectOwnedBy(t, c, 1, 0, testcluster.Token, nil)
	key := call(t, cs, "remind_me", map[string]any{"after": "6s", "text": "from a dead node"})
	c.Kill(0)
	if f := waitFired(t, dir, key, 120*time.Second); f.Text != "from a dead node" {
		t.Fatalf("fired %+v", f)
	}
	// The session lives on, on a survivor: its reminders are served there.
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := cs.CallTool(t.Context(), toolParams("list_reminders"))
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not move to a survivor: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := pending(t, cs); len(got) != 0 {
		t.Fatalf("pending after it fired: %v", got)
	}
}
