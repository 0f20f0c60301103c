package app

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Bounds of the public gRPC endpoint (--grpc). Every byte a client sends
// before it is authenticated is held by the server, so each of these caps
// what an anonymous client can make the node hold:
//
//   - GRPCMaxHeaderListSize bounds a call's metadata (the bearer token
//     travels there), as the HTTP server's 64 KiB bounds its headers.
//     gRPC's default is 16 MiB: 40 calls with a 15 MB authorization value
//     took a node from 41 MiB to 2.3 GiB of RSS, all answered
//     Unauthenticated. The limit is advertised to clients (a well-behaved
//     client refuses to send more) and enforced on what arrives (a header
//     block over it resets the stream or, for one huge field, closes the
//     connection, without buffering it).
//   - GRPCMaxRecvMsgSize bounds one request message. The largest the
//     ApprovalService takes is a decision with at most 64 KiB of content;
//     gRPC's default is 4 MiB.
//   - GRPCMaxSendMsgSize bounds one response message (a listing of up to
//     500 paused executions with their arguments); gRPC's default is
//     unbounded.
//   - GRPCMaxConcurrentStreams bounds the calls one connection may have in
//     flight (and so the metadata it holds at once); gRPC's default is
//     unbounded.
//   - GRPCHandshakeTimeout bounds how long a new connection may take to
//     finish its handshake (TLS and HTTP/2 preface): a client that opens
//     connections and sends nothing holds a goroutine and a socket each.
//     gRPC's default is 120 s.
//   - GRPCMaxConnectionIdle closes a connection without calls for this
//     long (a watch stream is a call, so a live watcher is never idle).
//     gRPC's default is never.
const (
	GRPCMaxHeaderListSize    = 16 << 10
	GRPCMaxRecvMsgSize       = 256 << 10
	GRPCMaxSendMsgSize       = 16 << 20
	GRPCMaxConcurrentStreams = 100
	GRPCHandshakeTimeout     = 10 * time.Second
	GRPCMaxConnectionIdle    = 5 * time.Minute
)

// grpcLimits are the server options that apply the bounds above.
func grpcLimits() []grpc.ServerOption {
	return grpcLimitsWith(GRPCHandshakeTimeout)
}

// grpcLimitsWith is grpcLimits with the handshake timeout as a parameter
// (tests set their own).
func grpcLimitsWith(handshake time.Duration) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(GRPCMaxHeaderListSize),
		grpc.MaxRecvMsgSize(GRPCMaxRecvMsgSize),
		grpc.MaxSendMsgSize(GRPCMaxSendMsgSize),
		grpc.MaxConcurrentStreams(GRPCMaxConcurrentStreams),
		grpc.ConnectionTimeout(handshake),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: GRPCMaxConnectionIdle}),
	}
}
