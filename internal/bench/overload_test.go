package bench_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/bench"
)

func TestClassifyTellsServedShedAndFailedApart(t *testing.T) {
	for name, tc := range map[string]struct {
		status     int
		retryAfter string
		resultOK   bool
		want       bench.Outcome
	}{
		"200 with a result":         {http.StatusOK, "", true, bench.Served},
		"200 with a JSON-RPC error": {http.StatusOK, "", false, bench.Failed},
		"503 with Retry-After":      {http.StatusServiceUnavailable, "1", false, bench.Shed},
		"429 with Retry-After":      {http.StatusTooManyRequests, "2", false, bench.Shed},
		"503 without Retry-After":   {http.StatusServiceUnavailable, "", false, bench.Failed},
		"500 with Retry-After":      {http.StatusInternalServerError, "1", false, bench.Failed},
		"404 (session not found)":   {http.StatusNotFound, "", false, bench.Failed},
	} {
		if got := bench.Classify(tc.status, tc.retryAfter, tc.resultOK); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestDueIsTheOpenLoopSchedule(t *testing.T) {
	for name, tc := range map[string]struct {
		elapsed time.Duration
		rate    float64
		want    int
	}{
		"start":               {0, 100, 0},
		"one second at 100/s": {time.Second, 100, 100},
		"a fraction":          {15 * time.Millisecond, 100, 1},
		"half a request":      {5 * time.Millisecond, 100, 0},
		"no rate":             {time.Second, 0, 0},
		"before the start":    {-time.Second, 100, 0},
	} {
		if got := bench.Due(tc.elapsed, tc.rate); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}
