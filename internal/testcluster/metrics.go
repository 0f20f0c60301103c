package testcluster

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one parsed GET /metrics of a running node.
type Scrape map[string]*dto.MetricFamily

// ScrapeMetrics reads the /metrics of the node whose HTTP address is addr.
func ScrapeMetrics(t testing.TB, addr string) Scrape {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: parse: %v", err)
	}
	return fams
}

// Value sums the series of name whose labels include want: counter and
// gauge values, histogram sample counts.
func (s Scrape) Value(name string, want map[string]string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		have := labelMap(m)
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

func labelMap(m *dto.Metric) map[string]string {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	return have
}

// MetricsProbe reads one metric of a node and waits for it to move.
type MetricsProbe struct {
	T    testing.TB
	Addr string
}

// Get is the value of name{labels} now.
func (p MetricsProbe) Get(name string, labels map[string]string) float64 {
	return ScrapeMetrics(p.T, p.Addr).Value(name, labels)
}

// Residency is what the node's residency metrics read, for a failure's
// message: why a runtime was or was not evicted.
func (p MetricsProbe) Residency() string {
	s := ScrapeMetrics(p.T, p.Addr)
	var b strings.Builder
	for _, name := range []string{"mcpgrain_resident_runtimes", "mcpgrain_resident_evictable", "mcpgrain_resident_pinned",
		"mcpgrain_resident_eviction_pending", "mcpgrain_active_streams", "mcpgrain_cap_overflow_total", "mcpgrain_cap_eviction_requests_total", "mcpgrain_runtime_disposals_total"} {
		for _, m := range s[name].GetMetric() {
			fmt.Fprintf(&b, "  %s%v = %v\n", name, m.GetLabel(), s.Value(name, labelMap(m)))
		}
	}
	return b.String()
}

// HandshakesEnded waits until n runtimes are resident and evictable: a
// go-sdk client's call returns once it read its answer, which can be
// before the handler that wrote it returned, and an exchange in flight
// pins its runtime (a cold build then overflows the cap instead of
// evicting it).
func (p MetricsProbe) HandshakesEnded(labels map[string]string, n int) {
	p.T.Helper()
	p.WaitFor("resident runtimes", "mcpgrain_resident_runtimes", labels, Exactly(float64(n)))
	p.WaitFor("their exchanges ended", "mcpgrain_resident_evictable", labels, Exactly(float64(n)))
}

// waitForBound is how long WaitFor waits for a metric: generous, since a
// node on an oversubscribed machine (CI runs packages in parallel, and
// users run the suite on busy machines) can take seconds for what takes
// milliseconds on a quiet one; a wait longer than waitForSlow is logged
// with its figure.
const (
	waitForBound = 60 * time.Second
	waitForSlow  = 5 * time.Second
)

// WaitFor polls until name{labels} satisfies ok (within a minute) and
// returns the value; what names the wait in a failure.
func (p MetricsProbe) WaitFor(what, name string, labels map[string]string, ok func(float64) bool) float64 {
	p.T.Helper()
	start := time.Now()
	for {
		v := p.Get(name, labels)
		if ok(v) {
			if took := time.Since(start); took > waitForSlow {
				p.T.Logf("%s: %s%v took %v (a loaded machine)", what, name, labels, took.Round(time.Millisecond))
			}
			return v
		}
		if time.Since(start) > waitForBound {
			p.T.Fatalf("%s: %s%v = %v after %v; the node's residency then:\n%s", what, name, labels, v, waitForBound, p.Residency())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// AtLeast is a WaitFor condition: the value is n or more.
func AtLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }

// Exactly is a WaitFor condition: the value is n.
func Exactly(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
