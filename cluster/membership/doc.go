// Package membership tells a node which members the cluster has.
//
// A [Provider] registers this node and delivers [Event]s: a new [View] on
// every change, or Suspect when this node's own liveness lease lapsed and the
// others may have dropped it. Three providers exist:
//
//   - consul (subpackage): a real Consul agent, TTL health checks and blocking
//     queries; for clusters;
//   - [Single]: the embedded one-node default of `mcpgrain dev`;
//   - [Network]: several members in one process, for tests, with hooks to
//     give members divergent views.
//
// Unlike protoactor's member list, a view is just the set of live members: a
// member that disappears and comes back (a restarted Consul agent, a thawed
// process) simply rejoins. Safety does not depend on views agreeing; it comes
// from the store's ownership epochs (see package placement).
package membership
