package exchange

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Resuming a response stream whose events died with a node.
//
// A session's SSE events are written behind to the store (every few
// milliseconds), so when the node that owned a session dies, the newest
// events of a response stream — often the response itself — die with it.
// The client resumes with Last-Event-ID on another gateway; the session's
// new owner cannot replay what it never saw, and go-sdk's server answers
// 400, which go-sdk's client takes as the end of the whole session.
//
// So the gateway tags every event id it hands out on a request's response
// stream with that request's JSON-RPC id: "<id>~<base64url(request id)>".
// A resume carrying a tag is forwarded with the plain id, and if the
// stream cannot be replayed up to its response — replay refused, the
// session unreachable, or a replay that ends without the response — the
// gateway answers the stream with a retryable JSON-RPC error for that
// request (the restart envelope's), as for a stream that broke live. The
// session lives on. No state: any gateway can do it, and nothing is
// written on the request path.

// eventIDTag separates a go-sdk event id from the request id the gateway
// appended (go-sdk's ids are "<stream>_<index>", no '~').
const eventIDTag = "~"

// maxTaggedRequestID bounds the JSON-RPC ids the gateway tags event ids
// with; longer ids (legal but odd) are left untagged.
const maxTaggedRequestID = 128

// eventIDSuffix is the tag for event ids of reqID's response stream, or ""
// when reqID is absent or too long.
func eventIDSuffix(reqID json.RawMessage) string {
	if !taggable(reqID) {
		return ""
	}
	return string(appendTag(nil, reqID))
}

// taggable reports whether event ids of reqID's response stream are tagged.
func taggable(reqID json.RawMessage) bool {
	return len(reqID) > 0 && len(reqID) <= maxTaggedRequestID && string(reqID) != "null"
}

// appendTag appends the tag of reqID's event ids to b.
func appendTag(b []byte, reqID json.RawMessage) []byte {
	return base64.RawURLEncoding.AppendEncode(append(b, eventIDTag...), reqID)
}

// splitEventID splits a Last-Event-ID the gateway tagged into the id to
// forward and the JSON-RPC id of the request whose stream it resumes. ok is
// false for ids without a valid tag; they are forwarded as they are.
func splitEventID(id string) (base string, reqID json.RawMessage, ok bool) {
	i := strings.LastIndex(id, eventIDTag)
	if i <= 0 {
		return id, nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(id[i+len(eventIDTag):])
	if err != nil || len(raw) == 0 || len(raw) > maxTaggedRequestID || !validRequestID(raw) {
		return id, nil, false
	}
	return id[:i], json.RawMessage(raw), true
}

// validRequestID reports whether raw is a JSON-RPC request id: a JSON
// string or number.
func validRequestID(raw []byte) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// idTagger appends reqID's tag to the id field of every SSE event passing
// through it. Chunks may split lines anywhere; an incomplete last line is
// held back until its end arrives.
type idTagger struct {
	reqID   json.RawMessage
	partial []byte
}

var sseIDField = []byte("id:")

// rewrite returns p with every complete "id:" line tagged, minus a trailing
// incomplete line (kept for the next call).
func (t *idTagger) rewrite(p []byte) []byte {
	if len(t.partial) > 0 {
		p = append(t.partial, p...)
		t.partial = nil
	}
	// Room for a tag on every "id:" (a stream's first frame holds two
	// events: go-sdk's priming event and the answer).
	tags := max(bytes.Count(p, sseIDField), 1)
	out := make([]byte, 0, len(p)+tags*(len(eventIDTag)+base64.RawURLEncoding.EncodedLen(len(t.reqID))))
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			t.partial = append([]byte(nil), p...)
			break
		}
		line := p[:nl+1]
		p = p[nl+1:]
		if !bytes.HasPrefix(line, sseIDField) {
			out = append(out, line...)
			continue
		}
		value := bytes.TrimRight(line, "\r\n")
		out = append(out, value...)
		out = appendTag(out, t.reqID)
		out = append(out, line[len(value):]...)
	}
	return out
}

// rest returns what is held back (a stream that ended mid-line).
func (t *idTagger) rest() []byte {
	p := t.partial
	t.partial = nil
	return p
}
