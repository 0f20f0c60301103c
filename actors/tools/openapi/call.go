package openapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpgrain/mcpgrain/actors/tools"
)

// HTTPError is the error Call returns for a non-2xx response. Its message,
// e.g. `HTTP 404 from GET /todos/{id}: {"error":"not found"}`, names the
// operation by its path template (not the URL, which may carry values the
// caller should not see echoed) and keeps at most ErrorBodyBytes of the body.
type HTTPError struct {
	// Method is the request method, e.g. "GET".
	Method string
	// Path is the operation's path template, e.g. "/todos/{id}".
	Path string
	// Status is the response status code.
	Status int
	// Body is the response body, truncated to ErrorBodyBytes.
	Body string
}

// Error returns "HTTP <status> from <METHOD> <path>: <body>".
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("HTTP %d from %s %s", e.Status, e.Method, e.Path)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// ArgumentError is the error Call returns when args do not fit the
// operation (a missing required parameter, an unknown argument, a value
// that cannot be sent). No request is sent.
type ArgumentError struct {
	// Tool is the tool path, e.g. "demo.getTodo".
	Tool string
	// Msg says what is wrong.
	Msg string
}

// Error returns "<tool>: <msg>".
func (e *ArgumentError) Error() string { return e.Tool + ": " + e.Msg }

// Call sends the operation named name as an HTTP request built from args
// and returns the response: decoded JSON, text, nil for an empty body, or
// {"contentType", "base64"} for a binary one.
//
// Each parameter takes the arg of the same name: path parameters are
// substituted percent-encoded, and a value that would change the path
// (empty, or a dot segment) is an *ArgumentError; query and cookie
// parameters use their style
// (form, exploded by default), header parameters are set before the
// configured Options.Headers (which win). The request body is args.body
// when that is the only other key and the body schema has no property
// named "body"; otherwise the args that are not parameters are the body's
// fields. Args that fit nothing are an error for operations without a body.
//
// A non-2xx response returns an *HTTPError; unknown names return an error
// wrapping tools.ErrUnknownTool.
func (s *Source) Call(ctx context.Context, name string, args map[string]any) (any, error) {
	op, ok := s.ops[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s.%s: no operation %q in this OpenAPI source (use search to find tools)", tools.ErrUnknownTool, s.name, name, name)
	}
	req, err := s.buildRequest(ctx, op, args)
	if err != nil {
		return nil, err
	}
	resp, err := s.do(req, op)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", op.method, op.template, ctxErr)
		}
		return nil, fmt.Errorf("%s %s: request failed: %w", op.method, op.template, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.maxResp+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading response: %w", op.method, op.template, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &HTTPError{
			Method: op.method,
			Path:   op.template,
			Status: resp.StatusCode,
			Body:   tools.TruncateText(strings.TrimSpace(string(data)), ErrorBodyBytes),
		}
	}
	if int64(len(data)) > s.maxResp {
		return nil, fmt.Errorf("%s %s: response larger than %d bytes", op.method, op.template, s.maxResp)
	}
	return decodeResponse(resp.Header.Get("Content-Type"), data), nil
}

// decodeResponse turns a 2xx response body into a JSON-able value.
func decodeResponse(contentType string, data []byte) any {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	mt := baseType(contentType)
	if isJSON(mt) || mt == "" {
		var v any
		if err := json.Unmarshal(data, &v); err == nil {
			return v
		}
	}
	if utf8.Valid(data) {
		return string(data)
	}
	if mt == "" {
		mt = "application/octet-stream"
	}
	return map[string]any{"contentType": mt, "base64": base64.StdEncoding.EncodeToString(data)}
}

// buildRequest maps args onto the operation's parameters and body.
func (s *Source) buildRequest(ctx context.Context, op *operation, args map[string]any) (*http.Request, error) {
	parts, err := op.bindParams(args)
	if err != nil {
		return nil, err
	}
	bodyReader, contentType, err := op.bindBody(args, unusedArgs(args, parts.used))
	if err != nil {
		return nil, err
	}
	u, err := s.requestURL(op, parts)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, op.method, u, bodyReader)
	if err != nil {
		return nil, op.argErr("cannot build request: %v", err)
	}
	s.setHeaders(req, parts, contentType)
	return req, nil
}

// argErr is an [ArgumentError] of op's tool.
func (op *operation) argErr(format string, a ...any) error {
	return &ArgumentError{Tool: op.tool.Path, Msg: fmt.Sprintf(format, a...)}
}

// requestParts are the operation's parameters, encoded where they go.
type requestParts struct {
	pathVals map[string]string
	query    []string // encoded k=v pairs
	headers  http.Header
	cookies  []string
	used     map[string]bool // the parameters' names
}

// bindParams encodes the arguments that are op's parameters.
func (op *operation) bindParams(args map[string]any) (*requestParts, error) {
	parts := &requestParts{pathVals: map[string]string{}, headers: http.Header{}, used: make(map[string]bool, len(op.params))}
	for _, p := range op.params {
		parts.used[p.name] = true
		v, ok := args[p.name]
		if !ok || v == nil {
			if p.required {
				return nil, op.argErr("missing required %s parameter %q", p.in, p.name)
			}
			continue
		}
		if err := parts.bind(p, v); err != nil {
			return nil, op.argErr("parameter %q: %v", p.name, err)
		}
	}
	return parts, nil
}

// bind encodes v as parameter p.
func (parts *requestParts) bind(p *param, v any) error {
	switch p.in {
	case "path":
		str, err := p.pathValue(v)
		if err != nil {
			return err
		}
		parts.pathVals[p.name] = str
	case "query":
		pairs, err := p.queryPairs(v)
		if err != nil {
			return err
		}
		parts.query = append(parts.query, pairs...)
	case "header":
		str, err := p.simple(v)
		if err != nil {
			return err
		}
		parts.headers.Set(p.name, str)
	case "cookie":
		str, err := p.simple(v)
		if err != nil {
			return err
		}
		parts.cookies = append(parts.cookies, p.name+"="+url.QueryEscape(str))
	}
	return nil
}

// unusedArgs are the names of the arguments that are no parameter,
// sorted.
func unusedArgs(args map[string]any, used map[string]bool) []string {
	var rest []string
	for k := range args {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return rest
}

// bindBody encodes the request body from args: the body argument, or the
// arguments that are no parameter (rest) as the body's fields. An
// operation without a body takes no such arguments.
func (op *operation) bindBody(args map[string]any, rest []string) (io.Reader, string, error) {
	bd := op.body
	if bd == nil {
		return nil, "", op.unknownArgs(rest)
	}
	var bodyVal any
	hasBody := false
	switch {
	case !bd.bodyProp && slices.Contains(rest, "body"):
		if len(rest) > 1 {
			return nil, "", op.argErr("pass either body or the body's fields, not both (got body and %s)", strings.Join(slices.DeleteFunc(rest, func(k string) bool { return k == "body" }), ", "))
		}
		bodyVal, hasBody = args["body"], args["body"] != nil
	case len(rest) > 0:
		fields := make(map[string]any, len(rest))
		for _, k := range rest {
			fields[k] = args[k]
		}
		bodyVal, hasBody = fields, true
	case bd.required && bd.flatten:
		bodyVal, hasBody = map[string]any{}, true
	case bd.required:
		return nil, "", op.argErr("missing required request body (pass it as body)")
	}
	if !hasBody {
		return nil, "", nil
	}
	r, ct, err := encodeBody(bd, bodyVal)
	if err != nil {
		return nil, "", op.argErr("request body: %v", err)
	}
	return r, ct, nil
}

// unknownArgs refuses the arguments rest of an operation without a body
// (nil if there are none).
func (op *operation) unknownArgs(rest []string) error {
	if len(rest) == 0 {
		return nil
	}
	known := make([]string, 0, len(op.params))
	for _, p := range op.params {
		known = append(known, p.name)
	}
	if len(known) == 0 {
		return op.argErr("unknown argument(s) %s: this operation takes no arguments", strings.Join(rest, ", "))
	}
	return op.argErr("unknown argument(s) %s (parameters: %s)", strings.Join(rest, ", "), strings.Join(known, ", "))
}

// requestURL is the operation's URL: the base URL, the path with its
// parameters filled in, the query.
func (s *Source) requestURL(op *operation, parts *requestParts) (string, error) {
	base := s.baseURL
	if op.baseURL != "" {
		base = op.baseURL
	}
	var u strings.Builder
	u.WriteString(base)
	for _, seg := range op.segments {
		if seg.param == "" {
			u.WriteString(seg.lit)
			continue
		}
		v, ok := parts.pathVals[seg.param]
		if !ok {
			return "", op.argErr("missing path parameter %q", seg.param)
		}
		u.WriteString(v)
	}
	if len(parts.query) > 0 {
		u.WriteByte('?')
		u.WriteString(strings.Join(parts.query, "&"))
	}
	return u.String(), nil
}

// setHeaders sets the request's headers: the header and cookie
// parameters, the body's content type, a default Accept, then the
// source's own headers (which win).
func (s *Source) setHeaders(req *http.Request, parts *requestParts, contentType string) {
	for k, v := range parts.headers {
		req.Header[k] = v
	}
	if len(parts.cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(parts.cookies, "; "))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, */*;q=0.5")
	}
	for k, v := range s.headers {
		req.Header[k] = slices.Clone(v)
	}
}

// encodeBody encodes v for the body's media type.
func encodeBody(bd *body, v any) (io.Reader, string, error) {
	switch bd.kind {
	case bodyJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, "", err
		}
		return bytes.NewReader(b), bd.mediaType, nil
	case bodyForm:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("want an object for %s, got %s", bd.mediaType, typeName(v))
		}
		vals := url.Values{}
		for _, k := range sortedKeys(m) {
			if m[k] == nil {
				continue
			}
			if list, ok := m[k].([]any); ok {
				for _, e := range list {
					str, err := primitive(e)
					if err != nil {
						return nil, "", fmt.Errorf("field %q: %v", k, err)
					}
					vals.Add(k, str)
				}
				continue
			}
			str, err := primitive(m[k])
			if err != nil {
				return nil, "", fmt.Errorf("field %q: %v", k, err)
			}
			vals.Set(k, str)
		}
		return strings.NewReader(vals.Encode()), bd.mediaType, nil
	case bodyText, bodyBinary:
		str, ok := v.(string)
		if !ok {
			return nil, "", fmt.Errorf("want a string for %s, got %s", bd.mediaType, typeName(v))
		}
		ct := bd.mediaType
		if ct == "*/*" {
			ct = "application/octet-stream"
		}
		return strings.NewReader(str), ct, nil
	}
	if _, _, err := mime.ParseMediaType(bd.mediaType); err != nil {
		return nil, "", fmt.Errorf("unsupported media type %q", bd.mediaType)
	}
	return nil, "", fmt.Errorf("media type %s is not supported by this source", bd.mediaType)
}

// pathValue serialises a path parameter in the "simple" style, each
// value percent-encoded (RFC 3986: everything but unreserved characters,
// so "/", "?", "#", "%" and ";" cannot end, extend or re-root the path),
// with the style's "," and "=" delimiters left as they are.
//
// A value that would change which resource the request names is refused:
// an empty one ("/orgs//members"), and one that is or holds a dot segment
// ("." or ".." between slashes or backslashes). Escaping alone does not
// stop those: "." is unreserved, so ".." reaches the upstream as a
// literal dot segment, which it resolves (/v1/orgs/../members/x is
// /v1/members/x), with the source's credentials attached; and servers
// that decode %2F before routing would see "../" in "..%2F".
func (p *param) pathValue(v any) (string, error) {
	if p.contentJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		return escapePathPart(string(b))
	}
	var parts []string
	sep := ","
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			str, err := primitive(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, str)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			str, err := primitive(x[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, k, str)
		}
	default:
		str, err := primitive(v)
		if err != nil {
			return "", err
		}
		parts = []string{str}
	}
	var b strings.Builder
	for i, part := range parts {
		if i > 0 {
			if _, isObj := v.(map[string]any); isObj && p.explode && i%2 == 1 {
				b.WriteByte('=')
			} else {
				b.WriteString(sep)
			}
		}
		esc, err := escapePathPart(part)
		if err != nil {
			return "", err
		}
		b.WriteString(esc)
	}
	if b.Len() == 0 {
		return "", errors.New("an empty value would change the request path")
	}
	return b.String(), nil
}

// escapePathPart percent-encodes one value of a path parameter, refusing
// dot segments.
func escapePathPart(s string) (string, error) {
	for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("%q is a dot segment: it would change the request path", seg)
		}
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String(), nil
}

// simple serialises a value in the "simple" style (header parameters):
// arrays comma-separated, objects as k,v pairs (k=v when exploded);
// content parameters as JSON.
func (p *param) simple(v any) (string, error) {
	if p.contentJSON {
		b, err := json.Marshal(v)
		return string(b), err
	}
	switch x := v.(type) {
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			str, err := primitive(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, str)
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(x) {
			str, err := primitive(x[k])
			if err != nil {
				return "", err
			}
			if p.explode {
				parts = append(parts, k+"="+str)
			} else {
				parts = append(parts, k, str)
			}
		}
		return strings.Join(parts, ","), nil
	}
	return primitive(v)
}

// queryPairs serialises a query parameter as encoded "k=v" pairs according
// to its style: form (exploded: repeated keys), spaceDelimited,
// pipeDelimited, deepObject.
func (p *param) queryPairs(v any) ([]string, error) {
	key := url.QueryEscape(p.name)
	pair := func(k, val string) string { return k + "=" + url.QueryEscape(val) }
	if p.contentJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return []string{pair(key, string(b))}, nil
	}
	switch x := v.(type) {
	case []any:
		vals := make([]string, 0, len(x))
		for _, e := range x {
			str, err := primitive(e)
			if err != nil {
				return nil, err
			}
			vals = append(vals, str)
		}
		if p.explode {
			out := make([]string, len(vals))
			for i, val := range vals {
				out[i] = pair(key, val)
			}
			return out, nil
		}
		sep := ","
		switch p.style {
		case "spaceDelimited":
			sep = " "
		case "pipeDelimited":
			sep = "|"
		}
		return []string{pair(key, strings.Join(vals, sep))}, nil
	case map[string]any:
		var out []string
		var flat []string
		for _, k := range sortedKeys(x) {
			str, err := primitive(x[k])
			if err != nil {
				return nil, err
			}
			switch {
			case p.style == "deepObject":
				out = append(out, pair(url.QueryEscape(p.name+"["+k+"]"), str))
			case p.explode:
				out = append(out, pair(url.QueryEscape(k), str))
			default:
				flat = append(flat, k, str)
			}
		}
		if flat != nil {
			out = append(out, pair(key, strings.Join(flat, ",")))
		}
		return out, nil
	}
	str, err := primitive(v)
	if err != nil {
		return nil, err
	}
	return []string{pair(key, str)}, nil
}

// primitive formats a scalar argument: strings as they are, numbers without
// exponent when integral, booleans as true/false.
func primitive(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", errors.New("not a finite number")
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case json.Number:
		return x.String(), nil
	case nil:
		return "", nil
	case []any, map[string]any:
		return "", fmt.Errorf("want a scalar, got %s", typeName(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.Trim(string(b), `"`), nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, float32, int, int64, int32, uint64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
