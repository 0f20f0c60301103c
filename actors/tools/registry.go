package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Registry holds a catalog's sources by name and resolves tool paths
// "<source>.<name>" to them. It is immutable after NewRegistry and safe for
// concurrent use.
type Registry struct {
	sources map[string]Source
	names   []string // sorted
}

// NewRegistry returns a registry of sources. It rejects a nil source, a
// source name that does not match ^[a-zA-Z][a-zA-Z0-9_]*$ and two sources
// with the same name.
func NewRegistry(sources ...Source) (*Registry, error) {
	r := &Registry{sources: make(map[string]Source, len(sources))}
	for i, s := range sources {
		if s == nil {
			return nil, fmt.Errorf("tools: source %d is nil", i)
		}
		name := s.Name()
		if !ValidSourceName(name) {
			return nil, fmt.Errorf("tools: invalid source name %q (want ^[a-zA-Z][a-zA-Z0-9_]*$)", name)
		}
		if _, dup := r.sources[name]; dup {
			return nil, fmt.Errorf("tools: duplicate source name %q", name)
		}
		r.sources[name] = s
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

// ParsePath splits a tool path "<source>.<name>" at its first dot. The
// source must be a valid source name and the name must not be empty; the
// name may itself contain dots (some OpenAPI operationIds do). The error
// wraps ErrUnknownTool.
func ParsePath(path string) (source, name string, err error) {
	source, name, ok := strings.Cut(path, ".")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%w: invalid tool path %q: want <source>.<name>", ErrUnknownTool, path)
	case !ValidSourceName(source):
		return "", "", fmt.Errorf("%w: invalid tool path %q: bad source name %q", ErrUnknownTool, path, source)
	case name == "":
		return "", "", fmt.Errorf("%w: invalid tool path %q: empty tool name", ErrUnknownTool, path)
	}
	return source, name, nil
}

// resolve parses path and finds its source.
func (r *Registry) resolve(path string) (Source, string, error) {
	source, name, err := ParsePath(path)
	if err != nil {
		return nil, "", err
	}
	s, ok := r.sources[source]
	if !ok {
		return nil, "", fmt.Errorf("%w: %q: no source %q (sources: %s)", ErrUnknownTool, path, source, r.sourceList())
	}
	return s, name, nil
}

func (r *Registry) sourceList() string {
	if len(r.names) == 0 {
		return "none"
	}
	return strings.Join(r.names, ", ")
}

// Lookup finds the tool at path "<source>.<name>". A malformed path or an
// unknown source or tool reports false.
func (r *Registry) Lookup(ctx context.Context, path string) (Tool, bool) {
	s, name, err := r.resolve(path)
	if err != nil {
		return Tool{}, false
	}
	return s.Lookup(ctx, name)
}

// Call calls the tool at path with args (nil means none). An unknown tool
// returns an error wrapping ErrUnknownTool; other errors come from the
// source and are safe to show to the calling code.
func (r *Registry) Call(ctx context.Context, path string, args map[string]any) (any, error) {
	s, name, err := r.resolve(path)
	if err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	return s.Call(ctx, name, args)
}

// Search returns up to limit tools from all sources, best first (see
// SearchText for the score; ties go to the lower path). A limit of zero or
// less means DefaultSearchLimit (12); more than MaxSearchLimit (100) is
// capped. An empty query returns the first tools of each source, in path
// order.
func (r *Registry) Search(ctx context.Context, query string, limit int) []Tool {
	limit = ClampSearchLimit(limit)
	var terms []string
	var hits []Hit
	for _, name := range r.names {
		s := r.sources[name]
		if ss, ok := s.(ScoredSearcher); ok {
			hits = append(hits, ss.SearchScored(ctx, query, limit)...)
			continue
		}
		if terms == nil {
			terms = SearchTerms(query)
		}
		for _, t := range s.Search(ctx, query, limit) {
			st := NewSearchText(t.Name, "", t.Path, t.Description)
			score := st.Score(terms)
			if score == 0 && len(terms) > 0 {
				continue
			}
			hits = append(hits, Hit{Tool: t, Score: score})
		}
	}
	SortHits(hits)
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return HitTools(hits)
}

// Describe returns the description of the tool at path as a JSON-able map:
// path, description, inputSchema (decoded; {"type":"object"} when the
// source has none), requiresApproval and approvalText.
func (r *Registry) Describe(ctx context.Context, path string) (map[string]any, bool) {
	t, ok := r.Lookup(ctx, path)
	if !ok {
		return nil, false
	}
	var schema any = map[string]any{"type": "object"}
	if len(t.InputSchema) > 0 {
		var v any
		if err := json.Unmarshal(t.InputSchema, &v); err == nil {
			schema = v
		}
	}
	return map[string]any{
		"path":             t.Path,
		"description":      t.Description,
		"inputSchema":      schema,
		"requiresApproval": t.RequiresApproval,
		"approvalText":     t.ApprovalText,
	}, true
}

// Unavailable returns why the source of path cannot offer its tools now
// (see Availability), or nil: a known source that is ready, a source
// without the method, or a path naming no source.
func (r *Registry) Unavailable(path string) error {
	s, _, err := r.resolve(path)
	if err != nil {
		return nil
	}
	if a, ok := s.(Availability); ok {
		return a.Unavailable()
	}
	return nil
}

// OnChange has f called, in a goroutine of its own, after the tools of
// any source that can change ([ChangeNotifier]) changed.
func (r *Registry) OnChange(f func()) {
	for _, name := range r.names {
		if n, ok := r.sources[name].(ChangeNotifier); ok {
			n.OnChange(f)
		}
	}
}

// Sources returns the source names, sorted.
func (r *Registry) Sources() []string { return slices.Clone(r.names) }

// Source returns the source with the given name.
func (r *Registry) Source(name string) (Source, bool) {
	s, ok := r.sources[name]
	return s, ok
}
