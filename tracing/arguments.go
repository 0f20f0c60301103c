package tracing

import (
	"encoding/json"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

// The attributes of a tools/call's arguments on the gateway's span, only
// with Options.ToolArguments (opt-in: arguments may carry secrets).
const (
	// ArgumentsKey is the arguments' JSON as the client sent it (the
	// gen-ai semantic conventions' opt-in attribute), at most
	// Options.ToolArguments bytes.
	ArgumentsKey = attribute.Key("gen_ai.tool.call.arguments")
	// ArgumentsTruncatedKey is true when ArgumentsKey holds a prefix of
	// the arguments (cut at a UTF-8 boundary, so it is not valid JSON).
	ArgumentsTruncatedKey = attribute.Key("mcpgrain.tool.call.arguments.truncated")
	// ArgumentsSizeKey is the size in bytes of the whole arguments' JSON,
	// set with ArgumentsTruncatedKey.
	ArgumentsSizeKey = attribute.Key("mcpgrain.tool.call.arguments.size")
)

// arguments appends a tools/call's arguments in body to attrs, cut to max
// bytes; nothing when max is zero or less or the call has none. The body
// is decoded again for them: only when a node opted in.
func arguments(body []byte, max int, attrs []attribute.KeyValue) []attribute.KeyValue {
	if max <= 0 || len(body) == 0 {
		return attrs
	}
	var m struct {
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return attrs
	}
	a := m.Params.Arguments
	if len(a) == 0 || string(a) == "null" {
		return attrs
	}
	if len(a) <= max {
		return append(attrs, ArgumentsKey.String(string(a)))
	}
	return append(attrs, ArgumentsKey.String(string(a[:utf8Cut(a, max)])),
		ArgumentsTruncatedKey.Bool(true), ArgumentsSizeKey.Int(len(a)))
}

// utf8Cut is the largest n ≤ max such that b[:n] does not end inside a
// UTF-8 sequence (b is longer than max).
func utf8Cut(b []byte, max int) int {
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}
