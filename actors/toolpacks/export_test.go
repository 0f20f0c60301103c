package toolpacks

import (
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NewServerWithWatchInterval is NewServer with the conformance pack's
// watched-resource update interval set to d.
func NewServerWithWatchInterval(impl *mcp.Implementation, packs []string, opts Options, d time.Duration) (*mcp.Server, func(), error) {
	return newServer(impl, packs, opts, internalOptions{watchInterval: d})
}

// LiveWatchedResourceUpdaters is the number of running watched-resource
// updater goroutines in this process.
func LiveWatchedResourceUpdaters() int64 { return liveWatchedResourceUpdaters.Load() }
