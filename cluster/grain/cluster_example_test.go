package grain_test

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// doubler adds twice what it is asked to the counter of the same
// identity: it reaches the counter grain through its own Context, wherever
// the cluster placed it.
type doubler struct{}

func (doubler) Activate(context.Context, grain.Context, []byte) error { return nil }

func (doubler) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	add, ok := msg.(*wrapperspb.Int64Value)
	if !ok {
		return nil, grain.Reject("doubler: cannot handle %T", msg)
	}
	return g.Request(ctx, "counter", g.Identity(), wrapperspb.Int64(2*add.GetValue()))
}

func (doubler) Deactivate(context.Context, grain.Context, grain.Reason) {}

// counterKind is the durable counter of the Kind example.
var counterKind = grain.Kind{Name: "counter", New: func(string) grain.Grain { return &counter{} }}

// A grain asks the cluster through its Context: here a doubler grain
// requests the counter grain of its identity.
func ExampleCluster() {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:")
	if err != nil {
		panic(err)
	}
	defer st.Close()
	kinds := []grain.Kind{counterKind, {Name: "doubler", New: func(string) grain.Grain { return doubler{} }}}
	node, err := cluster.Start(ctx, cluster.Config{Kinds: kinds, Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer node.Stop(ctx)

	for _, n := range []int64{1, 5} {
		reply, err := node.Request(ctx, "doubler", "c-1", wrapperspb.Int64(n))
		if err != nil {
			panic(err)
		}
		fmt.Println(reply.(*wrapperspb.Int64Value).GetValue())
	}
	// Output:
	// 2
	// 12
}

// A Host builds kinds whose shared code reaches the cluster outside any
// grain's turn — here a node-wide "audit" function every activation of the
// kind uses. The node hands the host itself while it starts: the shared
// code never waits for the node to exist.
func ExampleHost() {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:")
	if err != nil {
		panic(err)
	}
	defer st.Close()
	host := func(_ context.Context, c grain.Cluster) ([]grain.Kind, error) {
		audit := func(ctx context.Context, id string) (proto.Message, error) {
			return c.Request(ctx, "counter", "audit", wrapperspb.Int64(1))
		}
		return []grain.Kind{counterKind, {Name: "audited", New: func(id string) grain.Grain { return &audited{audit: audit} }}}, nil
	}
	node, err := cluster.Start(ctx, cluster.Config{Hosts: []grain.Host{host}, Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer node.Stop(ctx)

	for _, id := range []string{"a", "b", "a"} {
		reply, err := node.Request(ctx, "audited", id, &wrapperspb.StringValue{})
		if err != nil {
			panic(err)
		}
		fmt.Println(reply.(*wrapperspb.Int64Value).GetValue())
	}
	// Output:
	// 1
	// 2
	// 3
}

// audited answers every request with the number of requests any audited
// grain of its node served, counted by the node-wide audit function.
type audited struct {
	audit func(ctx context.Context, id string) (proto.Message, error)
}

func (a *audited) Activate(context.Context, grain.Context, []byte) error { return nil }

func (a *audited) Receive(ctx context.Context, g grain.Context, _ proto.Message) (proto.Message, error) {
	return a.audit(ctx, g.Identity())
}

func (a *audited) Deactivate(context.Context, grain.Context, grain.Reason) {}
