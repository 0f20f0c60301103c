package grain_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// counter is a durable counter: a request adds its value, and the record
// is the count in decimal.
type counter struct{ n int64 }

func (c *counter) Activate(_ context.Context, _ grain.Context, record []byte) error {
	if record == nil {
		return nil // never saved: a new counter
	}
	n, err := strconv.ParseInt(string(record), 10, 64)
	c.n = n
	return err
}

func (c *counter) Receive(ctx context.Context, g grain.Context, msg proto.Message) (proto.Message, error) {
	add, ok := msg.(*wrapperspb.Int64Value)
	if !ok {
		return nil, grain.Reject("counter: cannot handle %T", msg)
	}
	next := c.n + add.GetValue()
	if err := g.Save(ctx, strconv.AppendInt(nil, next, 10)); err != nil {
		return nil, err // fenced: a newer activation owns the counter
	}
	c.n = next
	return wrapperspb.Int64(c.n), nil
}

func (c *counter) Deactivate(context.Context, grain.Context, grain.Reason) {}

// A grain kind is a name and a constructor; a node that lists it in
// cluster.Config.Kinds hosts its activations, and node.Request reaches one
// by kind and identity, activating it on first use.
func ExampleKind() {
	kind := grain.Kind{
		Name:        "counter",
		New:         func(identity string) grain.Grain { return &counter{} },
		IdleTimeout: time.Minute,
	}

	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:")
	if err != nil {
		panic(err)
	}
	defer st.Close()
	node, err := cluster.Start(ctx, cluster.Config{Kinds: []grain.Kind{kind}, Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer node.Stop(ctx)

	for _, msg := range []proto.Message{wrapperspb.Int64(2), wrapperspb.Int64(3), wrapperspb.String("x")} {
		reply, err := node.Request(ctx, "counter", "c-1", msg)
		if ge, ok := grain.AsError(err); ok {
			fmt.Println(ge.Code, ge.Message) // the grain refused the request
			continue
		}
		if err != nil {
			panic(err)
		}
		fmt.Println(reply.(*wrapperspb.Int64Value).GetValue())
	}
	// Output:
	// 2
	// 5
	// CODE_REJECTED counter: cannot handle *wrapperspb.StringValue
}
