// Package cluster runs an mcpgrain node: a protoactor-go actor system with
// gRPC remoting, a membership provider, a placement actor that hosts this
// node's grain activations, and the client side of grain requests.
//
// Seed terms and what replaces them here:
//
//	Durable Object instance  → grain activation (one per identity, cluster-wide)
//	hibernation              → passivation (activation dropped, record kept in the store)
//	isolate                  → node
//	DO stub call             → Node.Request(ctx, kind, identity, msg)
//
// We use protoactor's actor and remote layers (fast, solid) but not its
// cluster layer. That layer has no single-activation guarantee, drops
// requests that race a passivating grain, blocks a member that left for ever
// (so nodes cannot rejoin after a Consul restart without a process restart)
// and retries with nanosecond backoff (docs/design.md, "Cluster layer", has
// the table).
// This package owns those guarantees instead:
//
//   - membership comes from a [membership.Provider] (Consul, single, memory);
//   - placement is rendezvous hashing over members hosting the kind, and a
//     placement actor only activates grains it owns under its view;
//   - an activation takes ownership in the store (epoch+1) and every write is
//     fenced by that epoch, so a stale duplicate can never overwrite state;
//   - passivation is a handshake with the placement actor, so no request is
//     lost; callers retry "not here / not now" replies with short backoff.
//
// A Node is the [grain.Cluster] of the grains it hosts (their
// [grain.Context] delegates to it) and of the kinds its Config.Hosts build:
// grains reach each other with Request, Tell and Broadcast, and nothing is
// wired to the node after it started.
package cluster
