package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// The node is the grain.Cluster of the grains it hosts (through their
// grain.Context) and of the code their kinds share (Config.Hosts).
var _ grain.Cluster = (*Node)(nil)

// Tell implements [grain.Cluster]: it sends msg to the grain (kind,
// identity) in the background, without waiting for the answer. The
// request outlives ctx's cancellation (not its values) and is bounded by
// Config.RequestTimeout; a failure is logged at warning level.
func (n *Node) Tell(ctx context.Context, kind, identity string, msg proto.Message, opts ...CallOption) {
	ctx = context.WithoutCancel(ctx)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
		defer cancel()
		if _, err := n.Request(rctx, kind, identity, msg, opts...); err != nil {
			n.logger.Warn("grain tell failed", "grain", grain.Key(kind, identity), "msg", fmt.Sprintf("%T", msg), "err", err)
		}
	}()
}

// broadcastTries bounds the identities tried to find a grain of a kind
// placed on a given member: with N members an identity lands on a given
// one with probability about 1/N, so all tries miss with probability
// (1-1/N)^1024 (1e-7 with 64 members; a try is one hash): a miss is
// reported, not hidden.
const broadcastTries = 1024

// Broadcast implements [grain.Cluster]: it sends msg to one grain of kind
// on every other member of this node's view that hosts kind, at once, and
// waits for every answer. A member that did not answer or refused is named
// in the (joined) error.
func (n *Node) Broadcast(ctx context.Context, kind string, msg proto.Message, opts ...CallOption) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, m := range n.View().Members {
		if m.ID == n.id || !m.HostsKind(kind) {
			continue
		}
		wg.Go(func() {
			if err := n.sendTo(ctx, m, kind, msg, opts); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sendTo sends msg to a grain of kind placed on member m.
func (n *Node) sendTo(ctx context.Context, m membership.Member, kind string, msg proto.Message, opts []CallOption) error {
	id, ok := n.grainOn(kind, m.ID)
	if !ok {
		return fmt.Errorf("cluster: broadcast to node %s: no %s grain identity of %d tried lands on it", m.ID, kind, broadcastTries)
	}
	if _, err := n.Request(ctx, kind, id, msg, opts...); err != nil {
		return fmt.Errorf("cluster: broadcast %T to node %s: %w", msg, m.ID, err)
	}
	return nil
}

// grainOn finds an identity of kind that this node's view places on
// member.
func (n *Node) grainOn(kind, member string) (string, bool) {
	for i := range broadcastTries {
		id := fmt.Sprintf("broadcast-%s-%d", member, i)
		if o, ok := n.Owner(kind, id); ok && o.ID == member {
			return id, true
		}
	}
	return "", false
}
