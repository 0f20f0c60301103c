package continuation

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/membership"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// Cluster is what the catalog broadcast needs of its node.
type Cluster interface {
	// ID names this node.
	ID() string
	// View is the current membership.
	View() membership.View
	// Owner is the member a grain is placed on.
	Owner(kind, identity string) (membership.Member, bool)
	// Request sends msg to a grain, wherever it lives.
	Request(ctx context.Context, kind, identity string, msg proto.Message, opts ...cluster.CallOption) (proto.Message, error)
}

// catalogTries bounds the ids tried to find a continuation grain of a
// member: with N members an id lands on a given one with probability
// about 1/N, so all tries miss with probability (1-1/N)^1024 (1e-7 with 64
// nodes; a try is one hash): a miss is reported, not hidden.
const catalogTries = 1024

// BroadcastCatalog returns the broadcast of a node's toolpacks.Catalog: it
// sends a named change to one continuation grain on every other member
// that hosts them, at once, through node() (called per change: the node
// starts after its hosts are built), and waits for every answer. A member
// that did not apply the change is named in the error; the change is
// idempotent for the packs that define one (it is retried like any
// idempotent request).
func BroadcastCatalog(node func() Cluster) func(ctx context.Context, name string) error {
	return func(ctx context.Context, name string) error {
		n := node()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, m := range n.View().Members {
			if m.ID == n.ID() || !m.HostsKind(KindName) {
				continue
			}
			wg.Go(func() {
				if err := sendCatalogChange(ctx, n, m, name); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}

// sendCatalogChange asks member m to apply the named change, through a
// continuation grain placed on m.
func sendCatalogChange(ctx context.Context, n Cluster, m membership.Member, name string) error {
	id, ok := grainOn(n, m.ID)
	if !ok {
		return fmt.Errorf("continuation: no continuation grain id of %d tried lands on node %s", catalogTries, m.ID)
	}
	if _, err := n.Request(ctx, KindName, id, &pb.CatalogChange{Name: name}, cluster.Idempotent()); err != nil {
		return fmt.Errorf("continuation: catalog change %q to node %s: %w", name, m.ID, err)
	}
	return nil
}

// grainOn finds a continuation grain id placed on member id.
func grainOn(n Cluster, member string) (string, bool) {
	for i := range catalogTries {
		id := fmt.Sprintf("catalog-%s-%d", member, i)
		if o, ok := n.Owner(KindName, id); ok && o.ID == member {
			return id, true
		}
	}
	return "", false
}
