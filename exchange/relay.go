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
// grain's answer, the rest through the reply actor), interleaved with
// failures: the activation streaming it terminated, its node left the
// membership view, timers the I/O loop runs on the relay's behalf expired,
// or the client went away. relay.step turns each such event into actions
// (write the head, write bytes, flush, write an envelope, arm a timer,
// cancel the handler in the grain, log) and is pure: relay_test.go walks
// it through tables of events. Forwarder.relay (forward.go) is the thin
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
//     another path, so its end is awaited for a short grace first.

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

// relay is the state of one exchange's response, from the gateway's side.
type relay struct {
	reqID  json.RawMessage // the request whose response stream this is (nil: none)
	resume bool            // a GET resuming a stream by Last-Event-ID
	// answered are the byte patterns of the response to reqID.
	answered [][]byte
	tag      *idTagger // tags SSE event ids with reqID (nil: untagged)

	wroteHead bool // the head went out
	sse       bool // the response is an event stream
	responded bool // the response to reqID went out
	departed  bool // the activation's node left the membership view
	grace     bool // the activation died; its end is awaited
	done      bool // the exchange is over for the client

	out []action // step's result, reused
}

// newRelay returns the relay of the response to the request with reqID
// (nil for a notification, a batch or the standalone GET stream); resume
// says the request resumes a stream (Last-Event-ID).
func newRelay(reqID json.RawMessage, resume bool) *relay {
	s := &relay{reqID: reqID, resume: resume}
	if len(reqID) > 0 && string(reqID) != "null" {
		s.answered = [][]byte{[]byte(`"id":` + string(reqID) + `,"result"`), []byte(`"id":` + string(reqID) + `,"error"`)}
	}
	if suffix := eventIDSuffix(reqID); suffix != "" {
		s.tag = &idTagger{suffix: suffix}
	}
	return s
}

// step returns what to do about ev. The result is valid until the next
// call. After the exchange is done, events change nothing.
func (s *relay) step(ev event) []action {
	s.out = s.out[:0]
	if s.done {
		return nil
	}
	switch ev.kind {
	case evFrame, evGrainGone:
		if s.departed {
			s.add(action{kind: actArmSilence}) // it is not silent
		}
		if ev.kind == evFrame {
			s.frame(ev.frame)
		} else if !s.grace {
			s.grace = true
			s.add(action{kind: actArmGrace})
		}
	case evDeparted:
		s.departed = true
		s.add(action{kind: actArmSilence})
	case evSilent:
		s.log(slog.LevelInfo, "mcp exchange abandoned: the session's node left the membership view and went silent", "")
		s.broken()
	case evGraceOver:
		s.broken()
	case evClientGone:
		s.add(action{kind: actCancel})
		s.done = true
	}
	return s.out
}

// frame relays one frame of the response.
func (s *relay) frame(m *pb.ExchangeFrame) {
	if hd := m.GetHead(); hd != nil && !s.wroteHead {
		if s.resume && hd.GetStatus() == http.StatusBadRequest {
			// The new owner cannot replay the stream (its events died
			// with the node that had them).
			s.log(slog.LevelInfo, "mcp stream resume: events lost with their node; answered its request with the restart envelope", "")
			s.add(action{kind: actWriteLostStream})
			s.done = true
			return
		}
		s.add(action{kind: actWriteHead, status: int(hd.GetStatus()), headers: hd.GetHeaders()})
		s.wroteHead = true
		s.sse = isEventStream(hd.GetHeaders())
	}
	data := m.GetData()
	for _, a := range s.answered {
		s.responded = s.responded || bytes.Contains(data, a)
	}
	if s.sse && s.tag != nil {
		data = s.tag.rewrite(data)
	}
	if len(data) > 0 {
		s.add(action{kind: actWrite, data: data})
	}
	if !m.GetEnd() {
		s.add(action{kind: actFlush})
		return
	}
	switch {
	case m.GetError() != "":
		level := slog.LevelWarn
		if strings.HasPrefix(m.GetError(), "cancelled") {
			level = slog.LevelInfo // its runtime closed (passivation, drain)
		}
		s.log(level, "mcp exchange ended early in the grain", m.GetError())
		s.broken()
	case s.resume:
		// A replay that ended without the response: the response died
		// with the node that produced it.
		s.unanswered()
	default:
		s.writeRest()
	}
	s.done = true
}

// broken ends a response that cannot go on.
func (s *relay) broken() {
	switch {
	case s.wroteHead:
		s.unanswered()
	case s.resume:
		s.add(action{kind: actWriteLostStream})
	default:
		s.add(action{kind: actWriteRestarting})
	}
	s.done = true
}

// unanswered ends an SSE response stream that did not carry the response
// to its request with the restart envelope's error for that request.
func (s *relay) unanswered() {
	if !s.sse || s.responded || len(s.answered) == 0 {
		return
	}
	s.writeRest()
	s.add(action{kind: actWrite, data: RestartingEvent(s.reqID)}, action{kind: actFlush})
}

// writeRest writes what the tagger held back (a stream that ended mid-line).
func (s *relay) writeRest() {
	if s.tag == nil {
		return
	}
	if rest := s.tag.rest(); len(rest) > 0 {
		s.add(action{kind: actWrite, data: rest})
	}
}

func (s *relay) add(a ...action) { s.out = append(s.out, a...) }

func (s *relay) log(level slog.Level, msg, err string) {
	s.add(action{kind: actLog, level: level, msg: msg, err: err})
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
