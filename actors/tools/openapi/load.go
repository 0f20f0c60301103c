package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mcpgrain/mcpgrain/actors/tools"
)

// Limits and defaults.
const (
	// DefaultMaxResponseBytes bounds a response body Call reads.
	DefaultMaxResponseBytes = 16 << 20
	// MaxSpecBytes bounds a document Load reads.
	MaxSpecBytes = 256 << 20
	// ErrorBodyBytes is how much of a non-2xx response body an HTTPError keeps.
	ErrorBodyBytes = 2048
	// defaultTimeout is the timeout of the default HTTP client.
	defaultTimeout = 2 * time.Minute
)

// Options configures Load.
type Options struct {
	// Name is the source name, the first segment of its tool paths
	// (^[a-zA-Z][a-zA-Z0-9_]*$). Required.
	Name string
	// Spec is the OpenAPI document: a file path or an http(s) URL. JSON and
	// YAML are both accepted. Required unless Document is set.
	Spec string
	// Document, when set, is the document itself (Spec, if also set, only
	// names it in errors). External $refs are refused, as for URLs.
	Document []byte
	// BaseURL, when set, overrides the document's servers (top-level,
	// path-level and operation-level): requests go to BaseURL + path.
	BaseURL string
	// Headers are sent with every API request, e.g. Authorization. They
	// take precedence over header parameters the calling code passes, so
	// code cannot replace credentials. They are not sent when fetching Spec.
	Headers http.Header
	// SpecHeaders are sent when fetching Spec from a URL (e.g. a token for a
	// private document). Nil sends none.
	SpecHeaders http.Header
	// Client sends the requests (and fetches Spec). Nil means a client with
	// a two-minute timeout.
	Client *http.Client
	// MaxResponseBytes bounds the response body Call reads; a larger
	// response is an error. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Source is a tool source backed by an OpenAPI 3 document: one tool per
// operation, named by its operationId. It is immutable after Load and safe
// for concurrent use.
type Source struct {
	name     string
	baseURL  string // without a trailing slash
	headers  http.Header
	client   *http.Client
	maxResp  int64
	version  string
	ops      map[string]*operation
	list     []*operation // path, then method order
	schemas  map[string]*openapi3.SchemaRef
	is31Plus bool
}

// operation is the precomputed index entry of one OpenAPI operation.
type operation struct {
	tool     tools.Tool // InputSchema is filled lazily by inputSchema
	method   string
	template string    // path template as in the document
	segments []segment // template split into literals and parameters
	params   []*param
	body     *body
	baseURL  string // operation or path-level server; "" means the source's
	search   tools.SearchText

	schemaOnce sync.Once
	schema     json.RawMessage
}

// segment is a literal piece of a path template or, when param is set, a
// parameter to substitute.
type segment struct {
	lit   string
	param string
}

// param is one parameter of an operation.
type param struct {
	name        string
	in          string // path, query, header, cookie
	required    bool
	style       string
	explode     bool
	contentJSON bool // the parameter has content (not schema): send JSON
	description string
	schema      *openapi3.SchemaRef
}

// Body media kinds.
const (
	bodyJSON = iota
	bodyForm
	bodyText
	bodyBinary
	bodyUnsupported
)

// body is the request body of an operation.
type body struct {
	mediaType   string
	kind        int
	required    bool
	description string
	schema      *openapi3.SchemaRef
	// flatten: the body is an object whose properties the input schema
	// lists next to the parameters (no name collides with one).
	flatten bool
	// bodyProp: the body schema has a top-level property named "body", so
	// args.body is that property and never the whole body.
	bodyProp bool
}

// Load reads and indexes an OpenAPI 3 document. The index maps each
// operation's name to its method, path template, parameters and request
// body, so Lookup and Call never scan the operations.
//
// Operation names are the operationIds. An operation without one gets a
// derived name: its method and path in camelCase, with a path parameter
// written "By<Param>": GET /todos/{id} is "getTodosById", POST /v1/user-groups
// is "postV1UserGroups", GET / is "getRoot". A name already taken (by an
// explicit operationId, or a duplicate operationId, which the document
// should not have) gets the suffix 2, 3, ... in path and method order.
//
// The document is not validated beyond what indexing needs, so documents
// with minor errors still load. External $refs are followed for file
// documents and refused for URL documents (fetching them would bypass
// Client and SpecHeaders).
func Load(ctx context.Context, opts Options) (*Source, error) {
	if !tools.ValidSourceName(opts.Name) {
		return nil, fmt.Errorf("openapi: invalid source name %q (want ^[a-zA-Z][a-zA-Z0-9_]*$)", opts.Name)
	}
	if opts.Spec == "" && opts.Document == nil {
		return nil, fmt.Errorf("openapi %s: Spec is required", opts.Name)
	}
	if opts.Spec == "" {
		opts.Spec = "document"
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: defaultTimeout}
	}
	doc, specURL, err := readDoc(ctx, client, opts)
	if err != nil {
		return nil, fmt.Errorf("openapi %s: %w", opts.Name, err)
	}
	s := &Source{
		name:     opts.Name,
		headers:  opts.Headers.Clone(),
		client:   client,
		maxResp:  opts.MaxResponseBytes,
		version:  doc.OpenAPI,
		is31Plus: doc.IsOpenAPI31OrLater(),
	}
	if s.maxResp <= 0 {
		s.maxResp = DefaultMaxResponseBytes
	}
	if doc.Components != nil {
		s.schemas = doc.Components.Schemas
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openapi %s: BaseURL %q is not an absolute http(s) URL", opts.Name, opts.BaseURL)
		}
		s.baseURL = strings.TrimRight(opts.BaseURL, "/")
	} else {
		s.baseURL, err = serverURL(doc.Servers, specURL)
		if err != nil {
			return nil, fmt.Errorf("openapi %s: %w", opts.Name, err)
		}
	}
	s.index(doc, specURL, opts.BaseURL != "")
	return s, nil
}

// readDoc reads and parses the document, following the loader's rules for
// $refs. specURL is set when Spec is an http(s) URL.
func readDoc(ctx context.Context, client *http.Client, opts Options) (*openapi3.T, *url.URL, error) {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	var (
		data     []byte
		location *url.URL
		specURL  *url.URL
	)
	if opts.Document != nil {
		data = opts.Document
		location = &url.URL{Path: opts.Spec}
	} else if u, err := url.Parse(opts.Spec); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		specURL = u
		location = u
		data, err = fetch(ctx, client, u, opts.SpecHeaders)
		if err != nil {
			return nil, nil, err
		}
	} else {
		loader.IsExternalRefsAllowed = true
		var err error
		data, err = readFile(opts.Spec)
		if err != nil {
			return nil, nil, err
		}
		location = &url.URL{Path: opts.Spec}
	}
	if v := swaggerVersion(data); v != "" {
		return nil, nil, fmt.Errorf("%s: Swagger %s documents are not supported (want OpenAPI 3.x; convert it first)", opts.Spec, v)
	}
	doc, err := parseDoc(loader, data, location)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", opts.Spec, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, nil, fmt.Errorf("%s: OpenAPI version %q is not supported (want 3.x)", opts.Spec, doc.OpenAPI)
	}
	if specURL == nil && opts.Document == nil {
		// Make the component schemas of external files local, so that
		// input schemas can refer to them by #/$defs/<name>.
		doc.InternalizeRefs(ctx, refNamer(location.Path))
	}
	return doc, specURL, nil
}

// refNamer names the components InternalizeRefs copies in from external
// files: kin-openapi's default, relative to the directory of the document
// at specPath. (The default trims that directory itself only for documents
// its loader read, not for those parseDoc decodes as JSON.)
func refNamer(specPath string) func(*openapi3.T, openapi3.ComponentRef) string {
	dir := strings.TrimLeft(path.Dir(filepath.ToSlash(specPath))+"/", "./")
	prefix := openapi3.InvalidIdentifierCharRegExp.ReplaceAllString(dir, "_")
	return func(doc *openapi3.T, ref openapi3.ComponentRef) string {
		name := openapi3.DefaultRefNameResolver(doc, ref)
		if short := strings.TrimPrefix(name, prefix); short != "" && prefix != "" {
			return short
		}
		return name
	}
}

// parseDoc unmarshals and resolves data. A JSON document is decoded with
// encoding/json first: kin-openapi's loader parses everything as YAML,
// which is several times slower on large JSON documents. YAML, and JSON the
// fast path refuses, go through the loader.
func parseDoc(loader *openapi3.Loader, data []byte, location *url.URL) (*openapi3.T, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		doc := &openapi3.T{}
		if err := json.Unmarshal(data, doc); err == nil {
			if err := loader.ResolveRefsIn(doc, location); err == nil {
				return doc, nil
			}
		}
		loader = &openapi3.Loader{
			Context:               loader.Context,
			IsExternalRefsAllowed: loader.IsExternalRefsAllowed,
		}
	}
	return loader.LoadFromDataWithPath(data, location)
}

// swaggerRE finds a Swagger 2.0 document's version field near its start:
// a top-level YAML key at the start of a line, or a JSON key.
var swaggerRE = regexp.MustCompile(`(?m)(?:^swagger\s*:\s*["']?|"swagger"\s*:\s*")([0-9][0-9.]*)`)

// swaggerVersion returns the swagger version a document declares in its
// first 4 KB, or "".
func swaggerVersion(data []byte) string {
	if m := swaggerRE.FindSubmatch(data[:min(len(data), 4096)]); m != nil {
		return string(m[1])
	}
	return ""
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, MaxSpecBytes, name)
}

func fetch(ctx context.Context, client *http.Client, u *url.URL, headers http.Header) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header[k] = slices.Clone(v)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", redact(u), unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := readLimited(resp.Body, MaxSpecBytes, redact(u))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("fetch %s: HTTP %d: %s", redact(u), resp.StatusCode, tools.TruncateText(string(data), ErrorBodyBytes))
	}
	return data, nil
}

func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: larger than %d bytes", what, limit)
	}
	return data, nil
}

// redact returns u without user info and query, for error messages.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

// unwrapURLError drops the *url.Error wrapper, whose message repeats the
// full URL (query included).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// serverURL returns the first server's URL with its variables set to their
// defaults, resolved against specURL when relative, without a trailing
// slash.
func serverURL(servers openapi3.Servers, specURL *url.URL) (string, error) {
	raw := "/"
	if len(servers) > 0 && servers[0] != nil {
		raw = expandServer(servers[0])
	} else if specURL == nil {
		return "", errors.New("the document has no servers; set Options.BaseURL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("servers[0].url %q: %w", raw, err)
	}
	if !u.IsAbs() {
		if specURL == nil {
			return "", fmt.Errorf("servers[0].url %q is relative and the document is a file; set Options.BaseURL", raw)
		}
		u = specURL.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("servers[0].url %q is not an http(s) URL; set Options.BaseURL", raw)
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimRight(u.String(), "/"), nil
}

// expandServer substitutes a server's variables with their defaults.
func expandServer(s *openapi3.Server) string {
	out := s.URL
	for name, v := range s.Variables {
		if v != nil {
			out = strings.ReplaceAll(out, "{"+name+"}", v.Default)
		}
	}
	return out
}

// index builds the operation index.
func (s *Source) index(doc *openapi3.T, specURL *url.URL, baseOverride bool) {
	type entry struct {
		path     string
		method   string
		item     *openapi3.PathItem
		op       *openapi3.Operation
		explicit bool
	}
	var entries []entry
	for _, path := range doc.Paths.Keys() {
		item := doc.Paths.Value(path)
		if item == nil {
			continue
		}
		ops := item.Operations()
		methods := make([]string, 0, len(ops))
		for m := range ops {
			methods = append(methods, m)
		}
		slices.Sort(methods)
		for _, m := range methods {
			op := ops[m]
			entries = append(entries, entry{path: path, method: strings.ToUpper(m), item: item, op: op, explicit: op.OperationID != ""})
		}
	}
	s.ops = make(map[string]*operation, len(entries))
	s.list = make([]*operation, 0, len(entries))
	names := make([]string, len(entries))
	// Explicit operationIds first, so derived names never take theirs.
	for pass := range 2 {
		for i, e := range entries {
			if e.explicit != (pass == 0) {
				continue
			}
			base := e.op.OperationID
			if !e.explicit {
				base = derivedName(e.method, e.path)
			}
			name := base
			for n := 2; ; n++ {
				if _, taken := s.ops[name]; !taken {
					break
				}
				name = base + strconv.Itoa(n)
			}
			s.ops[name] = nil // reserve
			names[i] = name
		}
	}
	for i, e := range entries {
		op := s.newOperation(names[i], e.method, e.path, e.item, e.op, specURL, baseOverride)
		s.ops[op.tool.Name] = op
		s.list = append(s.list, op)
	}
}

func (s *Source) newOperation(name, method, path string, item *openapi3.PathItem, o *openapi3.Operation, specURL *url.URL, baseOverride bool) *operation {
	op := &operation{method: method, template: path, segments: parseTemplate(path)}
	// Path-level parameters, overridden by operation-level ones with the
	// same name and location.
	for _, ps := range []openapi3.Parameters{item.Parameters, o.Parameters} {
		for _, pr := range ps {
			if pr == nil || pr.Value == nil {
				continue
			}
			p := newParam(pr.Value)
			if i := slices.IndexFunc(op.params, func(q *param) bool { return q.name == p.name && q.in == p.in }); i >= 0 {
				op.params[i] = p
			} else {
				op.params = append(op.params, p)
			}
		}
	}
	if o.RequestBody != nil && o.RequestBody.Value != nil {
		op.body = newBody(o.RequestBody.Value, op.params)
	}
	if !baseOverride {
		servers := item.Servers
		if o.Servers != nil {
			servers = *o.Servers
		}
		if len(servers) > 0 {
			if u, err := serverURL(servers, specURL); err == nil {
				op.baseURL = u
			}
		}
	}

	summary := strings.TrimSpace(o.Summary)
	desc := strings.TrimSpace(o.Description)
	toolDesc := summary
	switch {
	case desc != "" && desc != summary && summary != "":
		toolDesc = summary + "\n\n" + desc
	case summary == "":
		toolDesc = desc
	}
	if toolDesc == "" {
		toolDesc = method + " " + path
	}
	if o.Deprecated {
		toolDesc = "[deprecated] " + toolDesc
	}
	toolPath := s.name + "." + name
	safe := method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
	op.tool = tools.Tool{
		Path:             toolPath,
		Source:           s.name,
		Name:             name,
		Description:      tools.TruncateText(toolDesc, 4096),
		RequiresApproval: !safe,
		ApprovalText:     method + " " + path,
		Idempotent:       safe,
	}
	op.search = tools.NewSearchText(name, summary,
		toolPath+" "+method+" "+path+" "+strings.Join(o.Tags, " "), desc)
	return op
}

func newParam(p *openapi3.Parameter) *param {
	out := &param{
		name:        p.Name,
		in:          p.In,
		required:    p.Required || p.In == openapi3.ParameterInPath,
		style:       p.Style,
		description: p.Description,
		schema:      p.Schema,
	}
	if out.style == "" {
		switch p.In {
		case openapi3.ParameterInQuery, openapi3.ParameterInCookie:
			out.style = "form"
		default:
			out.style = "simple"
		}
	}
	out.explode = out.style == "form"
	if p.Explode != nil {
		out.explode = *p.Explode
	}
	if out.schema == nil && len(p.Content) > 0 {
		for _, mt := range sortedKeys(p.Content) {
			out.contentJSON = isJSON(mt)
			out.schema = p.Content[mt].Schema
			break
		}
	}
	return out
}

// newBody picks the request body's media type (JSON first, then form, text,
// anything) and decides how args map to it.
func newBody(rb *openapi3.RequestBody, params []*param) *body {
	b := &body{required: rb.Required, description: rb.Description, kind: bodyUnsupported}
	keys := sortedKeys(rb.Content)
	pick := func(kind int, match func(string) bool) bool {
		for _, mt := range keys {
			if match(mt) {
				b.mediaType, b.kind = mt, kind
				if m := rb.Content[mt]; m != nil {
					b.schema = m.Schema
				}
				return true
			}
		}
		return false
	}
	_ = pick(bodyJSON, isJSON) ||
		pick(bodyForm, func(mt string) bool { return baseType(mt) == "application/x-www-form-urlencoded" }) ||
		pick(bodyText, func(mt string) bool { return strings.HasPrefix(baseType(mt), "text/") }) ||
		pick(bodyBinary, func(mt string) bool {
			return baseType(mt) == "application/octet-stream" || baseType(mt) == "*/*"
		}) ||
		pick(bodyUnsupported, func(string) bool { return true })
	if b.mediaType == "" {
		// "content" is required; treat an empty one as JSON.
		b.mediaType, b.kind = "application/json", bodyJSON
	}
	if b.schema != nil && b.schema.Value != nil && (b.kind == bodyJSON || b.kind == bodyForm) {
		props := b.schema.Value.Properties
		_, b.bodyProp = props["body"]
		b.flatten = len(props) > 0
		for _, p := range params {
			if _, clash := props[p.name]; clash {
				b.flatten = false
			}
		}
	}
	return b
}

// parseTemplate splits "/todos/{id}" into literals and parameters.
func parseTemplate(path string) []segment {
	var segs []segment
	for path != "" {
		open := strings.IndexByte(path, '{')
		if open < 0 {
			segs = append(segs, segment{lit: path})
			break
		}
		closeIdx := strings.IndexByte(path[open:], '}')
		if closeIdx < 0 {
			segs = append(segs, segment{lit: path})
			break
		}
		if open > 0 {
			segs = append(segs, segment{lit: path[:open]})
		}
		segs = append(segs, segment{param: path[open+1 : open+closeIdx]})
		path = path[open+closeIdx+1:]
	}
	return segs
}

// derivedName names an operation without an operationId: its method and
// path in camelCase, "By<Param>" for a parameter ("getTodosById").
func derivedName(method, path string) string {
	words := []string{strings.ToLower(method)}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" {
			continue
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			words = append(words, "by")
			seg = seg[1 : len(seg)-1]
		}
		words = append(words, strings.FieldsFunc(seg, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		})...)
	}
	if len(words) == 1 {
		words = append(words, "root")
	}
	var b strings.Builder
	for i, w := range words {
		if i == 0 {
			b.WriteString(w)
			continue
		}
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// baseType returns the media type without parameters, lower-cased.
func baseType(mt string) string {
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// isJSON reports whether a media type is JSON: application/json or any
// +json type.
func isJSON(mt string) bool {
	t := baseType(mt)
	return t == "application/json" || strings.HasSuffix(t, "+json")
}

// Name returns the source name.
func (s *Source) Name() string { return s.name }

// Len returns the number of operations.
func (s *Source) Len() int { return len(s.list) }

// BaseURL returns the URL requests go to (before any operation-level
// server), without a trailing slash.
func (s *Source) BaseURL() string { return s.baseURL }

// Version returns the document's openapi version, e.g. "3.0.3".
func (s *Source) Version() string { return s.version }

// Lookup returns the tool for the operation named name. It is one map
// lookup; the input schema is built on the first lookup of each operation
// and cached.
func (s *Source) Lookup(_ context.Context, name string) (tools.Tool, bool) {
	op, ok := s.ops[name]
	if !ok {
		return tools.Tool{}, false
	}
	t := op.tool
	t.InputSchema = s.inputSchema(op)
	return t, true
}
