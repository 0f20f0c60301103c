package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/mcpgrain/mcpgrain/exchange"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"
	"github.com/mcpgrain/mcpgrain/tracing"
)

// rpcBody is what the gateway reads of a POST's JSON-RPC body. It is
// parsed once per request, and every check and route reads it from here:
// the metrics label, the size bounds, the era, initialize, the
// 2026-07-28 routes and the id the answer carries (go-sdk, behind the
// gateway, parses the message itself).
type rpcBody struct {
	raw   []byte // the body as received
	batch bool   // a JSON array (go-sdk answers it)
	// env reports that the body is one JSON object whose id and method
	// could be read (pk.ID, pk.Method).
	env bool
	// params reports that all of pk parsed (its params are an object of
	// the expected shape).
	params bool
	pk     peeked
	name   string // pk.Method decoded ("" for none, or one that is not a string)
}

// peeked is the part of a JSON-RPC request the gateway looks at.
type peeked struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Params struct {
		Meta         map[string]any  `json:"_meta"`
		RequestState *string         `json:"requestState"`
		TaskID       json.RawMessage `json:"taskId"`
		Name         json.RawMessage `json:"name"` // a tools/call's tool (admission: resume is exempt), a prompt
		URI          json.RawMessage `json:"uri"`  // a resource's (the span's target)
		// An initialize's requested version (the span's mcp.protocol.version).
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	} `json:"params"`
}

// parseBody reads body once; nothing in it is trusted.
func parseBody(body []byte) rpcBody {
	b := rpcBody{raw: body}
	t := bytes.TrimSpace(body)
	switch {
	case len(t) == 0:
	case t[0] == '[':
		b.batch = true
	case t[0] == '{':
		if json.Unmarshal(t, &b.pk) == nil {
			b.env, b.params = true, true
			break
		}
		// Params of another shape (or not JSON at all): what the id and
		// method say still routes and labels the request.
		b.pk = peeked{}
		var env rpcEnvelope
		if json.Unmarshal(t, &env) == nil {
			b.env, b.pk.ID, b.pk.Method = true, env.ID, env.Method
		}
	}
	if b.env {
		b.name = jsonString(b.pk.Method) // not a string: stays ""
	}
	return b
}

// jsonString is the string the JSON value raw holds ("" for another
// value). A string without escapes, as every method and tool name a
// client sends is, is read without a decoder (two reflective decodes were
// ≈ 5 µs of a warm tools/call); one with escapes is decoded.
func jsonString(raw json.RawMessage) string {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		in := raw[1 : len(raw)-1]
		if bytes.IndexByte(in, '\\') < 0 && bytes.IndexByte(in, '"') < 0 && plainText(in) {
			return string(in)
		}
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
}

// plainText reports whether b holds no control character and is valid
// UTF-8 (what a JSON string may hold unescaped, and what the decoder
// would return unchanged).
func plainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}

// method is the request's method ("" for none, or one that is not a
// string).
func (b rpcBody) method() string { return b.name }

// requestID is the id of the single JSON-RPC message, or nil (a batch, a
// notification, not JSON): what exchange.RequestID reads of the body.
func (b rpcBody) requestID() json.RawMessage {
	if !b.env {
		return nil
	}
	return b.pk.ID
}

// initialize reports whether the body is a single initialize request.
func (b rpcBody) initialize() bool { return b.method() == "initialize" }

// metaVersion is the protocol version the request's _meta names ("": none).
func (b rpcBody) metaVersion() string {
	if !b.params {
		return ""
	}
	v, _ := b.pk.Params.Meta[metaProtocolVersion].(string)
	return v
}

// methodLabel names the request's JSON-RPC method for the metrics: a
// known method, or one of a fixed set of words, so a client cannot grow
// the label set.
func (b rpcBody) methodLabel() string {
	switch {
	case b.batch:
		return "batch"
	case !b.env:
		return "other"
	case len(b.pk.Method) == 0 || string(b.pk.Method) == "null":
		return "response" // a client's answer to a server request
	}
	switch m := b.method(); {
	case knownMethods[m]:
		return m
	case strings.HasPrefix(m, "notifications/"):
		return "notification"
	}
	return "other"
}

// target addresses a grain with the request: its body and the id the
// gateway read of it.
func (b rpcBody) target(kind, id string, p *pb.Principal) exchange.Target {
	return exchange.Target{Kind: kind, ID: id, Principal: p, Body: b.raw, RequestID: b.requestID(), Trace: b.trace()}
}

// trace is what the gateway's span reads of the body (tracing on only),
// from the parse the gateway made: the span does not decode the body
// again. A batch or a body whose params had another shape is left to the
// span's own decoding (nil).
func (b rpcBody) trace() *tracing.Message {
	if !tracing.On() || !b.params {
		return nil
	}
	m := &tracing.Message{Method: b.name, ID: b.pk.ID, Meta: b.pk.Params.Meta}
	if len(b.pk.Params.Name) > 0 {
		m.Name = jsonString(b.pk.Params.Name)
	}
	if len(b.pk.Params.URI) > 0 {
		m.URI = jsonString(b.pk.Params.URI)
	}
	if len(b.pk.Params.ProtocolVersion) > 0 {
		m.ProtocolVersion = jsonString(b.pk.Params.ProtocolVersion)
	}
	return m
}
