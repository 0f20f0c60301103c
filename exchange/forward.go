package exchange

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpgrain/mcpgrain/cluster"
	"github.com/mcpgrain/mcpgrain/cluster/grain"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// forwardedHeaders are the HTTP request headers the MCP handler in the
// grain needs besides MCP's own (Forwarded); everything else (notably
// Authorization and cookies) stays at the gateway.
var forwardedHeaders = []string{"Accept", "Content-Type", "Last-Event-Id", "Origin", "User-Agent"}

// mcpHeaderPrefix starts the names of MCP's own headers (Mcp-Session-Id,
// Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*, and whatever a
// later revision adds): every one is forwarded.
const mcpHeaderPrefix = "Mcp-"

// Forwarded reports whether the gateway forwards the request header name
// (canonical form) to the grain.
func Forwarded(name string) bool {
	return strings.HasPrefix(name, mcpHeaderPrefix) || slices.Contains(forwardedHeaders, name)
}

// departedSilence is how long an exchange whose node left the membership
// view may stay silent before the gateway gives up on it.
const departedSilence = 3 * time.Second

// goneGrace is how long the gateway waits for the end of a response whose
// activation terminated: its last frames may still be in flight.
const goneGrace = 250 * time.Millisecond

// DefaultStreamKeepalive is how long an SSE response stream (a POST's, a
// GET stream, a subscriptions/listen stream) may stay quiet before the
// gateway writes a keepalive comment on it (KeepaliveComment): well under
// the 60–125 s after which common proxies and platforms cut idle streams.
// The node's --stream-keepalive defaults to it.
const DefaultStreamKeepalive = 20 * time.Second

// Forwarder is the gateway end of exchanges: it forwards an authenticated
// HTTP request to the grain that serves it and relays the grain's response
// to the client.
type Forwarder struct {
	node         *cluster.Node
	log          *slog.Logger
	startTimeout time.Duration
	keepalive    time.Duration // 0: none
	replies      *replies
}

// NewForwarder returns the gateway end of exchanges with node's grains.
// startTimeout bounds how long a request waits for its grain to start
// serving it (restore or move included) before the client gets the
// restart envelope; a GET (open or resume a stream) waits three times as
// long. keepalive is how long an SSE response may stay quiet before a
// keepalive comment goes out on it (zero: DefaultStreamKeepalive;
// negative: never).
func NewForwarder(node *cluster.Node, log *slog.Logger, startTimeout, keepalive time.Duration) *Forwarder {
	switch {
	case keepalive == 0:
		keepalive = DefaultStreamKeepalive
	case keepalive < 0:
		keepalive = 0
	}
	return &Forwarder{node: node, log: log, startTimeout: startTimeout, keepalive: keepalive, replies: newReplies(node.ActorSystem())}
}

// Keepalive is how long a relayed SSE stream may stay quiet before a
// keepalive comment goes out on it, as NewForwarder resolved it (0: none).
func (f *Forwarder) Keepalive() time.Duration { return f.keepalive }

// Target is the grain a request goes to and what the gateway knows about
// it.
type Target struct {
	// Kind and ID address the grain (KindSession or KindContinuation).
	Kind, ID string
	// Principal is the authenticated caller.
	Principal *pb.Principal
	// Body is the request body, read and bounded by the gateway.
	Body []byte
	// RequestID is the id of the single JSON-RPC request in Body (nil for
	// a notification, a batch or a body that is not JSON): what
	// [RequestID] reads of it. The gateway parses the body once and
	// passes the id along, so the answers Forward writes itself carry it.
	RequestID json.RawMessage
	// Create says the request initializes a new session with this id.
	Create bool
	// Trace is what the gateway read of Body for its span, with tracing
	// on (nil: the span decodes Body itself).
	Trace *tracing.Message
}

// Forward forwards r to t's grain and relays the response to w, until the
// response ends, its activation dies, or the client goes away.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, t Target) {
	if tracing.On() {
		var end func()
		w, r, end = traced(w, r, t)
		defer end()
	}
	x, reqID, resume := outbound(r, t, f.replies.pid)
	stream := f.replies.open(x.GetExchangeId())
	defer stream.close()
	started, err := f.start(r, t, x)
	if err != nil {
		if resume && r.Context().Err() == nil {
			// A failed resume would end the client's session: answer the
			// request it waits for instead.
			f.log.Info("mcp stream resume failed; answered its request with the restart envelope", "session", t.ID, "err", err)
			WriteLostStream(w, reqID)
			return
		}
		f.failed(w, r, t.ID, reqID, err)
		return
	}
	if started.GetStatus() != pb.SessionReply_STATUS_OK {
		writeStatus(w, reqID, started.GetStatus())
		return
	}
	var departed <-chan struct{}
	if first := started.GetFirst(); first == nil || !first.GetEnd() {
		// The response goes on after the reply: follow the activation that
		// streams it. (A complete first frame costs no watch, no unwatch:
		// for a quick answer the request and its reply are the only
		// messages.)
		stream.watch(actor.NewPID(started.GetGrainAddress(), started.GetGrainId()))
		dctx, stopWatching := context.WithCancel(r.Context())
		defer stopWatching()
		departed = f.node.Departed(dctx, started.GetGrainAddress())
	}
	s := newRelay(reqID, resume)
	s.early = opensEarly(r, s.answerable)
	loop := relayIO{f: f, w: w, r: r, t: t, exchangeID: x.GetExchangeId(), reqID: reqID}
	loop.run(&s, started.GetFirst(), stream, departed)
}

// opensEarly reports whether the gateway may open the response to r as an
// event stream itself, when the response is slow to start, so it can
// carry keepalives: a POST of one call (answerable) whose client accepts
// an event stream.
func opensEarly(r *http.Request, answerable bool) bool {
	if r.Method != http.MethodPost || !answerable {
		return false
	}
	for _, v := range r.Header["Accept"] { // canonical: no Values (it canonicalizes)
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// outbound is the exchange message for r, the JSON-RPC id of the request
// whose response stream it is — from the body, or for a resumed stream from
// the tag on its Last-Event-ID (eventid.go), which is forwarded without
// the tag — and whether it resumes a stream.
func outbound(r *http.Request, t Target, reply *actor.PID) (x *pb.HttpExchange, reqID json.RawMessage, resume bool) {
	n := 0
	for name, vs := range r.Header {
		if len(vs) > 0 && Forwarded(name) {
			n++
		}
	}
	// The message and its headers' messages and pointers in one
	// allocation when they fit (a client's request forwards ≈ 5–7).
	var hs []pb.HttpHeader
	if n <= outboundHeaders {
		m := &outboundMessage{}
		x, hs = &m.x, m.headers[:n]
		x.Headers = m.pointers[:0:n]
	} else {
		x, hs = &pb.HttpExchange{}, make([]pb.HttpHeader, n)
		x.Headers = make([]*pb.HttpHeader, 0, n)
	}
	fillOutbound(x, r, t, reply)
	if r.Method == http.MethodPost {
		reqID = t.RequestID
	}
	for name, vs := range r.Header {
		if len(vs) == 0 || !Forwarded(name) || len(x.Headers) == n {
			continue
		}
		if name == "Last-Event-Id" && r.Method == http.MethodGet && len(vs) == 1 {
			if base, id, ok := splitEventID(vs[0]); ok {
				vs, reqID, resume = []string{base}, id, true
			}
		}
		h := &hs[len(x.Headers)]
		h.Name, h.Values = name, vs
		x.Headers = append(x.Headers, h)
	}
	return x, reqID, resume
}

// outboundHeaders is how many forwarded headers an exchange message holds
// in its own allocation (outboundMessage).
const outboundHeaders = 8

// outboundMessage is an exchange message with room for its headers.
type outboundMessage struct {
	x        pb.HttpExchange
	headers  [outboundHeaders]pb.HttpHeader
	pointers [outboundHeaders]*pb.HttpHeader
}

// fillOutbound sets x's fields other than its headers.
func fillOutbound(x *pb.HttpExchange, r *http.Request, t Target, reply *actor.PID) {
	x.ExchangeId = rand.Text()
	x.Method = r.Method
	x.Path = r.URL.Path
	x.RawQuery = r.URL.RawQuery
	x.Body = t.Body
	x.Principal = t.Principal
	x.ReplyAddress = reply.GetAddress()
	x.ReplyId = reply.GetId()
	x.Create = t.Create
	x.Host = r.Host
	x.FirstFrameInReply = true
	x.TraceContext = tracing.Inject(r.Context())
}

// RequestID is the id of the single JSON-RPC message in body, or nil (a
// batch, a notification, not JSON).
func RequestID(body []byte) json.RawMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	return m.ID
}

// start sends x to t's grain and waits for the grain to start serving it.
// A GET (open or resume a stream) has no side effects, so it is retried
// through a restore or a move for longer: go-sdk's client treats a failed
// stream reconnect as the end of the session.
func (f *Forwarder) start(r *http.Request, t Target, x *pb.HttpExchange) (*pb.ExchangeStarted, error) {
	// The start's bound is a deadline option, not a derived context: the
	// request's own context still ends the wait if the client leaves.
	timeout, idem := f.startTimeout, false
	if r.Method == http.MethodGet {
		timeout, idem = 3*f.startTimeout, true
	}
	o := grain.CallOptions{Deadline: time.Now().Add(timeout), Idempotent: idem}
	res, err := f.node.RequestWith(r.Context(), t.Kind, t.ID, x, o)
	if err != nil {
		return nil, err
	}
	started, ok := res.(*pb.ExchangeStarted)
	if !ok {
		return nil, fmt.Errorf("exchange: unexpected reply %T", res)
	}
	return started, nil
}

// Delete ends the session sid for its owner p (DELETE /mcp).
func (f *Forwarder) Delete(w http.ResponseWriter, r *http.Request, p *pb.Principal, sid string) {
	ctx, cancel := context.WithTimeout(r.Context(), f.startTimeout)
	defer cancel()
	res, err := f.node.Request(ctx, KindSession, sid, &pb.SessionDelete{Principal: p})
	if err != nil {
		f.failed(w, r, sid, nil, err)
		return
	}
	reply, ok := res.(*pb.SessionReply)
	if !ok {
		f.failed(w, r, sid, nil, fmt.Errorf("exchange: unexpected reply %T", res))
		return
	}
	if reply.GetStatus() != pb.SessionReply_STATUS_OK {
		writeStatus(w, nil, reply.GetStatus())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeStatus answers the request with id, which the grain refused.
func writeStatus(w http.ResponseWriter, id json.RawMessage, st pb.SessionReply_Status) {
	switch st {
	case pb.SessionReply_STATUS_FORBIDDEN:
		WriteError(w, http.StatusForbidden, id, CodeForbidden, "MCP session does not belong to the current bearer")
	case pb.SessionReply_STATUS_ENDED:
		WriteError(w, http.StatusNotFound, id, CodeServerError, "Session timed out, please reconnect")
	case pb.SessionReply_STATUS_EXISTS:
		WriteRestarting(w, id) // a minted id collided: practically impossible; the retry mints another
	default:
		WriteError(w, http.StatusNotFound, id, CodeServerError, "Session not found")
	}
}

// failed maps a failed grain request to a response: the restart envelope
// for anything transient (including a store outage that outlasted the
// retries of an idempotent request), 500 otherwise.
func (f *Forwarder) failed(w http.ResponseWriter, r *http.Request, sid string, id json.RawMessage, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	ge, isGrain := grain.AsError(err)
	if isGrain && !ge.Retryable() && ge.Code != pb.GrainError_CODE_STORE_UNAVAILABLE {
		f.log.Warn("mcp request failed", "session", sid, "err", err)
		WriteError(w, http.StatusInternalServerError, id, CodeServerError, "Internal error")
		return
	}
	f.log.Info("mcp session not answering in time; sent restart envelope", "session", sid, "err", err)
	WriteRestarting(w, id)
}

// relayIO performs a relay's actions for one exchange: the I/O half of
// the relay (relay.go holds the decisions).
type relayIO struct {
	f          *Forwarder
	w          http.ResponseWriter
	r          *http.Request
	t          Target
	exchangeID string
	reqID      json.RawMessage

	silence, grace *time.Timer
	quiet          *time.Timer // the keepalive interval since the last write (nil: no keepalive)
}

// run feeds s the response's frames and failures until it is done.
func (l *relayIO) run(s *relay, first *pb.ExchangeFrame, stream *responseStream, departed <-chan struct{}) {
	defer l.stopTimers()
	rc := http.NewResponseController(l.w)
	if first != nil {
		acts := s.step(event{kind: evFrame, frame: first})
		l.do(rc, acts.list())
	}
	// The keepalive interval starts after the first frame's writes (a
	// write restarts it anyway): a response complete in its first frame —
	// a quick answer, a 202 — needs no timer.
	if l.f.keepalive > 0 && !s.done {
		l.quiet = time.NewTimer(l.f.keepalive)
	}
	for !s.done {
		var ev event
		select {
		case <-departed:
			departed = nil
			ev.kind = evDeparted
		case <-timerC(l.silence):
			ev.kind = evSilent
		case <-timerC(l.grace):
			ev.kind = evGraceOver
		case <-l.r.Context().Done():
			ev.kind = evClientGone
		case <-timerC(l.quiet):
			// Rearmed first: a keepalive written now rearms it again.
			l.quiet.Reset(l.f.keepalive)
			ev.kind = evQuiet
		case <-stream.ready:
			l.deliver(s, rc, stream.take())
			continue
		}
		acts := s.step(ev)
		l.do(rc, acts.list())
	}
}

// deliver steps s through what the response stream queued, in order,
// until s is done.
func (l *relayIO) deliver(s *relay, rc *http.ResponseController, queued []any) {
	for _, m := range queued {
		if s.done {
			return
		}
		var ev event
		switch m := m.(type) {
		case *pb.ExchangeFrame:
			ev = event{kind: evFrame, frame: m}
		case grainGone:
			ev.kind = evGrainGone
		default:
			continue
		}
		acts := s.step(ev)
		l.do(rc, acts.list())
	}
}

// addHeader adds the fields of a response's head to h, as h.Add of each
// value would, sharing their values (each head is a frame's own; clipped,
// so an append copies) instead of a new slice per field.
func addHeader(h http.Header, fields []*pb.HttpHeader) {
	for _, f := range fields {
		vs := f.GetValues()
		if len(vs) == 0 {
			continue
		}
		k := textproto.CanonicalMIMEHeaderKey(f.GetName())
		if old := h[k]; old != nil {
			h[k] = append(old, vs...)
			continue
		}
		h[k] = slices.Clip(vs)
	}
}

// do performs actions. Write errors are ignored: the client is gone, and
// its context ending ends the loop.
func (l *relayIO) do(rc *http.ResponseController, as []action) {
	for _, a := range as {
		switch a.kind {
		case actWriteHead:
			addHeader(l.w.Header(), a.headers)
			l.w.WriteHeader(a.status)
		case actWrite:
			_, _ = l.w.Write(a.data)
			if l.quiet != nil {
				l.quiet.Reset(l.f.keepalive)
			}
		case actFlush:
			_ = rc.Flush()
		case actWriteLostStream:
			WriteLostStream(l.w, l.reqID)
		case actWriteRestarting:
			WriteRestarting(l.w, l.reqID)
		case actArmSilence:
			l.silence = rearm(l.silence, departedSilence)
		case actArmGrace:
			l.grace = rearm(l.grace, goneGrace)
		case actCancel:
			go l.f.cancel(l.t, l.exchangeID)
		case actLog:
			args := []any{"kind", l.t.Kind, "id", l.t.ID}
			if a.err != "" {
				args = append(args, "err", a.err)
			}
			l.f.log.Log(l.r.Context(), a.level, a.msg, args...)
		}
	}
}

func (l *relayIO) stopTimers() {
	for _, t := range []*time.Timer{l.silence, l.grace, l.quiet} {
		if t != nil {
			t.Stop()
		}
	}
}

// cancel tells the grain the client of exchange id went away, so its
// handler stops.
func (f *Forwarder) cancel(t Target, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = f.node.Request(ctx, t.Kind, t.ID, &pb.ExchangeCancel{ExchangeId: id})
}

// rearm starts t (or a new timer) to fire after d.
func rearm(t *time.Timer, d time.Duration) *time.Timer {
	if t == nil {
		return time.NewTimer(d)
	}
	t.Reset(d)
	return t
}

// timerC is t's channel, or nil (never ready) without a timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}
