package bench

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(float64(i + 1))
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value is every percentile", []time.Duration{ms(7)}, 99, ms(7)},
		{"median of 1..100 is 50", hundred, 50, ms(50)},
		{"p90 of 1..100", hundred, 90, ms(90)},
		{"p99 of 1..100", hundred, 99, ms(99)},
		{"p100 is the max", hundred, 100, ms(100)},
		{"nearest rank rounds up", []time.Duration{ms(1), ms(2), ms(3)}, 50, ms(2)},
		{"p99 of three is the max", []time.Duration{ms(1), ms(2), ms(3)}, 99, ms(3)},
		{"tiny p is the min", []time.Duration{ms(1), ms(2)}, 0.001, ms(1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	lat := []time.Duration{ms(4), ms(1), ms(3), ms(2)}
	errs := []string{"boom", "boom", "bang", "crash", "later"}
	r := Summarize(lat, errs, 2*time.Second)
	want := Result{Requests: 9, Errors: 5, ErrorSamples: []string{"boom", "bang", "crash"}, Elapsed: 2 * time.Second,
		Throughput: 2, P50: ms(2), P90: ms(4), P99: ms(4), Max: ms(4)}
	if r.Requests != want.Requests || r.Errors != want.Errors || r.Throughput != want.Throughput ||
		r.P50 != want.P50 || r.P90 != want.P90 || r.P99 != want.P99 || r.Max != want.Max ||
		strings.Join(r.ErrorSamples, "|") != strings.Join(want.ErrorSamples, "|") {
		t.Fatalf("Summarize = %+v\nwant        %+v", r, want)
	}
	if z := Summarize(nil, nil, 0); z.Throughput != 0 || z.P50 != 0 || z.Requests != 0 {
		t.Fatalf("empty Summarize = %+v", z)
	}
}

func TestRatiosAndFormatting(t *testing.T) {
	cases := []struct {
		a, b float64
		want string
	}{
		{2, 1, "2.00×"},
		{1, 4, "0.25×"},
		{123.4, 10, "12.3×"},
		{1500, 10, "150×"},
		{0, 1, "n/a"},
		{1, 0, "n/a"},
		{math.NaN(), 1, "n/a"},
		{-1, 1, "n/a"},
	}
	for _, tc := range cases {
		if got := FormatRatio(Ratio(tc.a, tc.b)); got != tc.want {
			t.Errorf("FormatRatio(Ratio(%v, %v)) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	m := Result{P50: ms(2), P90: ms(6), P99: ms(10), Max: ms(20), Throughput: 500}
	b := Result{P50: ms(1), P90: ms(2), P99: ms(5), Max: 0, Throughput: 1000}
	r := Compare(m, b)
	if r.P50 != 2 || r.P90 != 3 || r.P99 != 2 || !math.IsNaN(r.Max) || r.Throughput != 0.5 {
		t.Fatalf("Compare = %+v", r)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(js); got != `{"cpu":null,"max":null,"p50":2,"p90":3,"p99":2,"throughput":0.5}` {
		t.Fatalf("ratios JSON = %s", got)
	}
}

func TestFormatDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0:                        "-",
		850 * time.Microsecond:   "850µs",
		1234 * time.Microsecond:  "1.23ms",
		12345 * time.Microsecond: "12.3ms",
		456 * time.Millisecond:   "456ms",
		1200 * time.Millisecond:  "1.20s",
	}
	for d, want := range cases {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseScenarios(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"call", "call", ""},
		{"churn, restore", "churn,restore", ""},
		{"all", "call,churn,restore,approve", ""},
		{"approve,all", "approve,call,churn,restore", ""},
		{"call,call", "call", ""},
		{"overload", "overload", ""},
		{"calls", "", `unknown scenario "calls" (known: call, churn, restore, approve, scale, overload, all)`},
		{"call,", "", "empty scenario name"},
		{"", "", "empty scenario name"},
	}
	for _, tc := range cases {
		got, err := ParseScenarios(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseScenarios(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		var names []string
		for _, sc := range got {
			names = append(names, string(sc))
		}
		if err != nil || strings.Join(names, ",") != tc.want {
			t.Errorf("ParseScenarios(%q) = %v, %v; want %s", tc.in, names, err, tc.want)
		}
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestBudget(t *testing.T) {
	start := time.Unix(1000, 0)
	t.Run("deadline", func(t *testing.T) {
		c := &fakeClock{t: start}
		b := NewBudget(start.Add(10*time.Second), 0, c.now)
		for range 5 {
			if !b.Take() {
				t.Fatal("Take refused before the deadline")
			}
		}
		c.advance(5 * time.Second)
		if f := b.Fraction(start); f != 0.5 {
			t.Fatalf("Fraction at half time = %v", f)
		}
		c.advance(5 * time.Second)
		if b.Take() {
			t.Fatal("Take allowed at the deadline")
		}
		if b.Issued() != 5 || b.Fraction(start) != 1 {
			t.Fatalf("issued %d, fraction %v", b.Issued(), b.Fraction(start))
		}
	})
	t.Run("limit", func(t *testing.T) {
		c := &fakeClock{t: start}
		b := NewBudget(time.Time{}, 3, c.now)
		got := 0
		for b.Take() {
			got++
			if got > 10 {
				break
			}
		}
		if got != 3 || b.Issued() != 3 || b.Fraction(start) != 1 {
			t.Fatalf("took %d, issued %d, fraction %v; want 3", got, b.Issued(), b.Fraction(start))
		}
	})
	t.Run("limit before deadline", func(t *testing.T) {
		c := &fakeClock{t: start}
		b := NewBudget(start.Add(time.Hour), 4, c.now)
		b.Take()
		if f := b.Fraction(start); f != 0.25 {
			t.Fatalf("Fraction = %v, want the count's 0.25", f)
		}
	})
	t.Run("limit is exact under contention", func(t *testing.T) {
		b := NewBudget(time.Time{}, 1000, time.Now)
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for range 8 {
			wg.Go(func() {
				n := 0
				for b.Take() {
					n++
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if total != 1000 || b.Issued() != 1000 {
			t.Fatalf("took %d, issued %d; want 1000", total, b.Issued())
		}
	})
	t.Run("stop", func(t *testing.T) {
		b := NewBudget(time.Time{}, 0, time.Now)
		if !b.Take() {
			t.Fatal("unbounded budget refused")
		}
		b.Stop()
		if b.Take() {
			t.Fatal("Take allowed after Stop")
		}
	})
}

func TestRoundRobin(t *testing.T) {
	r := NewRoundRobin(3)
	var got []int
	for range 7 {
		got = append(got, r.Next())
	}
	if want := []int{0, 1, 2, 0, 1, 2, 0}; !equal(got, want) {
		t.Fatalf("Next sequence %v, want %v", got, want)
	}
	if NewRoundRobin(0).Next() != 0 {
		t.Fatal("a round robin over nothing must still return 0")
	}
	// Concurrent callers share the turns evenly.
	r = NewRoundRobin(4)
	counts := make([]int, 4)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				i := r.Next()
				mu.Lock()
				counts[i]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !equal(counts, []int{100, 100, 100, 100}) {
		t.Fatalf("uneven turns %v", counts)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const exposition = `# HELP mcpgrain_runtime_disposals_total Session runtimes disposed.
# TYPE mcpgrain_runtime_disposals_total counter
mcpgrain_runtime_disposals_total{node="n1",reason="cap"} 7
mcpgrain_runtime_disposals_total{node="n1",reason="idle"} 2
mcpgrain_runtime_disposals_total{node="n2",reason="cap"} 3
mcpgrain_runtime_disposals_total_extra{reason="cap"} 100
mcpgrain_session_activations_total{node="n1"} 12
mcpgrain_session_activations_total{node="n2"} 1e+01
mcpgrain_quoted{node="a\"b,c",reason="cap"} 4
mcpgrain_plain 5 1700000000000
mcpgrain_broken{node="x" 9
`

func TestSumMetric(t *testing.T) {
	cases := []struct {
		name   string
		metric string
		match  map[string]string
		want   float64
		found  bool
	}{
		{"all series of a counter", "mcpgrain_session_activations_total", nil, 22, true},
		{"label filter", "mcpgrain_runtime_disposals_total", map[string]string{"reason": "cap"}, 10, true},
		{"two labels", "mcpgrain_runtime_disposals_total", map[string]string{"reason": "cap", "node": "n2"}, 3, true},
		{"no longer-name confusion", "mcpgrain_runtime_disposals_total", nil, 12, true},
		{"escaped quotes and commas in values", "mcpgrain_quoted", map[string]string{"node": `a"b,c`}, 4, true},
		{"no labels, with timestamp", "mcpgrain_plain", nil, 5, true},
		{"unmatched label", "mcpgrain_runtime_disposals_total", map[string]string{"reason": "delete"}, 0, false},
		{"absent metric", "mcpgrain_nope", nil, 0, false},
		{"malformed line skipped", "mcpgrain_broken", nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, found := SumMetric(exposition, tc.metric, tc.match)
			if got != tc.want || found != tc.found {
				t.Fatalf("SumMetric(%s, %v) = %v, %v; want %v, %v", tc.metric, tc.match, got, found, tc.want, tc.found)
			}
		})
	}
	before := restoreCounters(exposition)
	after := restoreCounters(strings.ReplaceAll(exposition, `reason="cap"} 7`, `reason="cap"} 17`))
	if d := after.sub(before); d.CapDisposals != 10 || d.Activations != 0 || d.IdleDisposals != 0 {
		t.Fatalf("restore delta %+v", d)
	}
}

func TestFormatProgress(t *testing.T) {
	p := Progress{Scenario: Call, Target: "mcpgrain", Done: 110, Errors: 10, Elapsed: 2 * time.Second, Fraction: 0.5}
	if got, want := FormatProgress(p, false), "bench: call mcpgrain measure: 110 req, 10 err, 50 req/s, 2s (50%)"; got != want {
		t.Fatalf("line = %q\nwant   %q", got, want)
	}
	bar := FormatProgress(p, true)
	if !strings.HasPrefix(bar, "\r[############............]  50% call mcpgrain measure") || !strings.HasSuffix(bar, "\x1b[K") {
		t.Fatalf("bar = %q", bar)
	}
	p.Warmup, p.Fraction = true, 2
	if got := FormatProgress(p, true); !strings.Contains(got, "[########################] 100% call mcpgrain warm-up") {
		t.Fatalf("overfull bar = %q", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		err  string
	}{
		{"defaults need an end", Options{}, "set a duration or a request count"},
		{"duration is enough", Options{Duration: time.Second}, ""},
		{"requests are enough", Options{Requests: 10}, ""},
		{"negative sessions", Options{Duration: time.Second, Sessions: -1}, "sessions must be at least 1"},
		{"negative warmup", Options{Duration: time.Second, Warmup: -time.Second}, "must not be negative"},
		{"restore needs sessions above the cap", Options{Duration: time.Second, Scenarios: []Scenario{Restore}, Sessions: 4, RestoreCap: 4}, "more sessions (4) than the node's soft cap (4)"},
		{"restore against a URL is the operator's business", Options{Duration: time.Second, Scenarios: []Scenario{Restore}, Sessions: 2, URL: "http://x/mcp"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
	o := Options{Requests: 1}
	if err := o.Validate(); err != nil || o.Sessions != 10 || o.Concurrency != 4 || o.RestoreCap != 4 || len(o.Scenarios) != 1 || o.Scenarios[0] != Call {
		t.Fatalf("defaults not applied: %+v, %v", o, err)
	}
}
