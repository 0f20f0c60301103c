package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultScaleSampleEvery is ScaleOptions.SampleEvery when unset.
const DefaultScaleSampleEvery = 10 * time.Second

// RSSSample is one node's memory at one moment of the scale scenario.
type RSSSample struct {
	// At is the time since the scenario started.
	At time.Duration `json:"atNs"`
	// Phase is the phase running: "before", "create", "revisit", or a
	// snapshot's ("created", "revisited").
	Phase string `json:"phase"`
	// Node is the node's id; RSS its process_resident_memory_bytes and
	// Resident its mcpgrain_resident_runtimes.
	Node     string  `json:"node"`
	RSS      float64 `json:"rssBytes"`
	Resident float64 `json:"residentRuntimes"`
}

// NodePeak is the most a node held during the scale scenario, from its
// RSS samples.
type NodePeak struct {
	// Node is the node's id.
	Node string `json:"node"`
	// RSS is the highest RSS sampled, At and Phase when it was.
	RSS   float64       `json:"rssBytes"`
	At    time.Duration `json:"atNs"`
	Phase string        `json:"phase"`
	// Resident is the most resident runtimes sampled (at any time).
	Resident float64 `json:"residentRuntimes"`
	// Samples counts the node's samples.
	Samples int `json:"samples"`
}

// Peaks is each node's peak from samples, in the order the nodes first
// appear.
func Peaks(samples []RSSSample) []NodePeak {
	var out []NodePeak
	for _, s := range samples {
		i := slices.IndexFunc(out, func(p NodePeak) bool { return p.Node == s.Node })
		if i < 0 {
			out = append(out, NodePeak{Node: s.Node})
			i = len(out) - 1
		}
		p := &out[i]
		p.Samples++
		if s.RSS > p.RSS {
			p.RSS, p.At, p.Phase = s.RSS, s.At, s.Phase
		}
		p.Resident = max(p.Resident, s.Resident)
	}
	return out
}

// thin keeps at most k of samples, evenly spaced, the first and the last
// always among them.
func thin[T any](samples []T, k int) []T {
	if len(samples) <= k || k < 2 {
		return samples
	}
	out := make([]T, 0, k)
	for i := range k {
		out = append(out, samples[i*(len(samples)-1)/(k-1)])
	}
	return out
}

// rssSampler scrapes every node's RSS and resident runtimes on a period
// until stopped, and keeps the snapshots' samples too.
type rssSampler struct {
	mu      sync.Mutex
	start   time.Time
	phase   string
	samples []RSSSample
}

// setPhase names the phase the next samples belong to.
func (s *rssSampler) setPhase(phase string) {
	s.mu.Lock()
	s.phase = phase
	s.mu.Unlock()
}

// add keeps the nodes' samples of one moment (phase "": the current
// phase); failed scrapes are left out.
func (s *rssSampler) add(phase string, nodes []NodeSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if phase == "" {
		phase = s.phase
	}
	at := time.Since(s.start)
	for _, n := range nodes {
		if n.Error == "" {
			s.samples = append(s.samples, RSSSample{At: at, Phase: phase, Node: n.Node, RSS: n.RSS, Resident: n.Resident})
		}
	}
}

// all is the samples so far.
func (s *rssSampler) all() []RSSSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// run samples the nodes every period until ctx ends.
func (s *rssSampler) run(ctx context.Context, every time.Duration, scrapeNodes func(context.Context) []NodeSample) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.add("", scrapeNodes(ctx))
		}
	}
}

// writeRSSSeries writes each node's peak and a thinned series of its
// samples: "0s 50 MiB/0 · 2m0s 1.2 GiB/100000 · …" (RSS/resident).
func writeRSSSeries(b *strings.Builder, sr *ScaleReport) {
	if len(sr.RSSSamples) == 0 {
		return
	}
	for _, p := range sr.Peaks {
		fmt.Fprintf(b, "rss of %s: peak %s at %s (%s), most resident %.0f, %d samples", p.Node, formatBytes(p.RSS), p.At.Round(time.Second), p.Phase, p.Resident, p.Samples)
		if sr.SampleEvery > 0 {
			fmt.Fprintf(b, " (every %s and at the snapshots)", sr.SampleEvery)
		}
		b.WriteString("\n")
		var own []RSSSample
		for _, s := range sr.RSSSamples {
			if s.Node == p.Node {
				own = append(own, s)
			}
		}
		parts := make([]string, 0, rssSeriesPoints)
		for _, s := range thin(own, rssSeriesPoints) {
			parts = append(parts, fmt.Sprintf("%s %s/%.0f", s.At.Round(time.Second), formatBytes(s.RSS), s.Resident))
		}
		fmt.Fprintf(b, "  rss/resident over time: %s\n", strings.Join(parts, " · "))
	}
}

// rssSeriesPoints is how many samples per node the text report shows.
const rssSeriesPoints = 12
