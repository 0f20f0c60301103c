package exchange

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
)

// The standalone GET stream's wire details, for the session grain: which
// exchange opens it, the Last-Event-ID it must not forward, and the
// priming event every standalone stream starts with.

// StandaloneStream reports whether m opens (or resumes) the session's
// standalone GET stream: a GET without Last-Event-ID, or whose event id
// names the standalone stream (go-sdk's "_<n>" or our priming "_<id>").
func StandaloneStream(m *pb.HttpExchange) bool {
	if m.GetMethod() != http.MethodGet {
		return false
	}
	for _, h := range m.GetHeaders() {
		if http.CanonicalHeaderKey(h.GetName()) == "Last-Event-Id" {
			for _, v := range h.GetValues() {
				if !strings.HasPrefix(v, "_") {
					return false
				}
			}
		}
	}
	return true
}

// WithoutLastEventID returns m without its Last-Event-ID: the standalone
// stream is not replayed (see mcpruntime's event log), and go-sdk's server
// would refuse an id it did not hand out (our priming ids).
func WithoutLastEventID(m *pb.HttpExchange) *pb.HttpExchange {
	c := proto.Clone(m).(*pb.HttpExchange)
	c.Headers = slices.DeleteFunc(c.Headers, func(h *pb.HttpHeader) bool {
		return http.CanonicalHeaderKey(h.GetName()) == "Last-Event-Id"
	})
	return c
}

// PrimeID returns a fresh id for a standalone stream's priming event: "_"
// (go-sdk's standalone stream, which StandaloneStream recognises) and a
// value no earlier stream of any session on any node carried (the clock,
// and n, a counter the caller advances, for ties).
func PrimeID(n uint64) string {
	return "_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "." + strconv.FormatUint(n, 36)
}

// primingEvent is an SSE event with an id and no data (SEP-1699's priming
// event), written first on every standalone stream. go-sdk's client counts
// a stream that ended without a new event id as a reconnect "without
// progress" and ends the whole session after five of them; a standalone
// stream is idle for long stretches and ends at every passivation and
// restore, so without a fresh id each time a long-lived session would be
// dropped by its client after a few hibernations.
func primingEvent(id string) []byte {
	return []byte("event: prime\nid: " + id + "\ndata: \n\n")
}

// WriteParkedHead answers a parked standalone stream: 200, an event
// stream, its priming event with id, flushed. The caller then holds the
// stream open without events.
func WriteParkedHead(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(primingEvent(id))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// PrimingWriter returns w writing a priming event with id before the first
// bytes of a successful event-stream response (go-sdk's standalone
// stream).
func PrimingWriter(w http.ResponseWriter, id string) http.ResponseWriter {
	return &primingWriter{ResponseWriter: w, id: id}
}

// primingWriter is PrimingWriter's writer.
type primingWriter struct {
	http.ResponseWriter
	id     string
	status int
	primed bool
}

func (p *primingWriter) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *primingWriter) prime() {
	if p.primed {
		return
	}
	p.primed = true
	if (p.status == 0 || p.status == http.StatusOK) && strings.HasPrefix(p.Header().Get("Content-Type"), "text/event-stream") {
		_, _ = p.ResponseWriter.Write(primingEvent(p.id))
	}
}

func (p *primingWriter) Write(b []byte) (int, error) {
	p.prime()
	return p.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (p *primingWriter) Flush() {
	p.prime()
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the tunnel's writer.
func (p *primingWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
