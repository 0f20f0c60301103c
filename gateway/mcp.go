package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
	"github.com/mcpgrain/mcpgrain/gateway/requeststate"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// JSON-RPC error codes the gateway itself answers with.
const (
	// CodeServerError is the seed's -32001: unauthorized, session not found,
	// session restarting.
	CodeServerError = -32001
	// CodeForbidden is -32003: the session belongs to another principal.
	CodeForbidden = -32003
	// CodeInvalidRequest is JSON-RPC's -32600.
	CodeInvalidRequest = -32600
	// CodeParseError is JSON-RPC's -32700.
	CodeParseError = -32700
)

// DefaultMaxBody is the request body limit (413 beyond it).
const DefaultMaxBody = 4 << 20

// Headers the MCP handler in the grain needs; everything else (notably
// Authorization and cookies) stays at the gateway.
var forwardedHeaders = []string{
	"Accept", "Content-Type", "Last-Event-Id", "Mcp-Session-Id", "Mcp-Protocol-Version",
	"Mcp-Method", "Mcp-Name", "Origin", "User-Agent",
}

// MCPOptions configure the /mcp endpoint.
type MCPOptions struct {
	// Auth authenticates callers (required).
	Auth *auth.Authenticator
	// Limiter rate-limits callers per principal (nil: unlimited).
	Limiter *auth.Limiter
	// MaxBody bounds request bodies. Default 4 MiB.
	MaxBody int64
	// TrustedOrigins are browser origins allowed to call /mcp besides the
	// server's own (e.g. "https://app.example.com").
	TrustedOrigins []string
	// StateKey verifies the requestState of 2026-07-28 retries (required to
	// serve that era; the continuation grains sign with the same key).
	StateKey []byte
	// StartTimeout bounds how long the gateway waits for the session to
	// start serving an exchange (restore or move included) before answering
	// with the 503 restart envelope. Default 10s.
	StartTimeout time.Duration
}

type mcpHandler struct {
	node    *cluster.Node
	log     *slog.Logger
	o       MCPOptions
	origins *http.CrossOriginProtection
	// continuationSeq spreads fresh sessionless requests over this node's
	// continuation grains.
	continuationSeq atomic.Uint64
}

func newMCPHandler(node *cluster.Node, log *slog.Logger, o MCPOptions) (*mcpHandler, error) {
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 10 * time.Second
	}
	if err := requeststate.CheckKey(o.StateKey); err != nil {
		return nil, fmt.Errorf("gateway: requestState key: %w", err)
	}
	cop := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("gateway: trusted origin %q: %w", origin, err)
		}
	}
	return &mcpHandler{node: node, log: log, o: o, origins: cop}, nil
}

// writeRPCError writes a JSON-RPC error response (id null) with status.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// writeRestarting writes the seed's restart envelope: the session is being
// restored or moved and could not answer in time; the client should retry.
func writeRestarting(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "2")
	writeRPCError(w, http.StatusServiceUnavailable, CodeServerError, "MCP session is restarting, please retry")
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func (h *mcpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeRPCError(w, http.StatusMethodNotAllowed, CodeServerError, "Method not allowed")
		return
	}
	// DNS rebinding: a request that reached a loopback listener must name
	// a loopback host.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && isLoopback(la.String()) && !isLoopback(r.Host) {
		writeRPCError(w, http.StatusForbidden, CodeServerError, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host))
		return
	}
	if err := h.origins.Check(r); err != nil {
		writeRPCError(w, http.StatusForbidden, CodeServerError, "Forbidden: cross-origin request")
		return
	}
	principal, err := h.o.Auth.Authenticate(r)
	if err != nil {
		var ae *auth.Error
		if errors.As(err, &ae) {
			if ae.WWWAuthenticate != "" {
				w.Header().Set("WWW-Authenticate", ae.WWWAuthenticate)
			}
			writeRPCError(w, ae.Status, CodeServerError, ae.Message)
			return
		}
		writeRPCError(w, http.StatusUnauthorized, CodeServerError, "Unauthorized")
		return
	}
	if h.o.Limiter != nil {
		if ok, retry := h.o.Limiter.Allow(principal); !ok {
			w.Header().Set("Retry-After", auth.RetryAfterSeconds(retry))
			writeRPCError(w, http.StatusTooManyRequests, CodeServerError, "Too many requests, please retry later")
			return
		}
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(mcp.SupportedProtocolVersions(), v) {
		writeRPCError(w, http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("Bad Request: Unsupported protocol version %q (supported versions: %s)", v, strings.Join(mcp.SupportedProtocolVersions(), ",")))
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, CodeInvalidRequest, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
				return
			}
			writeRPCError(w, http.StatusBadRequest, CodeParseError, "failed to read request body")
			return
		}
	}
	if isModern(r, body) {
		h.modern(w, r, principal, body)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid != "" && !validSessionID(sid) {
		writeRPCError(w, http.StatusNotFound, CodeServerError, "Session not found")
		return
	}
	switch {
	case r.Method == http.MethodDelete && sid != "":
		h.delete(w, r, principal, sid)
	case sid != "":
		h.exchange(w, r, principal, session.KindName, sid, body, false)
	case r.Method == http.MethodPost && isInitialize(body):
		h.exchange(w, r, principal, session.KindName, rand.Text(), body, true)
	default:
		writeRPCError(w, http.StatusBadRequest, CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
	}
}

// validSessionID accepts the ids we mint and anything that could be one:
// visible ASCII, bounded length.
func validSessionID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// isInitialize peeks whether body is a single JSON-RPC initialize request.
func isInitialize(body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var peek struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &peek) == nil && peek.Method == "initialize"
}

func (h *mcpHandler) statusError(w http.ResponseWriter, st pb.SessionReply_Status) {
	switch st {
	case pb.SessionReply_STATUS_FORBIDDEN:
		writeRPCError(w, http.StatusForbidden, CodeForbidden, "MCP session does not belong to the current bearer")
	case pb.SessionReply_STATUS_ENDED:
		writeRPCError(w, http.StatusNotFound, CodeServerError, "Session timed out, please reconnect")
	case pb.SessionReply_STATUS_EXISTS:
		writeRestarting(w) // a minted id collided: practically impossible; the retry mints another
	default:
		writeRPCError(w, http.StatusNotFound, CodeServerError, "Session not found")
	}
}

// requestFailed maps a failed grain request to a response: the restart
// envelope for anything transient, 500 otherwise.
func (h *mcpHandler) requestFailed(w http.ResponseWriter, r *http.Request, sid string, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	ge, isGrain := grain.AsError(err)
	if isGrain && !ge.Retryable() && ge.Code != pb.GrainError_CODE_UNAVAILABLE {
		h.log.Warn("mcp request failed", "session", sid, "err", err)
		writeRPCError(w, http.StatusInternalServerError, CodeServerError, "Internal error")
		return
	}
	h.log.Info("mcp session not answering in time; sent restart envelope", "session", sid, "err", err)
	writeRestarting(w)
}

func (h *mcpHandler) delete(w http.ResponseWriter, r *http.Request, p *pb.Principal, sid string) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.StartTimeout)
	defer cancel()
	res, err := h.node.Request(ctx, session.KindName, sid, &pb.SessionDelete{Principal: p})
	if err != nil {
		h.requestFailed(w, r, sid, err)
		return
	}
	reply, ok := res.(*pb.SessionReply)
	if !ok {
		h.requestFailed(w, r, sid, fmt.Errorf("unexpected reply %T", res))
		return
	}
	if reply.GetStatus() != pb.SessionReply_STATUS_OK {
		h.statusError(w, reply.GetStatus())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *mcpHandler) exchange(w http.ResponseWriter, r *http.Request, p *pb.Principal, kind, sid string, body []byte, create bool) {
	stream := newResponseStream(h.node.ActorSystem())
	defer stream.close()
	x := &pb.HttpExchange{
		ExchangeId:   rand.Text(),
		Method:       r.Method,
		Path:         r.URL.Path,
		RawQuery:     r.URL.RawQuery,
		Body:         body,
		Principal:    p,
		ReplyAddress: stream.pid.GetAddress(),
		ReplyId:      stream.pid.GetId(),
		Create:       create,
		Host:         r.Host,
	}
	for _, name := range forwardedHeaders {
		if vs := r.Header.Values(name); len(vs) > 0 {
			x.Headers = append(x.Headers, &pb.HttpHeader{Name: name, Values: vs})
		}
	}
	// A GET (open or resume a stream) has no side effects, so it is retried
	// through a restore or a move for longer: go-sdk's client treats a failed
	// stream reconnect as the end of the session.
	timeout, opts := h.o.StartTimeout, []cluster.CallOption(nil)
	if r.Method == http.MethodGet {
		timeout, opts = 3*h.o.StartTimeout, append(opts, cluster.Idempotent())
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	res, err := h.node.Request(ctx, kind, sid, x, opts...)
	cancel()
	if err != nil {
		h.requestFailed(w, r, sid, err)
		return
	}
	started, ok := res.(*pb.ExchangeStarted)
	if !ok {
		h.requestFailed(w, r, sid, fmt.Errorf("unexpected reply %T", res))
		return
	}
	if started.GetStatus() != pb.SessionReply_STATUS_OK {
		h.statusError(w, started.GetStatus())
		return
	}
	stream.watch(actor.NewPID(started.GetGrainAddress(), started.GetGrainId()))
	h.relay(w, r, kind, sid, x.GetExchangeId(), stream)
}

// relay copies the streamed response to the client until it ends, the
// session's activation dies, or the client goes away.
func (h *mcpHandler) relay(w http.ResponseWriter, r *http.Request, kind, sid, exchangeID string, stream *responseStream) {
	rc := http.NewResponseController(w)
	wroteHead := false
	var gone <-chan time.Time
	for {
		select {
		case <-gone:
			if !wroteHead {
				writeRestarting(w)
			}
			return
		case <-r.Context().Done():
			// The client went away: cancel the handler in the grain.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _ = h.node.Request(ctx, kind, sid, &pb.ExchangeCancel{ExchangeId: exchangeID})
			}()
			return
		case m := <-stream.ch:
			switch m := m.(type) {
			case *pb.ExchangeFrame:
				if hd := m.GetHead(); hd != nil && !wroteHead {
					for _, h := range hd.GetHeaders() {
						for _, v := range h.GetValues() {
							w.Header().Add(h.GetName(), v)
						}
					}
					w.WriteHeader(int(hd.GetStatus()))
					wroteHead = true
				}
				if len(m.GetData()) > 0 {
					if _, err := w.Write(m.GetData()); err != nil {
						continue // the client is gone; the context case ends the loop
					}
				}
				if m.GetEnd() {
					if m.GetError() != "" {
						h.log.Warn("mcp exchange failed in the grain", "kind", kind, "id", sid, "err", m.GetError())
					}
					return
				}
				_ = rc.Flush()
			case grainGone:
				// The activation (or its node) stopped. Its last chunks may
				// still be in flight on another path, so wait briefly for
				// the end. Then: before any byte went out the client can
				// simply retry; after, it sees the stream end and resumes
				// with Last-Event-ID.
				if gone == nil {
					gone = time.After(250 * time.Millisecond)
				}
			}
		}
	}
}
