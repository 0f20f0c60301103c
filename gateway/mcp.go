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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	"github.com/mcpgrain/mcpgrain/exchange"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/gateway/auth"
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
	// BodyTimeout bounds how long reading a request body may take, so a
	// client trickling a body (slow loris) cannot hold a request open.
	// Default 30s; the response then is 408.
	BodyTimeout time.Duration
	// LocalSessionIDs mints the id of a new session among ids this node
	// owns (consistent hashing still places it; the id is chosen so that it
	// lands here): a client that keeps its connection to one gateway then
	// reaches its session without a network hop. Sessions spread as evenly
	// as the load balancer spreads initialize requests. Off: any id, so
	// sessions spread evenly whatever the balancer does.
	LocalSessionIDs bool
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
	metrics         *gatewayMetrics
}

func newMCPHandler(node *cluster.Node, log *slog.Logger, reg prometheus.Registerer, o MCPOptions) (*mcpHandler, error) {
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = 30 * time.Second
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
	m, err := newGatewayMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	return &mcpHandler{node: node, log: log, o: o, origins: cop, metrics: m}, nil
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
func writeRestarting(w http.ResponseWriter) { exchange.WriteRestarting(w) }

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
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	labels := requestLabels{era: eraUnknown}
	defer func() {
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		h.metrics.observe(r, labels, status, time.Since(start))
	}()
	h.serve(rec, r, &labels)
}

func (h *mcpHandler) serve(w http.ResponseWriter, r *http.Request, labels *requestLabels) {
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
			if ae.RetryAfter > 0 {
				w.Header().Set("Retry-After", auth.RetryAfterSeconds(ae.RetryAfter))
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
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(h.o.BodyTimeout))
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
		_ = rc.SetReadDeadline(time.Time{}) // streams live on; only the body had a deadline
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, CodeInvalidRequest, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
				return
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				w.Header().Set("Connection", "close")
				writeRPCError(w, http.StatusRequestTimeout, CodeInvalidRequest, fmt.Sprintf("request body not received within %s", h.o.BodyTimeout))
				return
			}
			writeRPCError(w, http.StatusBadRequest, CodeParseError, "failed to read request body")
			return
		}
	}
	if r.Method == http.MethodPost {
		labels.method = rpcMethodLabel(body)
		if msg := oversizedField(body); msg != "" {
			writeRPCError(w, http.StatusBadRequest, CodeInvalidRequest, msg)
			return
		}
	}
	if isModern(r, body) {
		labels.era = eraSessionless
		h.modern(w, r, principal, body)
		return
	}
	labels.era = eraStateful
	sid := r.Header.Get("Mcp-Session-Id")
	if sid != "" && !validSessionID(sid) {
		writeRPCError(w, http.StatusNotFound, CodeServerError, "Session not found")
		return
	}
	switch {
	case r.Method == http.MethodDelete && sid != "":
		h.delete(w, r, principal, sid)
	case sid != "":
		h.exchange(w, r, principal, exchange.KindSession, sid, body, false)
	case r.Method == http.MethodPost && isInitialize(body):
		h.exchange(w, r, principal, exchange.KindSession, h.newSessionID(), body, true)
	default:
		writeRPCError(w, http.StatusBadRequest, CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
	}
}

// newSessionID mints a session id (rand.Text: 130 random bits), among
// ids this node owns with LocalSessionIDs. Choosing among the ids of one
// of N nodes costs log2(N) bits of the id's entropy.
func (h *mcpHandler) newSessionID() string {
	if !h.o.LocalSessionIDs {
		return rand.Text()
	}
	return h.ownedID(exchange.KindSession, 64, func(int) string { return rand.Text() })
}

// ownedID returns the first of up to tries ids from next that this node
// owns (its grain lives here: no network hop), else the first one (owned
// elsewhere: still works, one hop away).
func (h *mcpHandler) ownedID(kind string, tries int, next func(i int) string) string {
	first := ""
	for i := range tries {
		id := next(i)
		if o, ok := h.node.Owner(kind, id); ok && o.ID == h.node.ID() {
			return id
		}
		if i == 0 {
			first = id
		}
	}
	return first
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
// envelope for anything transient (including a store outage that outlasted
// the retries of an idempotent request), 500 otherwise.
func (h *mcpHandler) requestFailed(w http.ResponseWriter, r *http.Request, sid string, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	ge, isGrain := grain.AsError(err)
	if isGrain && !ge.Retryable() && ge.Code != pb.GrainError_CODE_STORE_UNAVAILABLE {
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
	res, err := h.node.Request(ctx, exchange.KindSession, sid, &pb.SessionDelete{Principal: p})
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
		ExchangeId:        rand.Text(),
		Method:            r.Method,
		Path:              r.URL.Path,
		RawQuery:          r.URL.RawQuery,
		Body:              body,
		Principal:         p,
		ReplyAddress:      stream.pid.GetAddress(),
		ReplyId:           stream.pid.GetId(),
		Create:            create,
		Host:              r.Host,
		FirstFrameInReply: true,
	}
	// The JSON-RPC id of the request whose response stream this is: from
	// the body, or for a resumed stream from the tag on its Last-Event-ID
	// (see resume.go), which is forwarded without the tag.
	var reqID json.RawMessage
	resume := false
	if r.Method == http.MethodPost {
		if pk, ok := peek(body); ok {
			reqID = pk.ID
		}
	}
	for _, name := range forwardedHeaders {
		vs := r.Header.Values(name)
		if len(vs) == 0 {
			continue
		}
		if name == "Last-Event-Id" && r.Method == http.MethodGet && len(vs) == 1 {
			if base, id, ok := splitEventID(vs[0]); ok {
				vs, reqID, resume = []string{base}, id, true
			}
		}
		x.Headers = append(x.Headers, &pb.HttpHeader{Name: name, Values: vs})
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
	started, ok := res.(*pb.ExchangeStarted)
	if err == nil && !ok {
		err = fmt.Errorf("unexpected reply %T", res)
	}
	if err != nil {
		if resume && r.Context().Err() == nil {
			// A failed resume would end the client's session: answer the
			// request it waits for instead.
			h.log.Info("mcp stream resume failed; answered its request with the restart envelope", "session", sid, "err", err)
			writeLostStream(w, reqID)
			return
		}
		h.requestFailed(w, r, sid, err)
		return
	}
	if started.GetStatus() != pb.SessionReply_STATUS_OK {
		h.statusError(w, started.GetStatus())
		return
	}
	var departed <-chan struct{}
	if first := started.GetFirst(); first == nil || !first.GetEnd() {
		// The response goes on after the reply: follow the activation
		// that streams it. (A complete first frame costs no watch, no
		// unwatch: for a quick answer the request and its reply are the
		// only messages.)
		stream.watch(actor.NewPID(started.GetGrainAddress(), started.GetGrainId()))
		dctx, stopWatching := context.WithCancel(r.Context())
		defer stopWatching()
		departed = h.node.Departed(dctx, started.GetGrainAddress())
	}
	h.relay(w, r, kind, sid, x.GetExchangeId(), stream, started.GetFirst(), departed, reqID, resume)
}

// departedSilence is how long an exchange whose node left the membership
// view may stay silent before the gateway gives up on it.
const departedSilence = 3 * time.Second

// relay copies the streamed response to the client until it ends, the
// session's activation dies, or the client goes away.
//
// departed closes when the grain's node leaves the membership view. A
// node that leaves gracefully still finishes (or cancels) its exchanges
// while it drains; a frozen or partitioned one keeps its connection, so no
// termination arrives, and says nothing more. So after the departure the
// exchange is abandoned only once the stream has been silent for
// departedSilence.
//
// first is the response's first frame when it came with the grain's
// answer (ExchangeStarted.first); the rest come through stream.
//
// reqID is the JSON-RPC id of the request whose response stream this is
// (nil for a notification, a batch or the standalone GET stream). If its
// SSE stream breaks before the response went out — the grain's node died,
// froze or drained it — the gateway ends the stream with a retryable
// JSON-RPC error for it (the restart envelope's), so the client gets an
// answer instead of a stream that ends without one. The stream's event ids
// are tagged with reqID, and resume (a GET resuming such a stream) answers
// it the same way when the stream cannot be replayed up to the response
// (resume.go).
func (h *mcpHandler) relay(w http.ResponseWriter, r *http.Request, kind, sid, exchangeID string, stream *responseStream, first *pb.ExchangeFrame, departed <-chan struct{}, reqID json.RawMessage, resume bool) {
	rc := http.NewResponseController(w)
	wroteHead, sse, responded := false, false, false
	answered := [][]byte{}
	if len(reqID) > 0 && string(reqID) != "null" {
		answered = [][]byte{[]byte(`"id":` + string(reqID) + `,"result"`), []byte(`"id":` + string(reqID) + `,"error"`)}
	}
	var tag *idTagger
	if suffix := eventIDSuffix(reqID); suffix != "" {
		tag = &idTagger{suffix: suffix}
	}
	unanswered := func() {
		if sse && !responded && len(answered) > 0 {
			if tag != nil {
				_, _ = w.Write(tag.rest())
			}
			_, _ = w.Write(restartingEvent(reqID))
			_ = rc.Flush()
		}
	}
	broken := func() {
		if wroteHead {
			unanswered()
		} else if resume {
			writeLostStream(w, reqID)
		} else {
			writeRestarting(w)
		}
	}
	// frame relays one frame; it reports whether the response ended.
	frame := func(m *pb.ExchangeFrame) (end bool) {
		if hd := m.GetHead(); hd != nil && !wroteHead {
			if resume && hd.GetStatus() == http.StatusBadRequest {
				// The new owner cannot replay the stream (its
				// events died with the node that had them).
				h.log.Info("mcp stream resume: events lost with their node; answered its request with the restart envelope", "session", sid)
				writeLostStream(w, reqID)
				return true
			}
			for _, h := range hd.GetHeaders() {
				for _, v := range h.GetValues() {
					w.Header().Add(h.GetName(), v)
				}
			}
			w.WriteHeader(int(hd.GetStatus()))
			wroteHead = true
			sse = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
		}
		for _, a := range answered {
			responded = responded || bytes.Contains(m.GetData(), a)
		}
		data := m.GetData()
		if sse && tag != nil {
			data = tag.rewrite(data)
		}
		if len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return false // the client is gone; the context case ends the loop
			}
		}
		if m.GetEnd() {
			if m.GetError() != "" {
				level := slog.LevelWarn
				if strings.HasPrefix(m.GetError(), "cancelled") {
					level = slog.LevelInfo // its runtime closed (passivation, drain)
				}
				h.log.Log(r.Context(), level, "mcp exchange ended early in the grain", "kind", kind, "id", sid, "err", m.GetError())
				broken()
			} else if resume {
				// A replay that ended without the response: the
				// response died with the node that produced it.
				unanswered()
			} else if tag != nil {
				_, _ = w.Write(tag.rest())
			}
			return true
		}
		_ = rc.Flush()
		return false
	}
	if first != nil && frame(first) {
		return
	}
	var gone, silent <-chan time.Time
	var silence *time.Timer
	defer func() {
		if silence != nil {
			silence.Stop()
		}
	}()
	for {
		select {
		case <-departed:
			departed = nil
			silence = time.NewTimer(departedSilence)
			silent = silence.C
		case <-silent:
			h.log.Info("mcp exchange abandoned: the session's node left the membership view and went silent", "kind", kind, "id", sid)
			broken()
			return
		case <-gone:
			broken()
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
			if silence != nil {
				silence.Reset(departedSilence)
			}
			switch m := m.(type) {
			case *pb.ExchangeFrame:
				if frame(m) {
					return
				}
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
