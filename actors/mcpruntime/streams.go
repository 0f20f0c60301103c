package mcpruntime

import (
	"net/http"
	"strings"
	"sync/atomic"
)

// streamWriter counts its exchange as an open response stream while the
// response is an SSE stream (a POST answered with text/event-stream, a
// GET listen stream): from its header until the exchange ends.
type streamWriter struct {
	http.ResponseWriter
	n       *atomic.Int32
	checked bool
	counted bool
}

func (s *streamWriter) WriteHeader(status int) {
	s.check(status)
	s.ResponseWriter.WriteHeader(status)
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.check(http.StatusOK)
	return s.ResponseWriter.Write(b)
}

// check counts the stream at its header, once.
func (s *streamWriter) check(status int) {
	if s.checked {
		return
	}
	s.checked = true
	if status == http.StatusOK && strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream") {
		s.counted = true
		s.n.Add(1)
	}
}

// end uncounts the stream when its exchange ends.
func (s *streamWriter) end() {
	if s.counted {
		s.counted = false
		s.n.Add(-1)
	}
}

// Flush implements http.Flusher.
func (s *streamWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the tunnel's writer.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// CountStream counts the exchange that writes to w as an open response
// stream in open while its response is an SSE stream (from its header):
// serve the exchange with the returned writer and call end when it ended.
// The continuation grains count theirs with it (the sessionless era).
func CountStream(w http.ResponseWriter, open *atomic.Int32) (counted http.ResponseWriter, end func()) {
	sw := &streamWriter{ResponseWriter: w, n: open}
	return sw, sw.end
}

// OpenStreams is the number of open response streams of the session: POST
// requests answered with an SSE stream and GET listen streams, while they
// last (docs/metrics.md, mcpgrain_active_streams). Unlike ActiveStreams it
// counts GET listeners, which do not pin the runtime.
func (r *Runtime) OpenStreams() int { return int(r.streams.Load()) }
