package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// sampleScaleReport is a scale report of a made-up run over two nodes,
// one of which could not be scraped after the revisits.
func sampleScaleReport() Report {
	node := func(id string, rss, resident, activations float64) NodeSample {
		return NodeSample{Node: id, URL: "http://" + id, RSS: rss, Resident: resident, SoftCap: 20000, RuntimeBytes: 300 << 10, MemoryBudget: 6 << 30,
			Initializes: resident, Activations: activations, CapEvictions: 1}
	}
	m := Result{Requests: 1000, Errors: 2, Throughput: 250, P50: ms(3), P90: ms(8), P99: ms(20), Max: ms(40), CPUPerRequest: 1200 * time.Microsecond,
		ErrorSamples: []string{"initialize: HTTP 503: restarting"}}
	b := Result{Requests: 1000, Throughput: 1000, P50: ms(1), P90: ms(2), P99: ms(5), Max: ms(10), CPUPerRequest: 400 * time.Microsecond}
	r := Compare(m, b)
	r.CPU = math.NaN()
	return Report{
		Scenario: Scale, Target: "http://n1/mcp, http://n2/mcp", External: true, Sessions: 1000, Concurrency: 8, Duration: 30 * time.Second,
		Mcpgrain: m, Baseline: &b, Ratios: &r,
		Scale: &ScaleReport{
			URLs: []string{"http://n1/mcp", "http://n2/mcp"}, Revisit: RevisitEcho, Store: "postgres://postgres@127.0.0.1:5432/test", Created: 998, CreateRestores: 3,
			CreateErrors:  map[string]int{"initialize: HTTP 503": 2},
			RevisitErrors: map[string]int{"tools/call: timeout": 1, "tools/call: HTTP 404": 3},
			Revisits:      Result{Requests: 104, Errors: 4, Throughput: 3.3, P50: ms(2), P90: ms(30), P99: ms(90), Max: ms(95), CPUPerRequest: 900 * time.Microsecond},
			Warm:          Result{Requests: 75, Throughput: 2.5, P50: ms(1), P90: ms(2), P99: ms(3), Max: ms(4)},
			Cold:          Result{Requests: 25, Throughput: 0.8, P50: ms(30), P90: ms(80), P99: ms(90), Max: ms(95)},
			ColdFraction:  0.25,
			Snapshots: []Snapshot{
				{Phase: "before", Nodes: []NodeSample{node("n1", 50<<20, 0, 0), node("n2", 52<<20, 0, 0)}, Store: &StoreSample{Bytes: 1 << 20}},
				{Phase: "created", Nodes: []NodeSample{node("n1", 90<<20, 500, 500), node("n2", 95<<20, 498, 498)}, Store: &StoreSample{Bytes: 3 << 20, Sessions: 998, Reminders: 998}},
				{Phase: "revisited", Nodes: []NodeSample{node("n1", 91<<20, 510, 512), {Node: "http://n2", URL: "http://n2", Error: "scrape http://n2/metrics: HTTP 502"}},
					Store: &StoreSample{Bytes: 3 << 20, Sessions: 998, Reminders: 998, Due: 2}},
			},
			StoreBytesPerSession: 2101.6, Resident: 510,
			BaselineHeapPerSession: 5 << 10,
		},
	}
}

func TestScaleReportText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, []Report{sampleScaleReport()}); err != nil {
		t.Fatal(err)
	}
	want := `scenario scale — sessions created over raw Streamable HTTP, then random ones revisited · 1000 sessions, 8 workers · revisits: 30s
target: http://n1/mcp, http://n2/mcp
      creation  sessions  errors  sessions/s     p50     p90     p99     max  cpu/session
      mcpgrain      1000       2       250.0  3.00ms  8.00ms  20.0ms  40.0ms       1.20ms
  plain go-sdk      1000       0      1000.0  1.00ms  2.00ms  5.00ms  10.0ms        400µs
         ratio                         0.25×   3.00×   4.00×   4.00×   4.00×          n/a
(ratio = mcpgrain / plain go-sdk: latency or cpu/session above 1× costs more, sessions/s below 1× creates fewer; cpu/session is this whole process, client included)
3 sessions were passivated between initialize and notifications/initialized, which restored them cold (included above)
  revisits (tools/call echo)  requests  errors  req/s     p50     p90     p99     max  cpu/req
                         all       104       4    3.3  2.00ms  30.0ms  90.0ms  95.0ms    900µs
                        warm        75       -    2.5  1.00ms  2.00ms  3.00ms  4.00ms        -
                        cold        25       -    0.8  30.0ms  80.0ms  90.0ms  95.0ms        -
cold restores: 25.0% of the successful revisits (25 answers with Mcpgrain-Restored: 1, 75 warm); a revisit goes to a random session (of 998) through a random URL (of 2)
(mcpgrain runs elsewhere: its cpu/req counts only this client)
errors (create, mcpgrain): 2 × initialize: HTTP 503
error (create, mcpgrain): initialize: HTTP 503: restarting
errors (revisit): 3 × tools/call: HTTP 404
errors (revisit): 1 × tools/call: timeout
  node       when     rss  resident  soft cap  per runtime   budget  initialize 200  activations  cap evictions  idle passivations
    n1     before  50 MiB         0     20000      300 KiB  6.0 GiB               0            0              1                  0
    n2     before  52 MiB         0     20000      300 KiB  6.0 GiB               0            0              1                  0
    n1    created  90 MiB       500     20000      300 KiB  6.0 GiB             500          500              1                  0
    n2    created  95 MiB       498     20000      300 KiB  6.0 GiB             498          498              1                  0
    n1  revisited  91 MiB       510     20000      300 KiB  6.0 GiB             510          512              1                  0
node http://n2 revisited: scrape http://n2/metrics: HTTP 502
resident sessions at the end: 510 across 1 node (1 node not scraped)
store postgres://postgres@127.0.0.1:5432/test: 1.0 MiB before → 3.0 MiB created → 3.0 MiB revisited; 2.1 KiB per session created
store rows at the end: 998 sessions, 998 reminders (2 due and not fired)
plain go-sdk keeps every session in memory: live heap +5.0 KiB per session created (this process after a GC)
`
	if got := b.String(); got != want {
		t.Fatalf("text report:\n%s\nwant:\n%s", got, want)
	}
}

func TestScaleReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, []Report{sampleScaleReport()}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Reports []struct {
			Scenario string              `json:"scenario"`
			Mcpgrain Result              `json:"mcpgrain"`
			Ratios   map[string]*float64 `json:"ratios"`
			Scale    struct {
				Created       int            `json:"created"`
				ColdFraction  float64        `json:"coldFraction"`
				Warm          Result         `json:"warm"`
				Cold          Result         `json:"cold"`
				RevisitErrors map[string]int `json:"revisitErrors"`
				Snapshots     []struct {
					Phase string `json:"phase"`
					Nodes []struct {
						Node  string  `json:"node"`
						RSS   float64 `json:"rssBytes"`
						Error string  `json:"error"`
					} `json:"nodes"`
					Store *StoreSample `json:"store"`
				} `json:"snapshots"`
				PerSession float64 `json:"storeBytesPerSession"`
				Resident   float64 `json:"residentAtEnd"`
			} `json:"scale"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	r := got.Reports[0]
	s := r.Scale
	if r.Scenario != "scale" || r.Mcpgrain.Requests != 1000 || r.Ratios["throughput"] == nil || *r.Ratios["throughput"] != 0.25 || r.Ratios["cpu"] != nil ||
		s.Created != 998 || s.ColdFraction != 0.25 || s.Warm.Requests != 75 || s.Cold.P50 != ms(30) || s.RevisitErrors["tools/call: HTTP 404"] != 3 ||
		len(s.Snapshots) != 3 || s.Snapshots[1].Phase != "created" || s.Snapshots[1].Nodes[1].RSS != 95<<20 || s.Snapshots[2].Nodes[1].Error == "" ||
		s.Snapshots[2].Store.Due != 2 || s.PerSession != 2101.6 || s.Resident != 510 {
		t.Fatalf("JSON report:\n%s", b.String())
	}
}

func TestNodeSample(t *testing.T) {
	const text = `# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.2345678e+08
mcpgrain_resident_runtimes{node="n2"} 40
mcpgrain_resident_runtimes_peak{node="n2"} 90
mcpgrain_resident_soft_cap{node="n2"} 24000
mcpgrain_resident_runtime_bytes{node="n2"} 262144
mcpgrain_resident_memory_budget_bytes{node="n2"} 6.442450944e+09
mcpgrain_gateway_requests_total{code="200",era="stateful",method="initialize",node="n2"} 70
mcpgrain_gateway_requests_total{code="503",era="stateful",method="initialize",node="n2"} 5
mcpgrain_gateway_requests_total{code="200",era="stateful",method="tools/call",node="n2"} 900
mcpgrain_session_activations_total{node="n2"} 75
mcpgrain_runtime_disposals_total{node="n2",reason="cap"} 30
mcpgrain_runtime_disposals_total{node="n2",reason="idle"} 4
mcpgrain_runtime_disposals_total{node="n2",reason="delete"} 1
`
	got := nodeSample("http://127.0.0.1:8082", text)
	want := NodeSample{Node: "n2", URL: "http://127.0.0.1:8082", RSS: 123456780, Resident: 40, SoftCap: 24000, RuntimeBytes: 262144, MemoryBudget: 6 << 30,
		Initializes: 70, Activations: 75, CapEvictions: 30, IdleDisposals: 4}
	if got != want {
		t.Fatalf("nodeSample =\n%+v\nwant\n%+v", got, want)
	}
	// A scrape without mcpgrain series (not a node) is named by its URL.
	if got := nodeSample("http://127.0.0.1:9", "process_resident_memory_bytes 10\n"); got.Node != "127.0.0.1:9" || got.RSS != 10 {
		t.Fatalf("nodeSample of a bare process = %+v", got)
	}
	if got := MetricLabel(text, "mcpgrain_resident_runtimes", "node"); got != "n2" {
		t.Fatalf("MetricLabel = %q (must not read the _peak series or another metric)", got)
	}
	if got := MetricLabel(text, "mcpgrain_absent", "node"); got != "" {
		t.Fatalf("MetricLabel of an absent metric = %q", got)
	}
}

func TestScaleOptions(t *testing.T) {
	o := Options{Requests: 1, Scenarios: []Scenario{Scale}}
	if err := o.Validate(); err != nil || o.Scale.Sessions != DefaultScaleSessions || o.Scale.BaselineSessions != DefaultScaleSessions || o.Scale.Revisit != RevisitEcho {
		t.Fatalf("defaults not applied: %+v, %v", o.Scale, err)
	}
	o = Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Sessions: 50}}
	if err := o.Validate(); err != nil || o.Scale.BaselineSessions != 50 {
		t.Fatalf("the baseline creates as many sessions by default: %+v, %v", o.Scale, err)
	}
	if s := o.Scale; s.Distribution != DistUniform || s.ZipfS != DefaultZipfS || s.ZipfV != DefaultZipfV || s.Seed != DefaultZipfSeed || s.SampleEvery != DefaultScaleSampleEvery {
		t.Fatalf("the revisits' defaults not applied: %+v", s)
	}
	cases := []struct {
		name string
		o    Options
		err  string
	}{
		{"several URLs", Options{Requests: 1, Scenarios: []Scenario{Scale}, URL: "http://a/mcp, http://b/mcp,"}, ""},
		{"several URLs for call", Options{Requests: 1, Scenarios: []Scenario{Scale, Call}, URL: "http://a/mcp,http://b/mcp"}, "the call scenario drives one URL, not 2"},
		{"sqlite store", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Store: "sqlite:/tmp/x.db"}}, ""},
		{"postgres store", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Store: "postgres://u@h/db?search_path=s"}}, ""},
		{"bad store", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Store: "mysql://x"}}, `store "mysql://x": want sqlite:PATH or postgres://`},
		{"bad revisit", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Revisit: "pong"}}, `unknown revisit "pong"`},
		{"negative sessions", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Sessions: -1}}, "must be at least 1"},
		{"zipf defaults", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Distribution: DistZipf}}, ""},
		{"flat zipf", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Distribution: DistZipf, ZipfS: 0.9}}, "zipf needs s > 1 and v ≥ 1 (got s=0.9, v=1)"},
		{"bad distribution", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{Distribution: "normal"}}, `unknown distribution "normal"`},
		{"negative creation time", Options{Requests: 1, Scenarios: []Scenario{Scale}, Scale: ScaleOptions{CreateFor: -time.Second}}, "creation time must not be negative"},
		{"scale options unchecked without scale", Options{Requests: 1, Scale: ScaleOptions{Revisit: "pong"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
	if got := Endpoints(" http://a/mcp ,,http://b/mcp"); strings.Join(got, "|") != "http://a/mcp|http://b/mcp" {
		t.Fatalf("Endpoints = %q", got)
	}
	before, after := &StoreSample{Bytes: 1000}, &StoreSample{Bytes: 5000}
	if got := storePerSession(before, after, 4); got != 1000 {
		t.Fatalf("storePerSession = %v", got)
	}
	if got := storePerSession(before, &StoreSample{Error: "down"}, 4); got != 0 {
		t.Fatalf("storePerSession with a failed sample = %v", got)
	}
	p := Progress{Scenario: Scale, Target: "mcpgrain", Phase: phaseCreate, Done: 2000, Errors: 10, Elapsed: 2 * time.Second, Fraction: 0.02}
	if got, want := FormatProgress(p, false), "bench: scale mcpgrain create: 2000 sessions, 10 err, 995 sessions/s, 2s (2%)"; got != want {
		t.Fatalf("progress line = %q\nwant            %q", got, want)
	}
}

// The scale scenario against a real in-process node whose memory budget
// is so small that the derived soft cap is 16 to 32 (1 MiB over a
// runtime's measured size, which residency.Memory never takes below
// 32 KiB, and never under the floor of 16): of 200 sessions most are
// passivated after creation, so random revisits are mostly cold. Every count must add up with the node's own metrics and
// the store's rows.
func TestScaleScenarioAgainstAnInProcessNode(t *testing.T) {
	const sessions, revisits = 200, 40
	var mu sync.Mutex
	finals := map[string]int{}
	reports, err := Run(t.Context(), Options{
		Scenarios: []Scenario{Scale}, Concurrency: 4, Requests: revisits, Baseline: true,
		Scale:         ScaleOptions{Sessions: sessions, BaselineSessions: 50, ResidentMemory: 1 << 20},
		ProgressEvery: time.Hour, // only the final reports
		Progress: func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Final {
				finals[p.Target+"/"+p.Phase] = p.Done
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := reports[0]
	s := r.Scale
	if r.Mcpgrain.Requests != sessions || r.Mcpgrain.Errors != 0 || s.Created != sessions || len(s.CreateErrors) != 0 {
		t.Fatalf("creation: %+v, created %d, errors %v", r.Mcpgrain, s.Created, s.CreateErrors)
	}
	if s.Revisits.Requests != revisits || s.Revisits.Errors != 0 || s.Warm.Requests+s.Cold.Requests != revisits || s.Cold.Requests == 0 ||
		s.ColdFraction != float64(s.Cold.Requests)/revisits {
		t.Fatalf("revisits: all %+v, warm %d, cold %d (fraction %v), errors %v", s.Revisits, s.Warm.Requests, s.Cold.Requests, s.ColdFraction, s.RevisitErrors)
	}
	if len(s.Snapshots) != 3 || len(s.Snapshots[0].Nodes) != 1 {
		t.Fatalf("snapshots %+v", s.Snapshots)
	}
	before, created, revisited := s.Snapshots[0].Nodes[0], s.Snapshots[1].Nodes[0], s.Snapshots[2].Nodes[0]
	for _, n := range []NodeSample{before, created, revisited} {
		// The soft cap the node reports follows from its own sample.
		want := min(max(16, int(n.MemoryBudget/n.RuntimeBytes)), 32)
		if n.Error != "" || n.Node != "bench" || n.RSS <= 0 || n.RuntimeBytes <= 0 || n.SoftCap != float64(want) || n.MemoryBudget != 1<<20 {
			t.Fatalf("node sample %+v, want soft cap %d", n, want)
		}
	}
	// The node answered every initialize and built a runtime for each
	// session, then one more for each cold answer — and only those.
	if got := created.Initializes - before.Initializes; got != sessions {
		t.Fatalf("the node answered %v initialize requests, want %d", got, sessions)
	}
	if got := created.Activations - before.Activations; got != float64(sessions+s.CreateRestores) {
		t.Fatalf("%v runtimes built during creation, want %d sessions + %d restored by their initialized notification", got, sessions, s.CreateRestores)
	}
	if got := revisited.Activations - created.Activations; got != float64(s.Cold.Requests) {
		t.Fatalf("%v runtimes built during the revisits, but %d answers said restored", got, s.Cold.Requests)
	}
	if s.NodeActivations != float64(s.Cold.Requests) || s.RestoresPerSecond != s.Cold.Throughput || s.Distinct < 1 || s.Distinct > revisits {
		t.Fatalf("restores: node activations %v, cold %d, %v/s (cold %v/s), %d distinct sessions revisited", s.NodeActivations, s.Cold.Requests, s.RestoresPerSecond, s.Cold.Throughput, s.Distinct)
	}
	if len(s.RSSSamples) < 3 || len(s.Peaks) != 1 || s.Peaks[0].Node != "bench" || s.Peaks[0].RSS < revisited.RSS || s.Peaks[0].Samples != len(s.RSSSamples) {
		t.Fatalf("rss samples %+v, peaks %+v", s.RSSSamples, s.Peaks)
	}
	if created.CapEvictions == 0 || s.Resident != revisited.Resident || s.Resident == 0 {
		t.Fatalf("residency: created %+v, revisited %+v, resident at end %v", created, revisited, s.Resident)
	}
	st0, st1, st2 := s.Snapshots[0].Store, s.Snapshots[1].Store, s.Snapshots[2].Store
	if st0 == nil || st1 == nil || st2 == nil || st0.Error != "" || st1.Error != "" || st2.Error != "" {
		t.Fatalf("store samples %+v %+v %+v", st0, st1, st2)
	}
	if st0.Sessions != 0 || st1.Sessions != sessions || st2.Sessions != sessions || st2.Reminders < sessions || st2.Due != 0 || st1.Bytes <= st0.Bytes || s.StoreBytesPerSession <= 0 {
		t.Fatalf("store: before %+v, created %+v, revisited %+v, per session %v", *st0, *st1, *st2, s.StoreBytesPerSession)
	}
	if r.Baseline == nil || r.Baseline.Requests != 50 || r.Baseline.Errors != 0 || r.Ratios == nil || r.Ratios.Throughput <= 0 {
		t.Fatalf("baseline %+v, ratios %+v, heap per session %v", r.Baseline, r.Ratios, s.BaselineHeapPerSession)
	}
	mu.Lock()
	if finals["mcpgrain/create"] != sessions || finals["mcpgrain/revisit"] != revisits || finals["baseline/create"] != 50 {
		t.Fatalf("final progress %v", finals)
	}
	mu.Unlock()
	var text bytes.Buffer
	if err := WriteText(&text, reports); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scenario scale", "cold restores:", "store rows at the end: 200 sessions", "resident sessions at the end:", "plain go-sdk"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// A creation phase bounded by CreateFor starts no session once it is
// over: bounded to a nanosecond, none is created and the run says so.
func TestScaleCreationStopsAtItsTime(t *testing.T) {
	_, err := Run(t.Context(), Options{
		Scenarios: []Scenario{Scale}, Concurrency: 2, Requests: 1,
		Scale: ScaleOptions{Sessions: 1000, ResidentMemory: 1 << 20, CreateFor: time.Nanosecond},
	})
	if err == nil || !strings.Contains(err.Error(), "none of 1000 sessions could be created") {
		t.Fatalf("Run = %v, want no session created", err)
	}
}
