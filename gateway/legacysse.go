package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The HTTP+SSE transport of protocol 2024-11-05 (deprecated, still spoken
// by SSE-only clients): GET /sse opens an event stream whose first event,
// "endpoint", names the URL the client POSTs its messages to; every
// answer, notification and server request arrives on that stream.
//
// Sessions stay grains. The node holding the GET stream (the stream's
// home) runs a small actor, the stream's inbox: a POST to /messages on any
// node is authenticated there and handed to the inbox as an HttpExchange;
// the inbox checks it is the same principal's, forwards it to the session
// grain as the equivalent Streamable HTTP POST (exchange.Forwarder, so the
// grain may live on any node) and writes the response's messages to the
// SSE stream instead of the POST's response, which is 202 Accepted. After
// initialize, the home also holds the session's standalone GET stream
// (server-initiated requests and notifications) and copies it to the SSE
// stream. The session ends (DELETE) when the SSE stream closes: a legacy
// client cannot reattach to it.

// Paths of the HTTP+SSE transport.
const (
	legacySSEPath      = "/sse"
	legacyMessagesPath = "/messages"
)

// legacyInboxPrefix starts the actor name of an SSE stream's inbox.
const legacyInboxPrefix = "legacy-sse-"

// legacyStartWait bounds how long the inbox holds the next POST while a
// request starts at its grain (so messages reach the grain in order).
const legacyStartWait = 10 * time.Second

// supportedTransports names what a client can speak, for the errors of a
// request no transport serves.
const supportedTransports = "supported transports: Streamable HTTP (protocol 2025-03-26 and later) at POST/GET/DELETE /mcp; HTTP+SSE (protocol 2024-11-05) at GET /sse, then POST to the endpoint it announces (/messages?sessionId=…)"

// legacySSE serves /sse and /messages for an MCP handler.
type legacySSE struct {
	h *mcpHandler
}

// writeUnsupported answers a request the legacy transport cannot serve,
// naming the transports that are served.
func writeUnsupported(w http.ResponseWriter, status int, why string) {
	exchange.WriteError(w, status, nil, exchange.CodeInvalidRequest, why+" ("+supportedTransports+")")
}

// observed serves a route of the transport, counted in the gateway's
// request metrics under the era "sse".
func (l *legacySSE) observed(serve func(http.ResponseWriter, *http.Request, *requestLabels)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		labels := requestLabels{era: eraSSE}
		defer func() {
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			l.h.metrics.observe(r, labels, status, time.Since(start))
		}()
		serve(rec, r, &labels)
	}
}

// stream serves GET /sse: a new session's SSE stream.
func (l *legacySSE) stream(w http.ResponseWriter, r *http.Request, _ *requestLabels) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeUnsupported(w, http.StatusMethodNotAllowed, "Method not allowed: "+legacySSEPath+" opens an HTTP+SSE stream with GET")
		return
	}
	if !acceptsEventStream(r.Header.Get("Accept")) {
		writeUnsupported(w, http.StatusNotAcceptable, "Not acceptable: "+legacySSEPath+" answers text/event-stream")
		return
	}
	p, ok := l.h.authenticate(w, r)
	if !ok {
		return
	}
	if l.h.node.Draining() {
		w.Header().Set("Retry-After", "1")
		exchange.WriteError(w, http.StatusServiceUnavailable, nil, exchange.CodeServerError, "this node is stopping; retry (another node will serve the stream)")
		return
	}
	out := &sseOut{w: w, rc: http.NewResponseController(w)}
	defer out.close() // nothing writes to w once the handler returns
	s := &legacyStream{l: l, sid: l.h.newSessionID(), p: p, ctx: r.Context(), host: r.Host, out: out}
	token := rand.Text()
	pid, err := l.h.node.ActorSystem().Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return s }), legacyInboxPrefix+token)
	if err != nil {
		exchange.WriteError(w, http.StatusServiceUnavailable, nil, exchange.CodeServerError, "could not open the stream; retry")
		return
	}
	defer s.end(pid)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	q := url.Values{"sessionId": {s.sid}, "node": {l.h.node.ID()}, "stream": {token}}
	if out.event("endpoint", []byte(legacyMessagesPath+"?"+q.Encode())) != nil {
		return
	}
	l.hold(r.Context(), out)
}

// legacyDrainCheck is how often an open SSE stream checks whether its node
// is draining.
const legacyDrainCheck = time.Second

// hold keeps an SSE stream open, with keepalives, until its client goes
// or its node drains (the client then opens a new stream elsewhere).
func (l *legacySSE) hold(ctx context.Context, out *sseOut) {
	tick := time.NewTicker(legacyDrainCheck)
	defer tick.Stop()
	last, every := time.Now(), l.h.fwd.Keepalive() // the node's --stream-keepalive, as on every MCP stream (0: none)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if l.h.node.Draining() {
				return
			}
			if every > 0 && now.Sub(last) >= every {
				last = now
				if out.comment("keepalive") != nil {
					return
				}
			}
		}
	}
}

// acceptsEventStream reports whether an Accept header admits an SSE
// stream (no header admits anything).
func acceptsEventStream(accept string) bool {
	if accept == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.TrimSpace(mt) {
		case "text/event-stream", "text/*", "*/*":
			return true
		}
	}
	return false
}

// messages serves POST /messages: one client message for the session of
// an SSE stream, handed to the stream's inbox on whichever node holds it.
func (l *legacySSE) messages(w http.ResponseWriter, r *http.Request, labels *requestLabels) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeUnsupported(w, http.StatusMethodNotAllowed, "Method not allowed: "+legacyMessagesPath+" takes the POSTs of an HTTP+SSE session")
		return
	}
	q := r.URL.Query()
	sid, node, token := q.Get("sessionId"), q.Get("node"), q.Get("stream")
	if sid == "" || node == "" || token == "" {
		writeUnsupported(w, http.StatusBadRequest, "Bad Request: POST to the endpoint URL the "+legacySSEPath+" stream announced (sessionId, node and stream are required)")
		return
	}
	p, ok := l.h.authenticate(w, r)
	if !ok {
		return
	}
	raw, ok := l.h.readBody(w, r)
	if !ok {
		return
	}
	body := parseBody(raw)
	labels.method = body.methodLabel()
	if msg := body.oversized(); msg != "" {
		exchange.WriteError(w, http.StatusBadRequest, nil, exchange.CodeInvalidRequest, msg)
		return
	}
	if l.deliver(r.Context(), node, token, &pb.HttpExchange{ExchangeId: token, Method: http.MethodPost, RawQuery: sid, Body: raw, Principal: p}) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("Accepted"))
		return
	}
	// The same answer for an unknown session, a closed stream and another
	// principal's session: nothing about the stream leaks.
	writeUnsupported(w, http.StatusNotFound, "Session not found: open a new stream with GET "+legacySSEPath)
}

// deliver hands a message to the inbox of the stream token on node and
// reports whether the inbox took it.
func (l *legacySSE) deliver(ctx context.Context, node, token string, x *pb.HttpExchange) bool {
	if !validSessionID(token) || !validSessionID(x.GetRawQuery()) {
		return false
	}
	m, ok := l.h.node.View().Member(node)
	if !ok {
		return false
	}
	f := l.h.node.ActorSystem().Root.RequestFuture(actor.NewPID(m.Address, legacyInboxPrefix+token), x, legacyStartWait+l.h.o.StartTimeout+5*time.Second)
	done := make(chan any, 1)
	go func() {
		res, err := f.Result()
		if err != nil {
			res = nil
		}
		done <- res
	}()
	select {
	case <-ctx.Done():
		return false
	case res := <-done:
		st, ok := res.(*pb.ExchangeStarted)
		return ok && st.GetStatus() == pb.SessionReply_STATUS_OK
	}
}

// legacyStream is one SSE stream: its session and its inbox actor.
type legacyStream struct {
	l       *legacySSE
	sid     string
	p       *pb.Principal
	ctx     context.Context // the GET's: ends with the stream
	host    string
	out     *sseOut
	created atomic.Bool
}

// Receive takes the POSTed messages of the stream's session, one at a time.
func (s *legacyStream) Receive(c actor.Context) {
	x, ok := c.Message().(*pb.HttpExchange)
	if !ok {
		return
	}
	st := pb.SessionReply_STATUS_NOT_FOUND
	if x.GetRawQuery() == s.sid && x.GetPrincipal().GetUser() == s.p.GetUser() && x.GetPrincipal().GetOrg() == s.p.GetOrg() && s.ctx.Err() == nil {
		s.post(x.GetBody(), x.GetPrincipal())
		st = pb.SessionReply_STATUS_OK
	}
	c.Respond(&pb.ExchangeStarted{Status: st})
}

// post forwards one message to the session grain as a Streamable HTTP
// POST whose response goes to the SSE stream, and returns once the grain
// has started on it (or legacyStartWait passed).
func (s *legacyStream) post(raw []byte, p *pb.Principal) {
	body := parseBody(raw)
	t := body.target(exchange.KindSession, s.sid, p)
	r, err := http.NewRequestWithContext(s.ctx, http.MethodPost, "/mcp", bytes.NewReader(raw))
	if err != nil {
		return
	}
	r.Host = s.host
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Content-Type", "application/json")
	initialize := body.initialize() && !s.created.Load()
	if initialize {
		t.Create = true
		s.created.Store(true)
	} else {
		r.Header.Set("Mcp-Session-Id", s.sid)
	}
	var reqID []byte
	if body.method() != "" {
		reqID = body.requestID()
	}
	sink := newSSESink(s.out, reqID)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.l.h.fwd.Forward(sink, r, t)
		sink.finish()
		if initialize && sink.status < 300 {
			go s.listen()
		}
	}()
	wait := time.NewTimer(legacyStartWait)
	defer wait.Stop()
	select {
	case <-sink.started:
	case <-done:
	case <-wait.C:
	}
}

// listen copies the session's standalone GET stream (server-initiated
// requests and notifications) to the SSE stream, reopening it when it
// ends (a parked or moved session closes it) until the SSE stream ends or
// the session is gone.
func (s *legacyStream) listen() {
	for s.ctx.Err() == nil {
		r, err := http.NewRequestWithContext(s.ctx, http.MethodGet, "/mcp", nil)
		if err != nil {
			return
		}
		r.Host = s.host
		r.Header.Set("Accept", "text/event-stream")
		r.Header.Set("Mcp-Session-Id", s.sid)
		sink := newSSESink(s.out, nil)
		s.l.h.fwd.Forward(sink, r, exchange.Target{Kind: exchange.KindSession, ID: s.sid, Principal: s.p})
		sink.finish()
		if sink.status >= 400 {
			return
		}
		t := time.NewTimer(time.Second)
		select {
		case <-s.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// end stops the inbox and ends the session: its client cannot reattach.
func (s *legacyStream) end(pid *actor.PID) {
	s.l.h.node.ActorSystem().Root.Stop(pid)
	if !s.created.Load() || s.l.h.node.Draining() {
		// A draining node's sessions move on; an abandoned one expires
		// like any other (--session-ttl).
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.l.h.o.StartTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	s.l.h.fwd.Delete(discardWriter{header: http.Header{}}, r, s.p, s.sid)
}

// discardWriter is a response nobody reads.
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// sseOut writes events to the client's SSE stream, one writer at a time.
type sseOut struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	failed error
}

// event writes one event of type name with data (one data line per line).
func (o *sseOut) event(name string, data []byte) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\n", name)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return o.write(b.Bytes())
}

// comment writes an SSE comment (keeps an idle stream open).
func (o *sseOut) comment(text string) error { return o.write([]byte(": " + text + "\n\n")) }

// close ends the stream for writers: later events fail.
func (o *sseOut) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed == nil {
		o.failed = errors.New("gateway: sse stream closed")
	}
}

func (o *sseOut) write(b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed != nil {
		return o.failed
	}
	if _, err := o.w.Write(b); err != nil {
		o.failed = fmt.Errorf("gateway: sse stream: %w", err)
		return o.failed
	}
	if err := o.rc.Flush(); err != nil {
		o.failed = fmt.Errorf("gateway: sse stream flush: %w", err)
	}
	return o.failed
}
