package session

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgrain/mcpgrain/actors/residency"
)

// A scrape takes the residency counts once, whatever the number of
// gauges read from them: the counts visit every resident runtime under
// the registry's lock, and a pass per gauge (eleven) at a quarter of a
// million resident runtimes stalled every build behind /metrics.
func TestCountGaugesTakeTheCountsOncePerScrape(t *testing.T) {
	calls := 0
	counts := func() countsView {
		calls++
		return countsView{Counts: residency.Counts{Resident: 7, Evictable: 5, Pinned: 2}, Streams: 3}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newCountGauges(counts, []countGauge{
		{"test_resident", "resident", func(c countsView) float64 { return float64(c.Resident) }},
		{"test_evictable", "evictable", func(c countsView) float64 { return float64(c.Evictable) }},
		{"test_pinned", "pinned", func(c countsView) float64 { return float64(c.Pinned) }},
		{"test_streams", "streams", func(c countsView) float64 { return float64(c.Streams) }},
	}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || len(fams) != 4 {
		t.Fatalf("one scrape of 4 gauges took the counts %d times, gathered %d families", calls, len(fams))
	}
	want := map[string]float64{"test_resident": 7, "test_evictable": 5, "test_pinned": 2, "test_streams": 3}
	for _, f := range fams {
		if got := f.GetMetric()[0].GetGauge().GetValue(); got != want[f.GetName()] {
			t.Errorf("%s = %v, want %v", f.GetName(), got, want[f.GetName()])
		}
	}
}
