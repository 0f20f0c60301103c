package continuation

import (
	"context"

	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// BroadcastCatalog returns the broadcast of a node's toolpacks.Catalog: it
// sends a named change (CatalogChange) to one continuation grain on every
// other member that hosts them through c, the node's grain.Cluster (which a
// grain.Host is handed), and waits for every answer. A member that did not
// apply the change is named in the error; the change is idempotent for the
// packs that define one (it is retried like any idempotent request).
func BroadcastCatalog(c grain.Cluster) func(ctx context.Context, name string) error {
	return func(ctx context.Context, name string) error {
		return c.Broadcast(ctx, KindName, &pb.CatalogChange{Name: name}, grain.Idempotent())
	}
}
