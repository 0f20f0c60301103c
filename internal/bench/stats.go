package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is what one target did in one scenario's measured phase.
type Result struct {
	// Requests counts completed requests, failed ones included.
	Requests int `json:"requests"`
	// Errors counts failed requests.
	Errors int `json:"errors"`
	// ErrorSamples are the first few distinct error messages.
	ErrorSamples []string `json:"errorSamples,omitempty"`
	// Elapsed is the measured phase's wall time.
	Elapsed time.Duration `json:"elapsedNs"`
	// Throughput is successful requests per second.
	Throughput float64 `json:"throughput"`
	// P50, P90, P99 and Max are latency percentiles of successful
	// requests (nearest rank).
	P50 time.Duration `json:"p50Ns"`
	P90 time.Duration `json:"p90Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`
	// CPUPerRequest is the CPU time this whole process (client, and the
	// server when it runs in process) used per request during the phase:
	// on a shared machine a steadier cost measure than throughput.
	CPUPerRequest time.Duration `json:"cpuPerRequestNs,omitempty"`
	// SetupRetries counts session initializations that failed while the
	// sessions were opened up front and were tried again (not requests).
	SetupRetries int `json:"setupRetries,omitempty"`
}

// maxErrorSamples bounds Result.ErrorSamples.
const maxErrorSamples = 3

// Summarize computes a Result from the latencies of successful requests,
// the error messages of failed ones (in order) and the elapsed time. lat
// is sorted in place.
func Summarize(lat []time.Duration, errs []string, elapsed time.Duration) Result {
	slices.Sort(lat)
	r := Result{Requests: len(lat) + len(errs), Errors: len(errs), Elapsed: elapsed,
		P50: Percentile(lat, 50), P90: Percentile(lat, 90), P99: Percentile(lat, 99), Max: Percentile(lat, 100)}
	if elapsed > 0 {
		r.Throughput = float64(len(lat)) / elapsed.Seconds()
	}
	for _, e := range errs {
		if len(r.ErrorSamples) == maxErrorSamples {
			break
		}
		if !slices.Contains(r.ErrorSamples, e) {
			r.ErrorSamples = append(r.ErrorSamples, e)
		}
	}
	return r
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Ratios are mcpgrain/baseline for latency percentiles (above 1: mcpgrain
// is slower) and for throughput (below 1: mcpgrain serves fewer).
type Ratios struct {
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	Max        float64 `json:"max"`
	Throughput float64 `json:"throughput"`
	// CPU is the ratio of CPU time per request.
	CPU float64 `json:"cpu"`
}

// Ratio returns a/b, or NaN when either is not positive (no data).
func Ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// Compare computes the ratios of m (mcpgrain) to b (baseline).
func Compare(m, b Result) Ratios {
	d := func(x, y time.Duration) float64 { return Ratio(float64(x), float64(y)) }
	return Ratios{P50: d(m.P50, b.P50), P90: d(m.P90, b.P90), P99: d(m.P99, b.P99), Max: d(m.Max, b.Max),
		Throughput: Ratio(m.Throughput, b.Throughput), CPU: d(m.CPUPerRequest, b.CPUPerRequest)}
}

// FormatRatio renders a ratio as "2.35×" ("n/a" for NaN).
func FormatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.2f×", r)
	}
}

// FormatDuration renders a latency with three significant digits in a
// fixed unit per magnitude: "850µs", "1.23ms", "12.3ms", "1.20s".
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// shortError trims an error message to one line of reasonable length.
func shortError(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}
