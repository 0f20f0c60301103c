package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// draws picks n session indexes from a fresh picker.
func draws(t *testing.T, d Distribution, sessions, n int, seed uint64) []int {
	t.Helper()
	p, err := newPicker(d, sessions, DefaultZipfS, DefaultZipfV, seed)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = p.next()
	}
	return out
}

// The same seed picks the same sessions, another seed others; every
// pick is in range.
func TestPickerIsDeterministicBySeed(t *testing.T) {
	for _, d := range []Distribution{DistUniform, DistZipf} {
		a, b, c := draws(t, d, 1000, 500, 7), draws(t, d, 1000, 500, 7), draws(t, d, 1000, 500, 8)
		if !slices.Equal(a, b) {
			t.Errorf("%s: seed 7 picked two different sequences", d)
		}
		if slices.Equal(a, c) {
			t.Errorf("%s: seeds 7 and 8 picked the same sequence", d)
		}
		if slices.Min(a) < 0 || slices.Max(a) >= 1000 {
			t.Errorf("%s: a pick outside [0, 1000): %d..%d", d, slices.Min(a), slices.Max(a))
		}
	}
}

// Zipf sends most revisits to a few sessions and leaves most of the tail
// unseen; uniform spreads them (its 1 % most picked still get ~11 %: of
// 20,000 picks over 100,000 sessions some land twice). The hot sessions are not the first
// created (a shuffle maps ranks to sessions), and Distinct counts the
// sessions seen. The thresholds are far from this seed's figures (zipf:
// 5,186 distinct sessions of 20,000 picks).
func TestZipfPickerIsSkewed(t *testing.T) {
	const sessions, n = 100_000, 20_000
	for _, tc := range []struct {
		d                Distribution
		topShareMin      float64 // share of picks on the 1 % most picked sessions, at least
		topShareMax      float64 // and at most
		distinctMax      int
		distinctMinShare float64 // distinct / n, at least
	}{
		{DistZipf, 0.5, 1, n / 2, 0},
		{DistUniform, 0, 0.2, n, 0.8},
	} {
		p, err := newPicker(tc.d, sessions, DefaultZipfS, DefaultZipfV, 1)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[int]int{}
		for range n {
			counts[p.next()]++
		}
		hist := make([]int, 0, len(counts))
		for _, c := range counts {
			hist = append(hist, c)
		}
		slices.SortFunc(hist, func(x, y int) int { return y - x })
		top := 0
		for _, c := range hist[:min(len(hist), sessions/100)] {
			top += c
		}
		share := float64(top) / n
		if share < tc.topShareMin || share > tc.topShareMax {
			t.Errorf("%s: top 1%% of sessions got %.2f of the picks, want %.2f..%.2f", tc.d, share, tc.topShareMin, tc.topShareMax)
		}
		if p.Distinct() != len(counts) || p.Distinct() > tc.distinctMax || float64(p.Distinct())/n < tc.distinctMinShare {
			t.Errorf("%s: Distinct() = %d, %d sessions picked", tc.d, p.Distinct(), len(counts))
		}
		if tc.d == DistZipf && counts[0] == hist[0] {
			t.Errorf("zipf: the first session created is the hottest: ranks are not shuffled")
		}
	}
}

func TestNewPickerRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		d    Distribution
		n    int
		s, v float64
		want string
	}{
		{DistZipf, 10, 1, 1, "zipf needs s > 1 and v ≥ 1 (got s=1, v=1)"},
		{DistZipf, 10, 2, 0.5, "zipf needs s > 1 and v ≥ 1 (got s=2, v=0.5)"},
		{"pareto", 10, 2, 1, `unknown distribution "pareto" (want uniform or zipf)`},
		{DistUniform, 0, 2, 1, "no sessions to pick from"},
	} {
		if _, err := newPicker(tc.d, tc.n, tc.s, tc.v, 1); err == nil || err.Error() != tc.want {
			t.Errorf("newPicker(%s, %d, %g, %g) = %v, want %q", tc.d, tc.n, tc.s, tc.v, err, tc.want)
		}
	}
}

func TestPeaks(t *testing.T) {
	s := func(at int, phase, node string, rss, resident float64) RSSSample {
		return RSSSample{At: time.Duration(at) * time.Second, Phase: phase, Node: node, RSS: rss, Resident: resident}
	}
	got := Peaks([]RSSSample{
		s(0, "before", "n1", 10, 0), s(0, "before", "n2", 12, 0),
		s(10, "create", "n1", 50, 40), s(10, "create", "n2", 40, 45),
		s(20, "revisit", "n1", 45, 60), s(20, "revisit", "n2", 70, 30),
	})
	want := []NodePeak{
		{Node: "n1", RSS: 50, At: 10 * time.Second, Phase: "create", Resident: 60, Samples: 3},
		{Node: "n2", RSS: 70, At: 20 * time.Second, Phase: "revisit", Resident: 45, Samples: 3},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Peaks = %+v, want %+v", got, want)
	}
	if Peaks(nil) != nil {
		t.Fatal("Peaks(nil) is not nil")
	}
}

func TestThin(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want []int
	}{
		{5, 12, []int{0, 1, 2, 3, 4}},
		{10, 4, []int{0, 3, 6, 9}},
		{11, 3, []int{0, 5, 10}},
		{7, 2, []int{0, 6}},
	} {
		in := make([]int, tc.n)
		for i := range in {
			in[i] = i
		}
		if got := thin(in, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("thin(%d, %d) = %v, want %v", tc.n, tc.k, got, tc.want)
		}
	}
}

func TestActivationsBetween(t *testing.T) {
	snap := func(acts ...float64) Snapshot {
		var s Snapshot
		for i, a := range acts {
			s.Nodes = append(s.Nodes, NodeSample{Node: string(rune('a' + i)), Activations: a})
		}
		return s
	}
	failed := snap(10, 20)
	failed.Nodes[1].Error = "HTTP 502"
	for _, tc := range []struct {
		name          string
		before, after Snapshot
		want          float64
	}{
		{"two nodes", snap(100, 50), snap(130, 75), 55},
		{"none built", snap(5), snap(5), 0},
		{"a node failed", snap(10, 20), failed, -1},
		{"a node missing", snap(10, 20), snap(30), -1},
	} {
		if got := activationsBetween(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A Zipf run's report names the distribution, the restores per second
// and each node's RSS peak and series.
func TestScaleReportTextZipf(t *testing.T) {
	r := sampleScaleReport()
	sr := r.Scale
	sr.Distribution, sr.ZipfS, sr.ZipfV, sr.Seed, sr.Distinct = DistZipf, 1.1, 1, 1, 37
	sr.RestoresPerSecond, sr.NodeActivations = 0.8, 30
	sr.Revisits.Elapsed = 30 * time.Second
	sr.SampleEvery = 10 * time.Second
	for i := range 14 {
		sr.RSSSamples = append(sr.RSSSamples, RSSSample{At: time.Duration(i) * 10 * time.Second, Phase: "create", Node: "n1", RSS: float64(i+1) * (1 << 30), Resident: float64(i * 1000)})
	}
	sr.Peaks = Peaks(sr.RSSSamples)
	var b strings.Builder
	writeScale(&b, r)
	for _, want := range []string{
		"a revisit goes to a session drawn from Zipf(s=1.1, v=1) over the 998 sessions (hottest first in a seeded shuffle, seed 1), 37 distinct revisited through a random URL (of 2)\n",
		"restores: 0.8/s answered cold; runtimes built by the nodes meanwhile: 30 (1.0/s)\n",
		"rss of n1: peak 14 GiB at 2m10s (create), most resident 13000, 14 samples (every 10s and at the snapshots)\n",
		"  rss/resident over time: 0s 1.0 GiB/0 · 10s 2.0 GiB/1000 · 20s 3.0 GiB/2000 · 30s 4.0 GiB/3000 · 40s 5.0 GiB/4000 · 50s 6.0 GiB/5000 · 1m10s 8.0 GiB/7000 · 1m20s 9.0 GiB/8000 · 1m30s 10 GiB/9000 · 1m40s 11 GiB/10000 · 1m50s 12 GiB/11000 · 2m10s 14 GiB/13000\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
