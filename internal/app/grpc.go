package app

import (
	"google.golang.org/grpc"
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
const (
	GRPCMaxHeaderListSize    = 16 << 10
	GRPCMaxRecvMsgSize       = 256 << 10
	GRPCMaxSendMsgSize       = 16 << 20
	GRPCMaxConcurrentStreams = 100
)

// grpcLimits are the server options that apply the bounds above.
func grpcLimits() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(GRPCMaxHeaderListSize),
		grpc.MaxRecvMsgSize(GRPCMaxRecvMsgSize),
		grpc.MaxSendMsgSize(GRPCMaxSendMsgSize),
		grpc.MaxConcurrentStreams(GRPCMaxConcurrentStreams),
	}
}
