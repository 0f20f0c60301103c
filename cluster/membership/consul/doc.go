// Package consul is a [membership.Provider] backed by a Consul agent: each
// member registers itself as an instance of one Consul service, keeps a TTL
// check passing, and follows the passing instances with blocking queries.
//
// # Why not protoactor's provider
//
// protoactor-go ships cluster/clusterproviders/consul. We do not use it
// because its failure handling is unsafe for a long-running server: a watch
// error (agent restarted, unreachable, 5xx) panics in a goroutine, which kills
// the process; a registration error retries in a tight loop with no delay;
// DeregisterCriticalServiceAfter is fixed; and it only reports the topology,
// with no notion of this member's own lease having lapsed. This package
// replaces it: it is independent of protoactor and speaks only the
// [membership.Provider] contract.
//
// # Registration
//
// The service instance has ID = Member.ID, Name = Config.ClusterName,
// Address/Port split from Member.Address, Tags = Member.Kinds (order kept)
// and Meta = Member.Meta, so every Member field converts back exactly. The
// TTL check ("service:<ID>") starts out passing and expires after
// Config.TTL; after Config.DeregisterCriticalAfter in critical the agent
// removes the instance. Member IDs must not contain '/', addresses must be
// host:port with a canonical port, and meta must follow Consul's rules
// (keys of letters, digits, '_' and '-', not starting with "consul-"); Start
// reports violations.
//
// # Liveness lease and self-suspicion
//
// A refresher passes the check every Config.RefreshInterval. When the agent
// answers but no longer knows the check — it was restarted (a dev agent
// forgets everything) or reaped the instance — the refresher registers
// again. It measures the time since the last successful pass was sent; if
// that exceeds the TTL (the process was frozen, or the agent unreachable
// for longer than the lease), the other members may already have dropped
// this one, so it delivers Event{Suspect: true}, once per lapse, before
// passing the check again.
//
// # Watching
//
// A watcher runs blocking queries on the passing instances of the service
// and publishes a new [membership.View] whenever it changes, starting with
// the first view that contains this member. It follows Consul's
// blocking-query rules: the index is reset when it goes backwards (and
// that answer, older than the published view, is dropped), an index of 0
// is treated as 1, and queries are spaced so an agent that answers at
// once cannot make it spin. A blocking query that comes back unchanged is
// followed by one fresh read (index 0), which the agent answers from the
// servers rather than its streaming view: a view that lags corrects
// itself within one WatchWait. Events are delivered in order by one dispatcher
// goroutine holding no lock, so a slow notify never delays the lease.
//
// # Failures
//
// Every failure (agent down, 5xx, timeout) is retried with exponential
// backoff and jitter until Stop, and logged at WARN once per failure streak
// and then at most every 10 s. While the agent is unreachable the last good
// view stays published: an unreachable agent says nothing about the
// members.
//
// # Removal hold-down
//
// After a discontinuity — a watch error streak ended, the index went
// backwards, or the refresher had to re-register — members re-register one
// by one, and a member briefly missing from Consul's answer is most likely
// coming back. For Config.RemovalHoldDown after a discontinuity such members
// stay in the published view; those still missing when it ends are removed.
// Outside a hold-down a missing member is removed at once, so a killed
// member disappears about one TTL after its last pass.
package consul
