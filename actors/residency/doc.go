// Package residency keeps the per-node registry of resident session runtimes
// and enforces the node's soft cap on them by choosing, never performing,
// evictions.
//
// It re-creates executor's session-runtime-residency.ts (isolate-global
// state shared by all session Durable Objects in a Cloudflare isolate) for
// mcpgrain, where the isolate is a node and a session runtime is the
// in-memory runtime of a session grain activation. One [Registry] per node
// is shared by all session grains on it. The package is pure: no actors, no
// I/O, no clock (every time is passed in), no metrics ([Registry.Counts]
// feeds those from outside); only the [Evictor] runs anything: the
// requests it is handed, on goroutines of their own.
//
// # The protocol
//
//  1. Before every cold build a grain calls [Registry.Admit]. Admission
//     always reserves a build slot, so concurrent builds count against the
//     cap before they land. When resident runtimes plus in-flight builds
//     reach [Config.SoftCap], Admit picks the least-recently-active entry
//     whose CanEvict prefilter says yes and that was not asked within
//     [Config.EvictionGrace], marks it asked, and returns its id.
//  2. The caller sends that grain an eviction request message and goes on
//     building; it never tears the other grain down itself. The candidate
//     re-checks its own state (open streams, paused or running executions)
//     and either disposes its runtime or ignores the request. An ignored or
//     failed request leaves the entry registered; picks skip it until the
//     grace window ends. An [Evictor] sends such requests: each on its own
//     goroutine, bounded by a timeout, a panic of the request recovered,
//     the result reported; a request that fails changes nothing else.
//  3. The cap is soft. When nothing is evictable, [Admission.Overflow] is
//     set and the build proceeds.
//  4. The build releases its [Slot] on every exit path (Release is
//     idempotent, so a deferred Release plus an explicit one is fine) and,
//     only if it succeeded, calls [Registry.Register].
//  5. When the soft cap is lowered under the resident runtimes
//     ([Registry.SetSoftCap] reports it), the node calls [Registry.Trim]
//     on a tick: it chooses a few of the excess a call, least recently
//     active first, counting those already asked as going, and the node
//     sends them eviction requests as in step 2.
//  6. The grain calls [Registry.Touch] on activity and [Registry.Release]
//     when its runtime is disposed (idle, cap eviction, passivation,
//     shutdown). Release is idempotent.
//
// # Example
//
//	reg := residency.New(residency.Config{SoftCap: 32})
//
//	// In a session grain, before a cold build:
//	adm := reg.Admit(now)
//	defer adm.Slot.Release()
//	if adm.Evict != "" {
//		// A message, not a teardown: the candidate re-checks itself.
//		send(adm.Evict, &RequestCapEviction{})
//	}
//	if adm.Overflow {
//		capOverflows.Inc()
//	}
//	rt, err := build(ctx)
//	adm.Slot.Release()
//	if err != nil {
//		return err
//	}
//	reg.Register(residency.Entry{ID: sessionID, CanEvict: rt.CanEvict}, now)
//
//	// On every request:           reg.Touch(sessionID, now)
//	// When the runtime is disposed: reg.Release(sessionID)
//
// CanEvict runs under the registry's lock on other grains' goroutines
// (admissions and picks): it must be cheap, non-blocking, safe for
// concurrent use (read atomics the grain maintains) and must not call the
// Registry. [Registry.Counts] calls it outside the lock, on a copy of the
// entries, so a metrics scrape never holds up an admission for its walk.
package residency
