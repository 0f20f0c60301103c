package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// selector is one metric reference in a PromQL expression: the metric name
// and the text of its label matchers (without the braces; empty if none).
type selector struct {
	Metric   string
	Matchers string
}

// promqlKeywords are identifiers that are never metric names when they are
// not followed by '(' (functions and aggregations always are).
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true,
	"offset": true, "inf": true, "nan": true, "start": true, "end": true,
}

// aggregations are PromQL aggregation operators, which may be followed by
// by/without before their parenthesis.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true,
}

// selectors extracts the metric selectors of a PromQL expression with a
// small tokenizer: it skips string literals, label matchers ({…}), range
// and subquery brackets ([…]), numbers and durations, $variables,
// functions and aggregations (an identifier followed by '(', or an
// aggregation operator followed by by/without), the label
// lists after by/without/on/ignoring/group_left/group_right, and keywords.
// Every other identifier is a metric name. It reports an error for
// unbalanced brackets or an unterminated string.
func selectors(expr string) ([]selector, error) {
	var out []selector
	i := 0
	n := len(expr)
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	// skipString returns the index after the string literal starting at j.
	skipString := func(j int) (int, error) {
		q := expr[j]
		for k := j + 1; k < n; k++ {
			switch {
			case expr[k] == '\\' && q != '`':
				k++
			case expr[k] == q:
				return k + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at offset %d", j)
	}
	// skipGroup returns the index after the bracket group opening at j.
	skipGroup := func(j int, open, close byte) (int, error) {
		depth := 0
		for k := j; k < n; k++ {
			switch c := expr[k]; c {
			case '"', '\'', '`':
				e, err := skipString(k)
				if err != nil {
					return 0, err
				}
				k = e - 1
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return k + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %q at offset %d", open, j)
	}
	skipSpace := func(j int) int {
		for j < n && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n' || expr[j] == '\r') {
			j++
		}
		return j
	}
	depth := 0
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			e, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = e
		case c == '#': // comment to end of line
			for i < n && expr[i] != '\n' {
				i++
			}
		case c == '[':
			e, err := skipGroup(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = e
		case c == '{': // a selector without a metric name
			e, err := skipGroup(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = e
		case c == '$':
			i++
			if i < n && expr[i] == '{' {
				e, err := skipGroup(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = e
				continue
			}
			for i < n && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < n && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch {
			case labelListKeywords[word]:
				if next < n && expr[next] == '(' {
					e, err := skipGroup(next, '(', ')')
					if err != nil {
						return nil, err
					}
					j = e
				}
			case next < n && expr[next] == '(':
				// function or aggregation: the parenthesis is handled below
			case promqlKeywords[strings.ToLower(word)] || aggregations[word]:
			default:
				s := selector{Metric: word}
				if next < n && expr[next] == '{' {
					e, err := skipGroup(next, '{', '}')
					if err != nil {
						return nil, err
					}
					s.Matchers = strings.TrimSpace(expr[next+1 : e-1])
					j = e
				}
				out = append(out, s)
			}
			i = j
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ')' at offset %d", i)
			}
			i++
		case c == ']' || c == '}':
			return nil, fmt.Errorf("unbalanced %q at offset %d", c, i)
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced '(' in %q", expr)
	}
	return out, nil
}

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []selector
	}{
		{`up`, []selector{{Metric: "up"}}},
		{`up{job="mcpgrain"} == 0`, []selector{{"up", `job="mcpgrain"`}}},
		{`sum by (node, le) (rate(mcpgrain_x_bucket{node=~"$node"}[$__rate_interval]))`,
			[]selector{{"mcpgrain_x_bucket", `node=~"$node"`}}},
		{`histogram_quantile(0.99, sum without(instance) (rate(a_bucket[5m] offset 1h)))`, []selector{{Metric: "a_bucket"}}},
		{`sum(rate(a{code=~"5..", m="by (x) {y}"}[1m])) / ignoring(code) group_left(era) sum(b) > bool 1e3`,
			[]selector{{"a", `code=~"5..", m="by (x) {y}"`}, {Metric: "b"}}},
		{`max(x) != min(x) and on(node) increase(y[10m:1m]) > 0 unless z`,
			[]selector{{Metric: "x"}, {Metric: "x"}, {Metric: "y"}, {Metric: "z"}}},
		{`{__name__="hidden"} + count(rec:rule:sum)`, []selector{{Metric: "rec:rule:sum"}}},
		{"sum(a)\n  # a comment naming not_a_metric\n  / 2", []selector{{Metric: "a"}}},
		{`vector(1) + Inf`, nil},
	} {
		got, err := selectors(tc.expr)
		if err != nil {
			t.Errorf("selectors(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("selectors(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`sum(a`, `a{b="c"`, `rate(a[5m)`, `a{b="c}`, `a)`} {
		if _, err := selectors(bad); err == nil {
			t.Errorf("selectors(%q): no error", bad)
		}
	}
}

// documentedMetrics reads the metric names from the table in
// docs/metrics.md: rows whose first cell is a name in backticks.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatalf("read the metric reference: %v", err)
	}
	cell := regexp.MustCompile("^`([a-zA-Z_:][a-zA-Z0-9_:]*)`$")
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		if m := cell.FindStringSubmatch(strings.TrimSpace(first)); m != nil {
			names[m[1]] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("docs/metrics.md documents only %d metrics; want its table (first column: `name`)", len(names))
	}
	return names
}

// undocumented returns why metric is not allowed, or "" if it is: it must
// be documented (a histogram's _bucket/_sum/_count series map to the
// histogram), a Go runtime or process collector metric, or up.
func undocumented(documented map[string]bool, metric string) string {
	if metric == "up" || strings.HasPrefix(metric, "go_") || strings.HasPrefix(metric, "process_") {
		return ""
	}
	if documented[metric] {
		return ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(metric, suffix); ok && documented[base] {
			return ""
		}
	}
	return fmt.Sprintf("metric %s is not in docs/metrics.md", metric)
}

func TestUndocumented(t *testing.T) {
	doc := map[string]bool{"mcpgrain_h_seconds": true, "mcpgrain_c_total": true}
	for m, ok := range map[string]bool{
		"mcpgrain_h_seconds_bucket": true, "mcpgrain_h_seconds_count": true, "mcpgrain_c_total": true,
		"up": true, "go_goroutines": true, "process_cpu_seconds_total": true,
		"mcpgrain_missing": false, "mcpgrain_h": false, "upp": false,
	} {
		if got := undocumented(doc, m) == ""; got != ok {
			t.Errorf("undocumented(%s) allowed=%v, want %v", m, got, ok)
		}
	}
}
