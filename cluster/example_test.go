package cluster_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	"github.com/mcpgrain/mcpgrain/cluster/probe"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	mcpgrainv1 "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// A single node with an in-memory SQLite store hosting the probe kind, a
// durable counter. The first request activates probe "id-1": the
// activation takes ownership in the store (epoch 1) and every later
// request reaches the same activation.
func ExampleStart() {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:")
	if err != nil {
		panic(err)
	}
	defer st.Close()

	node, err := cluster.Start(ctx, cluster.Config{
		Kinds:      []grain.Kind{probe.Kind(probe.Options{})},
		Membership: membership.NewSingle(),
		Store:      st,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer node.Stop(ctx)

	for range 2 {
		reply, err := node.Request(ctx, probe.KindName, "id-1", &mcpgrainv1.ProbeAdd{Delta: 1})
		if err != nil {
			panic(err)
		}
		s := reply.(*mcpgrainv1.ProbeState)
		fmt.Println("count", s.GetCount(), "epoch", s.GetEpoch(), "on this node:", s.GetNode() == node.ID())
	}
	// Output:
	// count 1 epoch 1 on this node: true
	// count 2 epoch 1 on this node: true
}
