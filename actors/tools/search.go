package tools

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
)

// Search limits used by Registry.Search, which sources may share.
const (
	// DefaultSearchLimit is the number of results returned when the caller
	// asks for zero or fewer.
	DefaultSearchLimit = 12
	// MaxSearchLimit is the most results one search returns.
	MaxSearchLimit = 100
)

// ClampSearchLimit maps limit to [1, MaxSearchLimit], with zero or less
// meaning DefaultSearchLimit.
func ClampSearchLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultSearchLimit
	case limit > MaxSearchLimit:
		return MaxSearchLimit
	}
	return limit
}

// Weights of a term found in each field of a SearchText.
const (
	scoreExactName   = 10 // the whole query equals the name
	scoreName        = 5
	scoreSummary     = 3
	scorePath        = 2
	scoreDescription = 1
)

// SearchText is a tool's search text, lower-cased once when the source
// indexes the tool, so that scoring a query does no allocation per tool.
// The zero value matches nothing.
type SearchText struct {
	name        string // letters and digits of the name, lower-case
	summary     string
	path        string
	description string
}

// NewSearchText precomputes the search text of a tool from its name (e.g.
// "createTodo"), summary, path (e.g. "demo.createTodo post /todos") and
// description.
func NewSearchText(name, summary, path, description string) SearchText {
	return SearchText{
		name:        compact(name),
		summary:     strings.ToLower(summary),
		path:        strings.ToLower(path),
		description: strings.ToLower(description),
	}
}

// Score returns the token score of terms (from SearchTerms) against s: for
// each term, 5 if the name contains it, 3 for the summary, 2 for the path and
// 1 for the description, plus 10 when the terms joined equal the name. Zero
// means no match.
func (s *SearchText) Score(terms []string) int {
	score := 0
	joinedLen := 0
	for _, t := range terms {
		joinedLen += len(t)
		if strings.Contains(s.name, t) {
			score += scoreName
		}
		if strings.Contains(s.summary, t) {
			score += scoreSummary
		}
		if strings.Contains(s.path, t) {
			score += scorePath
		}
		if strings.Contains(s.description, t) {
			score += scoreDescription
		}
	}
	if score > 0 && joinedLen == len(s.name) && joinedEquals(terms, s.name) {
		score += scoreExactName
	}
	return score
}

// joinedEquals reports whether the concatenation of terms equals s.
func joinedEquals(terms []string, s string) bool {
	for _, t := range terms {
		if !strings.HasPrefix(s, t) {
			return false
		}
		s = s[len(t):]
	}
	return s == ""
}

// SearchTerms splits a query into lower-case terms at anything other than a
// letter or digit and at camelCase boundaries, so "createTodo" and
// "create todo" both give [create todo]. Duplicates are dropped, and so are
// one-character terms unless the query has nothing else. An empty result
// means "no query": sources then return tools in their own order.
func SearchTerms(query string) []string {
	var terms, short []string
	add := func(w []rune) {
		if len(w) == 0 {
			return
		}
		t := strings.ToLower(string(w))
		if len(w) == 1 {
			if !slices.Contains(short, t) {
				short = append(short, t)
			}
			return
		}
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	var word []rune
	runes := []rune(query)
	for i, r := range runes {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			add(word)
			word = word[:0]
			continue
		}
		// A lower-to-upper change starts a word ("createTodo"), and so does
		// the last upper of an acronym followed by a lower ("HTTPServer").
		if len(word) > 0 && unicode.IsUpper(r) {
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				add(word)
				word = word[:0]
			}
		}
		word = append(word, r)
	}
	add(word)
	if len(terms) == 0 {
		return short
	}
	return terms
}

// compact returns the letters and digits of s, lower-cased.
func compact(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// SortHits orders hits best first: by score, highest first, then by path.
func SortHits(hits []Hit) {
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Tool.Path, b.Tool.Path)
	})
}

// HitTools returns the tools of hits, in order.
func HitTools(hits []Hit) []Tool {
	out := make([]Tool, len(hits))
	for i, h := range hits {
		out[i] = h.Tool
	}
	return out
}
