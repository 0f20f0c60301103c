package openapi

import (
	"cmp"
	"context"
	"slices"

	"github.com/mcpgrain/mcpgrain/actors/tools"
)

// Search returns at most limit operations ranked by tools.SearchText score
// over name, summary, method, path, tags and description. An empty query
// returns the first operations in path order. limit is clamped as by
// tools.ClampSearchLimit.
func (s *Source) Search(ctx context.Context, query string, limit int) []tools.Tool {
	return tools.HitTools(s.SearchScored(ctx, query, limit))
}

// SearchScored is Search with scores; it implements tools.ScoredSearcher.
// It scores the precomputed text of every operation (no allocation per
// operation) and builds tools only for the results.
func (s *Source) SearchScored(_ context.Context, query string, limit int) []tools.Hit {
	limit = tools.ClampSearchLimit(limit)
	terms := tools.SearchTerms(query)
	type scored struct {
		op    *operation
		score int
	}
	var found []scored
	if len(terms) == 0 {
		for _, op := range s.list[:min(limit, len(s.list))] {
			found = append(found, scored{op: op})
		}
	} else {
		for _, op := range s.list {
			if sc := op.search.Score(terms); sc > 0 {
				found = append(found, scored{op, sc})
			}
		}
		slices.SortFunc(found, func(a, b scored) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.op.tool.Path, b.op.tool.Path)
		})
		found = found[:min(limit, len(found))]
	}
	out := make([]tools.Hit, len(found))
	for i, f := range found {
		t := f.op.tool
		t.InputSchema = s.inputSchema(f.op)
		out[i] = tools.Hit{Tool: t, Score: f.score}
	}
	return out
}
