package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of the OpenTelemetry MCP semantic conventions (gen-ai
// mcp, status Development) that mcpgrain's spans carry.
const (
	MethodKey          = attribute.Key("mcp.method.name")
	SessionKey         = attribute.Key("mcp.session.id")
	ProtocolVersionKey = attribute.Key("mcp.protocol.version")
	ResourceURIKey     = attribute.Key("mcp.resource.uri")
	RequestIDKey       = attribute.Key("jsonrpc.request.id")
	ToolNameKey        = attribute.Key("gen_ai.tool.name")
	PromptNameKey      = attribute.Key("gen_ai.prompt.name")
	OperationKey       = attribute.Key("gen_ai.operation.name")
	StatusCodeKey      = attribute.Key("rpc.response.status_code")
)

// rpcMessage is what a span reads of a JSON-RPC request body.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name            string         `json:"name"`
		URI             string         `json:"uri"`
		ProtocolVersion string         `json:"protocolVersion"`
		Meta            map[string]any `json:"_meta"`
	} `json:"params"`
}

// Request is what the gateway knows of one MCP HTTP request when it starts
// its span.
type Request struct {
	// HTTP is the client's request (its traceparent header, its
	// Mcp-Protocol-Version).
	HTTP *http.Request
	// Body is the request body (a single JSON-RPC message; a batch or a
	// GET gets a span named after the HTTP method).
	Body []byte
	// Session is the MCP session id, empty for none.
	Session string
	// Parsed is what the gateway read of Body already, if it did (nil:
	// StartServer decodes Body itself).
	Parsed *Message
}

// Message is what the gateway's span names itself after and records of a
// single JSON-RPC request: its method, target (a tool's or prompt's name,
// a resource's URI), id and params._meta.
type Message struct {
	Method, Name, URI string
	// ProtocolVersion is an initialize's params.protocolVersion (the
	// version the client asks for; later requests send the header).
	ProtocolVersion string
	ID              json.RawMessage
	Meta            map[string]any
}

// StartServer starts the SERVER span of one MCP request on the gateway,
// named `{mcp.method.name} {target}` (the tool, prompt or resource) per
// the MCP semantic conventions. Its parent is the W3C trace context in the
// request's params._meta (traceparent, tracestate, baggage, as MCP
// specifies) when there is one, else the HTTP request's headers; when both
// are there the HTTP one is linked. A tools/call's span records its
// arguments only when Options.ToolArguments asks for them. With tracing
// off it returns ctx and a no-op span without allocating.
func StartServer(ctx context.Context, req Request) (context.Context, trace.Span) {
	if !On() {
		return ctx, trace.SpanFromContext(ctx)
	}
	prop := otel.GetTextMapPropagator()
	httpCtx := prop.Extract(ctx, Header(req.HTTP.Header))
	m := req.Parsed
	if m == nil {
		m = decode(req.Body)
	}
	parent := httpCtx
	var links []trace.Link
	if meta := metaCarrier(m.Meta); meta != nil {
		parent = prop.Extract(ctx, meta)
		if sc := trace.SpanContextFromContext(httpCtx); sc.IsValid() && !sc.Equal(trace.SpanContextFromContext(parent)) {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	name := req.HTTP.Method + " mcp"
	if m.Method != "" {
		name = m.Method
		attrs = append(attrs, MethodKey.String(m.Method))
		if t := target(m, &attrs); t != "" {
			name += " " + t
		}
		if m.Method == "tools/call" {
			attrs = arguments(req.Body, options().ToolArguments, attrs)
		}
	}
	if len(m.ID) > 0 {
		attrs = append(attrs, RequestIDKey.String(idString(m.ID)))
	}
	if req.Session != "" {
		attrs = append(attrs, SessionKey.String(req.Session))
	}
	if v := req.HTTP.Header.Get("Mcp-Protocol-Version"); v != "" {
		attrs = append(attrs, ProtocolVersionKey.String(v))
	} else if m.ProtocolVersion != "" {
		attrs = append(attrs, ProtocolVersionKey.String(m.ProtocolVersion))
	}
	sctx, span := Tracer().Start(parent, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrs...), trace.WithLinks(links...))
	fill(ctx, span.SpanContext())
	return sctx, span
}

// decode reads a request body as a Message (empty for a body that is not
// one JSON object: a span named after the HTTP method).
func decode(body []byte) *Message {
	var m rpcMessage
	if len(body) > 0 { // a GET's or a DELETE's: none
		_ = json.Unmarshal(body, &m)
	}
	return &Message{Method: m.Method, Name: m.Params.Name, URI: m.Params.URI, ProtocolVersion: m.Params.ProtocolVersion,
		ID: m.ID, Meta: m.Params.Meta}
}

// target is the span name's target of m (tool, prompt or resource) and
// adds its attribute.
func target(m *Message, attrs *[]attribute.KeyValue) string {
	switch m.Method {
	case "tools/call":
		if m.Name != "" {
			*attrs = append(*attrs, ToolNameKey.String(m.Name), OperationKey.String("execute_tool"))
		}
		return m.Name
	case "prompts/get":
		if m.Name != "" {
			*attrs = append(*attrs, PromptNameKey.String(m.Name))
		}
		return m.Name
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if m.URI != "" {
			*attrs = append(*attrs, ResourceURIKey.String(m.URI))
		}
		return m.URI
	}
	return ""
}

// metaCarrier is the W3C trace context in params._meta, or nil.
func metaCarrier(meta map[string]any) propagation.MapCarrier {
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return nil
	}
	c := propagation.MapCarrier{"traceparent": tp}
	for _, k := range []string{"tracestate", "baggage"} {
		if v, ok := meta[k].(string); ok && v != "" {
			c[k] = v
		}
	}
	return c
}

// idString is a JSON-RPC id in string form (a string id unquoted).
func idString(id json.RawMessage) string {
	if id[0] != '"' { // a number (or null): as written
		return string(id)
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// EndServer ends a gateway span with the HTTP status the client got: a
// status of 400 or more records error.type (the status code) and an error
// status; rpcCode, when not empty, is the JSON-RPC error code of the
// answer (rpc.response.status_code).
func EndServer(span trace.Span, httpStatus int, rpcCode string) {
	if !span.IsRecording() {
		return
	}
	if httpStatus != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(httpStatus))
	}
	switch {
	case rpcCode != "":
		span.SetAttributes(StatusCodeKey.String(rpcCode), semconv.ErrorTypeKey.String(rpcCode))
		span.SetStatus(codes.Error, "JSON-RPC error "+rpcCode)
	case httpStatus >= 400:
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(httpStatus)))
		span.SetStatus(codes.Error, http.StatusText(httpStatus))
	}
	span.End()
}
