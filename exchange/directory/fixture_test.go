package directory_test

import (
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
)

// The embedded names of a fixture's domains.
type (
	executions = directory.Store
	runs       = runstore.Store
)

// fixture is a store with its execution directory (and the runs, which
// prune the directory with theirs).
type fixture struct {
	store.Store
	*executions
	*runs
}

func newFixture(st store.Store) fixture { return fixture{st, directory.New(st), runstore.New(st)} }
