package toolpacks

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Catalog keeps the catalogs (tools, prompts, resources) of a node's
// shared servers equal to every other node's when they change at run
// time. A pack does not change its server directly: it defines a named
// change once ([Catalog.Define]) and applies it by name ([Catalog.Apply]),
// which runs it on every server of this node that has the pack and hands
// the name to the broadcast, which asks the other nodes to do the same
// ([Catalog.ApplyLocal]). Each server then announces the change to its own
// clients as go-sdk does (notifications/*/list_changed to legacy sessions,
// and to the listen streams of 2026-07-28 clients that opted in), so a
// client hears of a change wherever in the cluster its session or listen
// stream lives, and a list reads the same on every node.
//
// The zero value is not usable; a nil *Catalog in [Options] gives each
// server a catalog of its own (no other servers, no broadcast).
type Catalog struct {
	mu        sync.Mutex
	changes   map[string]map[*mcp.Server]func(*mcp.Server) // name -> server -> change
	broadcast func(ctx context.Context, name string) error
}

// NewCatalog returns a node's catalog. broadcast (may be nil: a single
// node) asks every other node to apply a named change; the node sets it
// with [Catalog.SetBroadcast] once it has joined its cluster.
func NewCatalog() *Catalog {
	return &Catalog{changes: map[string]map[*mcp.Server]func(*mcp.Server){}}
}

// SetBroadcast sets how a change reaches the other nodes.
func (c *Catalog) SetBroadcast(broadcast func(ctx context.Context, name string) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broadcast = broadcast
}

// Define binds the change name to one server (a pack calls it while it
// registers on that server, through its Env's Catalog).
func (c *Catalog) Define(name string, s *mcp.Server, change func(*mcp.Server)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changes[name] == nil {
		c.changes[name] = map[*mcp.Server]func(*mcp.Server){}
	}
	c.changes[name][s] = change
}

// forget unbinds every change of server s (its closer calls it).
func (c *Catalog) forget(s *mcp.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, bound := range c.changes {
		delete(bound, s)
	}
}

// Apply runs the named change on this node's servers and then on every
// other node's. The local change is made even when the broadcast fails;
// the error then says which part did not reach the cluster.
func (c *Catalog) Apply(ctx context.Context, name string) error {
	if err := c.ApplyLocal(name); err != nil {
		return err
	}
	c.mu.Lock()
	broadcast := c.broadcast
	c.mu.Unlock()
	if broadcast == nil {
		return nil
	}
	if err := broadcast(ctx, name); err != nil {
		return fmt.Errorf("toolpacks: catalog change %q reached only part of the cluster: %w", name, err)
	}
	return nil
}

// ApplyLocal runs the named change on this node's servers only: what a
// node does when another node broadcasts one. An unknown name is an
// error (the nodes run different packs or versions).
func (c *Catalog) ApplyLocal(name string) error {
	c.mu.Lock()
	bound := c.changes[name]
	type run struct {
		s      *mcp.Server
		change func(*mcp.Server)
	}
	runs := make([]run, 0, len(bound))
	for s, change := range bound {
		runs = append(runs, run{s, change})
	}
	c.mu.Unlock()
	if len(runs) == 0 {
		return fmt.Errorf("toolpacks: unknown catalog change %q (does this node serve the pack that defines it?)", name)
	}
	for _, r := range runs {
		r.change(r.s)
	}
	return nil
}
