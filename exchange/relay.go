package exchange

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The relay: what the gateway writes to the client while an exchange's
// response streams in.
//
// The response arrives as frames (the first one possibly inside the
// grain's answer, the rest through the replies process), interleaved with
// failures: the activation streaming it terminated, its node left the
// membership view, timers the I/O loop runs on the relay's behalf expired,
// or the client went away. relay.step turns each such event into actions
// (write the head, write bytes, flush, write an envelope, arm a timer,
// cancel the handler in the grain, log) and is pure: relay_test.go walks
// it through tables of events. relayIO.run (forward.go) is the thin
// loop that reads events and performs the actions.
//
// What it decides:
//   - a frame is copied through; on an SSE response its event ids are
//     tagged with the request's JSON-RPC id (eventid.go), so a resume after
//     a node died can still answer the request;
//   - a response stream that breaks before the response went out (the
//     handler ended with an error, the activation died, its node went
//     silent after leaving) ends with the restart envelope's retryable
//     error for that request, so the client gets an answer instead of a
//     stream that ends without one; before any byte went out, the whole
//     answer is the restart envelope (a resume: the lost-stream answer);
//   - a resume whose events died with their node (the new owner answers
//     400) is answered like a broken stream;
//   - a node that left the membership view gracefully still finishes its
//     exchanges while it drains, and a frozen one says nothing, so the
//     exchange is abandoned only after departedSilence without a frame;
//   - a terminated activation's last frames may still be in flight on
//     another path, so its end is awaited for a short grace first;
//   - an SSE stream that stayed quiet for the keepalive interval gets a
//     comment line (KeepaliveComment) between two events, so proxies
//     that cut idle streams keep it open; comments are ignored by every
//     SSE parser, carry no event id and never reach the grain's event log;
//   - a POST call that accepts an event stream and whose response has not
//     started when the keepalive interval ends (no priming event: the
//     2026-07-28 era, sessions before 2025-11-25) is opened as an event
//     stream by the gateway, so it can carry keepalives; the grain's
//     events follow, and a response that turns out not to be an event
//     stream is sent as one message event (its JSON body) when it ends.

// eventKind is what happened to an exchange in flight.
type eventKind uint8

const (
	// evFrame: a frame of the response arrived.
	evFrame eventKind = iota
	// evGrainGone: the activation streaming the response terminated.
	evGrainGone
	// evDeparted: the activation's node left the membership view.
	evDeparted
	// evSilent: after a departure, the stream stayed silent for
	// departedSilence.
	evSilent
	// evGraceOver: the grace after evGrainGone ended without the end.
	evGraceOver
	// evClientGone: the client went away.
	evClientGone
	// evQuiet: nothing was written to the client for the keepalive
	// interval.
	evQuiet
)

// event is one input of the relay.
type event struct {
	kind  eventKind
	frame *pb.ExchangeFrame // evFrame only
}

// actionKind is one kind of output of the relay.
type actionKind uint8

const (
	// actWriteHead writes the response's status and headers.
	actWriteHead actionKind = iota
	// actWrite writes body bytes.
	actWrite
	// actFlush flushes what was written to the client.
	actFlush
	// actWriteLostStream writes the whole answer to a resume whose
	// response cannot be replayed (WriteLostStream).
	actWriteLostStream
	// actWriteRestarting writes the whole restart envelope
	// (WriteRestarting): nothing went out yet.
	actWriteRestarting
	// actArmSilence (re)starts the departedSilence timer (evSilent).
	actArmSilence
	// actArmGrace starts the grace timer after the activation died
	// (evGraceOver).
	actArmGrace
	// actCancel cancels the handler in the grain.
	actCancel
	// actLog logs msg (and err) at level.
	actLog
)

// action is one output of the relay.
type action struct {
	kind    actionKind
	status  int              // actWriteHead
	headers []*pb.HttpHeader // actWriteHead
	data    []byte           // actWrite
	level   slog.Level       // actLog
	msg     string           // actLog
	err     string           // actLog
}

// maxActions bounds the actions of one step.
const maxActions = 6

// actions are the result of one step: a value, so a relay and its steps
// live on the relaying goroutine's stack.
type actions struct {
	n int
	a [maxActions]action
}

func (o *actions) add(as ...action) {
	for _, a := range as {
		o.a[o.n] = a
		o.n++
	}
}

// list returns the actions in order.
func (o *actions) list() []action { return o.a[:o.n] }

// relay is the state of one exchange's response, from the gateway's side.
type relay struct {
	reqID  json.RawMessage // the request whose response stream this is (nil: none)
	resume bool            // a GET resuming a stream by Last-Event-ID
	// answerable: reqID is a request the stream owes a response to.
	answerable bool
	tag        idTagger // tags SSE event ids with reqID (if tagged)
	tagged     bool

	wroteHead bool // the head went out
	sse       bool // the response is an event stream
	responded bool // the response to reqID went out
	departed  bool // the activation's node left the membership view
	grace     bool // the activation died; its end is awaited
	done      bool // the exchange is over for the client

	// tail is the last two bytes written to the client's body (after the
	// tagger): "\n\n" between two SSE events.
	tail [2]byte
	// early: the request may be answered with an event stream the gateway
	// opens itself when the response is slow to start (opensEarly).
	early   bool
	opened  bool   // the gateway opened the event stream (early)
	foreign bool   // ... and the grain's head was not an event stream's
	held    []byte // a foreign response's body, sent as one event at its end
}

// newRelay returns the relay of the response to the request with reqID
// (nil for a notification, a batch or the standalone GET stream); resume
// says the request resumes a stream (Last-Event-ID). Small enough to
// inline, so a relay lives on its caller's stack.
func newRelay(reqID json.RawMessage, resume bool) relay {
	return relay{reqID: reqID, resume: resume, answerable: len(reqID) > 0 && string(reqID) != "null",
		tag: idTagger{reqID: reqID}, tagged: taggable(reqID)}
}

// step returns what to do about ev. After the exchange is done, events
// change nothing.
func (s *relay) step(ev event) (out actions) {
	if s.done {
		return out
	}
	switch ev.kind {
	case evFrame, evGrainGone:
		if s.departed {
			out.add(action{kind: actArmSilence}) // it is not silent
		}
		if ev.kind == evFrame {
			s.frame(&out, ev.frame)
		} else if !s.grace {
			s.grace = true
			out.add(action{kind: actArmGrace})
		}
	case evDeparted:
		s.departed = true
		out.add(action{kind: actArmSilence})
	case evSilent:
		out.add(logAction(slog.LevelInfo, "mcp exchange abandoned: the session's node left the membership view and went silent", ""))
		s.broken(&out)
	case evGraceOver:
		s.broken(&out)
	case evClientGone:
		out.add(action{kind: actCancel})
		s.done = true
	case evQuiet:
		switch {
		case !s.wroteHead && s.early:
			s.wroteHead, s.sse, s.opened = true, true, true
			out.add(action{kind: actWriteHead, status: http.StatusOK, headers: earlyHead})
			s.tail = eventEnd
			fallthrough
		case s.sse && s.tail == eventEnd:
			out.add(action{kind: actWrite, data: KeepaliveComment}, action{kind: actFlush})
		}
	}
	return out
}

// KeepaliveComment is the SSE comment line the gateway writes on an event
// stream that stayed quiet for the keepalive interval. SSE parsers ignore
// comments (lines starting with ':'), so it is invisible to clients; it
// only keeps proxies and load balancers that cut idle streams from cutting
// the stream.
var KeepaliveComment = []byte(": keepalive\n\n")

// earlyHead is the head of an event stream the gateway opens itself.
var earlyHead = []*pb.HttpHeader{
	{Name: "Content-Type", Values: []string{"text/event-stream"}},
	{Name: "Cache-Control", Values: []string{"no-cache, no-transform"}},
}

// eventEnd is how an SSE event ends (go-sdk's line endings).
var eventEnd = [2]byte{'\n', '\n'}

// wrote records that data went to the client's body.
func (s *relay) wrote(data []byte) {
	switch n := len(data); {
	case n >= 2:
		s.tail = [2]byte{data[n-2], data[n-1]}
	case n == 1:
		s.tail = [2]byte{s.tail[1], data[0]}
	}
}

// frame relays one frame of the response.
func (s *relay) frame(out *actions, m *pb.ExchangeFrame) {
	if hd := m.GetHead(); hd != nil && !s.wroteHead {
		if s.resume && hd.GetStatus() == http.StatusBadRequest {
			// The new owner cannot replay the stream (its events died
			// with the node that had them).
			out.add(logAction(slog.LevelInfo, "mcp stream resume: events lost with their node; answered its request with the restart envelope", ""))
			out.add(action{kind: actWriteLostStream})
			s.done = true
			return
		}
		out.add(action{kind: actWriteHead, status: int(hd.GetStatus()), headers: hd.GetHeaders()})
		s.wroteHead = true
		s.sse = isEventStream(hd.GetHeaders())
		s.tail = eventEnd // an empty body is between events
	} else if hd != nil && s.opened && (hd.GetStatus() != http.StatusOK || !isEventStream(hd.GetHeaders())) {
		s.foreign = true
	}
	data := m.GetData()
	if s.foreign {
		s.held = append(s.held, data...)
		data = nil
		if m.GetEnd() && m.GetError() == "" {
			data = messageEvent(s.held)
		}
	}
	if s.answerable && !s.responded {
		s.responded = carriesResponse(data, s.reqID)
	}
	if s.sse && s.tagged {
		data = s.tag.rewrite(data)
	}
	if len(data) > 0 {
		out.add(action{kind: actWrite, data: data})
		s.wrote(data)
	}
	if !m.GetEnd() {
		out.add(action{kind: actFlush})
		return
	}
	switch {
	case m.GetError() != "":
		level := slog.LevelWarn
		if strings.HasPrefix(m.GetError(), "cancelled") {
			level = slog.LevelInfo // its runtime closed (passivation, drain)
		}
		out.add(logAction(level, "mcp exchange ended early in the grain", m.GetError()))
		s.broken(out)
	case s.resume, s.foreign:
		// A replay that ended without the response: the response died
		// with the node that produced it. Or a response that was no
		// event stream, and no JSON either, on a stream the gateway opened.
		s.unanswered(out)
	default:
		s.writeRest(out)
	}
	s.done = true
}

// messageEvent is body, a JSON-RPC message, as an SSE message event (nil
// if body is not JSON).
func messageEvent(body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: message\ndata: ")
	if json.Compact(&b, body) != nil {
		return nil
	}
	b.WriteString("\n\n")
	return b.Bytes()
}

// broken ends a response that cannot go on.
func (s *relay) broken(out *actions) {
	switch {
	case s.wroteHead:
		s.unanswered(out)
	case s.resume:
		out.add(action{kind: actWriteLostStream})
	default:
		out.add(action{kind: actWriteRestarting})
	}
	s.done = true
}

// unanswered ends an SSE response stream that did not carry the response
// to its request with the restart envelope's error for that request.
func (s *relay) unanswered(out *actions) {
	if !s.sse || s.responded || !s.answerable {
		return
	}
	s.writeRest(out)
	out.add(action{kind: actWrite, data: RestartingEvent(s.reqID)}, action{kind: actFlush})
}

// writeRest writes what the tagger held back (a stream that ended mid-line).
func (s *relay) writeRest(out *actions) {
	if !s.tagged {
		return
	}
	if rest := s.tag.rest(); len(rest) > 0 {
		out.add(action{kind: actWrite, data: rest})
	}
}

func logAction(level slog.Level, msg, err string) action {
	return action{kind: actLog, level: level, msg: msg, err: err}
}

var (
	idKey     = []byte(`"id":`)
	resultKey = []byte(`,"result"`)
	errorKey  = []byte(`,"error"`)
)

// carriesResponse reports whether data holds the response to the request
// with reqID, as go-sdk encodes it: `"id":<reqID>,"result"` or
// `"id":<reqID>,"error"`.
func carriesResponse(data []byte, reqID json.RawMessage) bool {
	for rest := data; ; {
		i := bytes.Index(rest, idKey)
		if i < 0 {
			return false
		}
		rest = rest[i+len(idKey):]
		if after, ok := bytes.CutPrefix(rest, reqID); ok && (bytes.HasPrefix(after, resultKey) || bytes.HasPrefix(after, errorKey)) {
			return true
		}
	}
}

// isEventStream reports whether a response with headers is an SSE stream.
func isEventStream(headers []*pb.HttpHeader) bool {
	for _, h := range headers {
		if http.CanonicalHeaderKey(h.GetName()) == "Content-Type" && len(h.GetValues()) > 0 {
			return strings.HasPrefix(h.GetValues()[0], "text/event-stream")
		}
	}
	return false
}
