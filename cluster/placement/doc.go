// Package placement decides where a grain lives and makes sure it lives only
// there.
//
// [Table] is the pure part: rendezvous hashing over the members of a
// membership view that host a kind. [Props] is the node's placement actor:
// the only way into a grain. It forwards requests it does not own, activates
// grains it does (the activation takes ownership in the store with a new
// epoch before it handles anything, and every save is fenced by that epoch),
// and deactivates them through a handshake that cannot lose a request.
//
// The guarantee is single ownership of writes: two activations of one grain
// can briefly exist while views disagree (a membership change in flight, a
// frozen node thawing), but only the one holding the newest epoch can write;
// the other's first write fails and it stops. Membership lapses (a frozen
// process, an unreachable Consul) make a node drop all its activations at
// once rather than wait for a fenced write.
package placement
