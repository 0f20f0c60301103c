// Package exchange owns the exchange between a gateway and a grain: how an
// MCP Streamable HTTP request reaches the grain that serves it and how the
// response streams back. Both ends live here, with the vocabulary they
// share — the grain kinds the gateway addresses (kinds.go), the headers a
// grain adds for its handlers (identity.go), JSON-RPC error answers and
// the restart envelope (jsonrpc.go), and the sealed requestState tokens of
// sessionless retries (subpackage requeststate).
//
// One exchange, from the gateway's side (forward.go):
//
//  1. Forwarder.Forward opens a response stream (stream.go) and sends an
//     HttpExchange — method, path, forwarded headers, body, caller, the
//     address of the Forwarder's replies process — to the grain with
//     cluster.Node.Request.
//  2. The grain (serve.go) starts the handler in a goroutine and answers
//     the request with ExchangeStarted, carrying the response's first
//     frame when it is ready within a few milliseconds (a quick answer is
//     one request and one reply).
//  3. Later frames go to the replies process, which hands each to the
//     stream of its exchange id. If the response goes on after the
//     reply, the Forwarder's one follower actor (follow.go) watches the
//     activation for every stream following it (a Terminated arrives if
//     it dies), and the stream watches its node's membership
//     (cluster.Node.Departed).
//  4. The relay (relay.go) — a pure state machine over frames and failures
//     — decides what the client sees; a thin loop performs its actions.
//
// So an exchange's response has three return paths: the first frame in the
// reply, later frames through the replies process, and failures through the
// watch and the membership view. The relay is where they meet.
//
// The gateway imports this package and not the grains: it links none of
// the sandbox, esbuild or go-sdk's server.
package exchange
