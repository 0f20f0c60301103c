package placement

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
)

// errNoCluster answers a grain's request on a placement without a Cluster.
var errNoCluster = errors.New("placement: this node takes no grain requests from its grains (Config.Cluster is nil)")

// Request implements [grain.Context] (its [grain.Cluster]): through the
// node, like any caller's request.
func (a *activation) Request(ctx context.Context, kind, identity string, msg proto.Message, opts ...grain.CallOption) (proto.Message, error) {
	if a.cfg.Cluster == nil {
		return nil, errNoCluster
	}
	return a.cfg.Cluster.Request(ctx, kind, identity, msg, opts...)
}

// Tell implements [grain.Context] (its [grain.Cluster]).
func (a *activation) Tell(ctx context.Context, kind, identity string, msg proto.Message, opts ...grain.CallOption) {
	if a.cfg.Cluster == nil {
		a.logger().Warn("grain tell dropped", "err", errNoCluster)
		return
	}
	a.cfg.Cluster.Tell(ctx, kind, identity, msg, opts...)
}

// Broadcast implements [grain.Context] (its [grain.Cluster]).
func (a *activation) Broadcast(ctx context.Context, kind string, msg proto.Message, opts ...grain.CallOption) error {
	if a.cfg.Cluster == nil {
		return errNoCluster
	}
	return a.cfg.Cluster.Broadcast(ctx, kind, msg, opts...)
}
