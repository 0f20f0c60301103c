package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Bounds on the parts of a JSON-RPC request that come back in its
// answer. go-sdk echoes a request's id in its response and an unknown
// method's name in its error, and every SSE event of a response is kept in
// the session's event log for resumability (an hour in the store): a
// 4 MiB id turned one cheap ping into 4 MiB stored. Legitimate ids are
// small integers or uuid-like strings, method names are short.
const (
	// MaxRequestIDBytes bounds a request's id, as JSON (a 254-character
	// string, quotes included, or any number).
	MaxRequestIDBytes = 256
	// MaxMethodBytes bounds a request's method name, as JSON.
	MaxMethodBytes = 256
)

// rpcEnvelope is the part of a JSON-RPC message a batch's bound check
// looks at.
type rpcEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
}

// oversized checks the id and method of the JSON-RPC message or batch
// against MaxRequestIDBytes and MaxMethodBytes. It returns the error
// message to answer with ("" when nothing is too long); the message names
// the field and its length, never its value. Bodies that are not JSON-RPC
// are left for the MCP handler to refuse.
func (b rpcBody) oversized() string {
	if len(b.raw) <= min(MaxRequestIDBytes, MaxMethodBytes) {
		return "" // too short to hold an oversized field
	}
	if !b.batch {
		if !b.env {
			return "" // not a message: the handler refuses it
		}
		return oversizedEnvelope(rpcEnvelope{ID: b.pk.ID, Method: b.pk.Method})
	}
	var elems []json.RawMessage
	if json.Unmarshal(bytes.TrimSpace(b.raw), &elems) != nil {
		return ""
	}
	for _, e := range elems {
		var m rpcEnvelope
		if json.Unmarshal(e, &m) != nil {
			continue // not a message: the handler refuses it
		}
		if msg := oversizedEnvelope(m); msg != "" {
			return msg
		}
	}
	return ""
}

// oversizedEnvelope is oversized for one message.
func oversizedEnvelope(m rpcEnvelope) string {
	if n := len(bytes.TrimSpace(m.ID)); n > MaxRequestIDBytes {
		return fmt.Sprintf("Invalid Request: the JSON-RPC id is %d bytes long; at most %d are accepted", n, MaxRequestIDBytes)
	}
	if n := len(bytes.TrimSpace(m.Method)); n > MaxMethodBytes {
		return fmt.Sprintf("Invalid Request: the JSON-RPC method is %d bytes long; at most %d are accepted", n, MaxMethodBytes)
	}
	return ""
}
