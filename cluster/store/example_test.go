package store_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// Ownership by epoch: each activation's Acquire gets a new epoch, and a
// write carrying a superseded one is fenced.
func Example() {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite::memory:") // or postgres://…
	if err != nil {
		panic(err)
	}
	defer st.Close()

	first, _ := st.Acquire(ctx, "probe/a", "node-1")
	fmt.Println("node-1 epoch", first.Epoch, "save:", st.Save(ctx, "probe/a", first.Epoch, []byte("state")))

	second, _ := st.Acquire(ctx, "probe/a", "node-2") // node-1 was presumed dead
	fmt.Println("node-2 epoch", second.Epoch, "record:", string(second.Record))

	err = st.Save(ctx, "probe/a", first.Epoch, []byte("late write"))
	fmt.Println("node-1 save fenced:", errors.Is(err, store.ErrFenced))
	// Output:
	// node-1 epoch 1 save: <nil>
	// node-2 epoch 2 record: state
	// node-1 save fenced: true
}
