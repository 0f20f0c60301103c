package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// SumMetric sums the samples of metric name in a Prometheus text
// exposition whose labels include every pair in match (nil: all samples).
// found is false when no sample matched.
func SumMetric(exposition, name string, match map[string]string) (sum float64, found bool) {
	for line := range strings.Lines(exposition) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var labels map[string]string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			var ok bool
			if labels, ok = parseLabels(rest[1:end]); !ok {
				continue
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name with this prefix
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		if matches(labels, match) {
			sum += v
			found = true
		}
	}
	return sum, found
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// parseLabels parses `a="x",b="y\"z"`.
func parseLabels(s string) (map[string]string, bool) {
	out := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return out, true
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, false
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i == len(s) {
			return nil, false
		}
		out[key] = val.String()
		s = s[i+1:]
	}
}

// scrape fetches a /metrics exposition.
func scrape(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	return string(body), nil
}

// Restores are what the node's counters say happened during a restore
// run (differences between scrapes before and after the measured phase).
type Restores struct {
	// Activations is the growth of mcpgrain_session_activations_total:
	// runtimes built (here: cold restores).
	Activations float64 `json:"activations"`
	// CapDisposals is the growth of
	// mcpgrain_runtime_disposals_total{reason="cap"}: soft-cap evictions.
	CapDisposals float64 `json:"capDisposals"`
	// IdleDisposals is the growth of
	// mcpgrain_runtime_disposals_total{reason="idle"}.
	IdleDisposals float64 `json:"idleDisposals"`
}

// restoreCounters reads the counters Restores compares.
func restoreCounters(exposition string) Restores {
	a, _ := SumMetric(exposition, "mcpgrain_session_activations_total", nil)
	c, _ := SumMetric(exposition, "mcpgrain_runtime_disposals_total", map[string]string{"reason": "cap"})
	i, _ := SumMetric(exposition, "mcpgrain_runtime_disposals_total", map[string]string{"reason": "idle"})
	return Restores{Activations: a, CapDisposals: c, IdleDisposals: i}
}

func (r Restores) sub(o Restores) Restores {
	return Restores{Activations: r.Activations - o.Activations, CapDisposals: r.CapDisposals - o.CapDisposals, IdleDisposals: r.IdleDisposals - o.IdleDisposals}
}
