package taskstore_test

import (
	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// tasks is the embedded name of the tasks in a fixture.
type tasks = taskstore.Store

// fixture is a store with its tasks: a contract test owns grains and
// writes their tasks through one value.
type fixture struct {
	store.Store
	*tasks
}

func newFixture(st store.Store) fixture { return fixture{st, taskstore.New(st)} }
