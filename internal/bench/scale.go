package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/app"
)

// ScaleOptions configure the scale scenario (Options.Scale). Zero values
// get the defaults noted.
type ScaleOptions struct {
	// Sessions is how many sessions the scenario creates (default
	// 100,000).
	Sessions int
	// BaselineSessions is how many it creates against the plain go-sdk
	// server when Options.Baseline is set (default: Sessions).
	BaselineSessions int
	// Revisit is what a revisit sends (default [RevisitEcho]).
	Revisit Revisit
	// Store is the DSN of the store to measure — sqlite:PATH or
	// postgres://… — for its bytes per session and its reminder backlog.
	// Empty: the in-process node's own store; nothing with Options.URL.
	Store string
	// ResidentMemory is the in-process node's memory budget for resident
	// runtimes, from which it derives its soft cap (zero: as
	// --resident-memory auto, half the machine's or cgroup's memory).
	ResidentMemory uint64
	// Distribution is how a revisit picks its session (default
	// [DistUniform]).
	Distribution Distribution
	// ZipfS and ZipfV are the Zipf distribution's parameters, s > 1 and
	// v ≥ 1 (defaults [DefaultZipfS], [DefaultZipfV]); larger s sends
	// more of the revisits to the hottest sessions.
	ZipfS, ZipfV float64
	// Seed seeds the revisits' choice of sessions (0: [DefaultZipfSeed]):
	// the same seed and session count revisit the same sequence of
	// sessions (in creation order; which session ids those are is the
	// node's choice).
	Seed uint64
	// CreateFor bounds the creation phase on mcpgrain: when it has run
	// this long no more sessions are started, and the revisits go over
	// those created (zero: until Sessions are created). For a run that
	// must end in time on a machine whose speed is not known.
	CreateFor time.Duration
	// SampleEvery is how often the nodes' RSS and resident runtimes are
	// sampled during creation and revisits (default
	// [DefaultScaleSampleEvery]; negative: only at the snapshots).
	SampleEvery time.Duration
}

// DefaultScaleSessions is ScaleOptions.Sessions when unset.
const DefaultScaleSessions = 100_000

// validate fills zero fields with their defaults, then checks s.
func (s *ScaleOptions) validate() error {
	if s.Sessions == 0 {
		s.Sessions = DefaultScaleSessions
	}
	if s.BaselineSessions == 0 {
		s.BaselineSessions = s.Sessions
	}
	if s.Revisit == "" {
		s.Revisit = RevisitEcho
	}
	s.defaultRevisitPick()
	switch {
	case s.Sessions < 1 || s.BaselineSessions < 1:
		return errors.New("the scale scenario's session counts must be at least 1")
	case s.Revisit != RevisitEcho && s.Revisit != RevisitPing:
		return fmt.Errorf("unknown revisit %q (want echo or ping)", s.Revisit)
	case s.Store != "" && storePath(s.Store) == "" && !isPostgres(s.Store):
		return fmt.Errorf("store %q: want sqlite:PATH or postgres://…", s.Store)
	case s.CreateFor < 0:
		return errors.New("the scale scenario's creation time must not be negative")
	case s.Distribution != DistUniform && s.Distribution != DistZipf:
		return fmt.Errorf("unknown distribution %q (want uniform or zipf)", s.Distribution)
	case s.Distribution == DistZipf && (!(s.ZipfS > 1) || !(s.ZipfV >= 1)):
		return fmt.Errorf("zipf needs s > 1 and v ≥ 1 (got s=%g, v=%g)", s.ZipfS, s.ZipfV)
	}
	return nil
}

// defaultRevisitPick fills the zero fields of how revisits pick their
// sessions and how often the nodes are sampled.
func (s *ScaleOptions) defaultRevisitPick() {
	if s.Distribution == "" {
		s.Distribution = DistUniform
	}
	if s.ZipfS == 0 {
		s.ZipfS = DefaultZipfS
	}
	if s.ZipfV == 0 {
		s.ZipfV = DefaultZipfV
	}
	if s.Seed == 0 {
		s.Seed = DefaultZipfSeed
	}
	if s.SampleEvery == 0 {
		s.SampleEvery = DefaultScaleSampleEvery
	}
}

// The phases of the scale scenario, as Progress.Phase names them.
const (
	phaseCreate  = "create"
	phaseRevisit = "revisit"
)

// The classes of a successful revisit.
const (
	warmAnswer = 0
	coldAnswer = 1
)

// ScaleReport is what the scale scenario measured besides creation
// (which is Report.Mcpgrain, and Report.Baseline with a baseline).
type ScaleReport struct {
	// URLs are the endpoints sessions were spread over (round robin for
	// creation, a random one per revisit).
	URLs []string `json:"urls"`
	// Store is the store measured (its DSN, password redacted; empty:
	// none).
	Store string `json:"store,omitempty"`
	// Revisit is what each revisit sent.
	Revisit Revisit `json:"revisit"`
	// Distribution is how a revisit picked its session; ZipfS and ZipfV
	// its parameters (zipf only) and Seed the generator's seed.
	Distribution Distribution `json:"distribution,omitempty"`
	ZipfS        float64      `json:"zipfS,omitempty"`
	ZipfV        float64      `json:"zipfV,omitempty"`
	Seed         uint64       `json:"seed,omitempty"`
	// Distinct counts the different sessions revisited.
	Distinct int `json:"distinctRevisited,omitempty"`
	// RestoresPerSecond is the cold answers per second of the revisit
	// phase (Cold.Throughput); NodeActivations is the runtimes the nodes
	// built meanwhile (mcpgrain_session_activations_total, after − before
	// the revisits; -1: a node could not be scraped), which counts
	// restores whatever the answer said.
	RestoresPerSecond float64 `json:"restoresPerSecond,omitempty"`
	NodeActivations   float64 `json:"nodeActivations,omitempty"`
	// SampleEvery is the period of RSSSamples, which hold every node's
	// RSS and resident runtimes on it and at the snapshots; Peaks is each
	// node's highest.
	SampleEvery time.Duration `json:"sampleEveryNs,omitempty"`
	RSSSamples  []RSSSample   `json:"rssSamples,omitempty"`
	Peaks       []NodePeak    `json:"peaks,omitempty"`
	// Created counts the sessions created on mcpgrain (the revisits pick
	// among them).
	Created int `json:"created"`
	// CreateRestores counts creations whose notifications/initialized
	// restored the session: it was passivated right after initialize (a
	// soft cap smaller than the sessions being created at once).
	CreateRestores int `json:"createRestores,omitempty"`
	// CreateErrors and RevisitErrors count the failures of each phase by
	// [ErrorKind].
	CreateErrors  map[string]int `json:"createErrors,omitempty"`
	RevisitErrors map[string]int `json:"revisitErrors,omitempty"`
	// Revisits is every revisit; Warm and Cold are the successful ones
	// split by the answer's Mcpgrain-Restored header ([Restored]).
	Revisits Result `json:"revisits"`
	Warm     Result `json:"warm"`
	Cold     Result `json:"cold"`
	// ColdFraction is the share of successful revisits that were cold
	// restores (0 without any).
	ColdFraction float64 `json:"coldFraction"`
	// Snapshots are the nodes (and the store) before creation, after it,
	// and after the revisits.
	Snapshots []Snapshot `json:"snapshots"`
	// StoreBytesPerSession is the store's growth during creation divided
	// by Created (0: no store measured).
	StoreBytesPerSession float64 `json:"storeBytesPerSession,omitempty"`
	// Resident is the session runtimes resident across the nodes at the
	// end (sum of mcpgrain_resident_runtimes).
	Resident float64 `json:"residentAtEnd"`
	// BaselineCreateErrors counts the baseline's failures by kind.
	BaselineCreateErrors map[string]int `json:"baselineCreateErrors,omitempty"`
	// BaselineHeapPerSession is the growth of this process's live heap
	// (after a collection) while the baseline's sessions were created,
	// per session: what a plain go-sdk server holds for each session it
	// keeps, plus the ~60 bytes this client keeps per session id. Zero:
	// no baseline, or fewer than 1,000 sessions, too few to tell from
	// the remains of the in-process node collected meanwhile.
	BaselineHeapPerSession float64 `json:"baselineHeapPerSession,omitempty"`
}

// Snapshot is the nodes and the store at one point of the scale
// scenario.
type Snapshot struct {
	// Phase is "before" (creation), "created" or "revisited".
	Phase string       `json:"phase"`
	Nodes []NodeSample `json:"nodes"`
	// Store is nil when no store is measured.
	Store *StoreSample `json:"store,omitempty"`
}

// NodeSample is one node's /metrics at a snapshot. Counters are totals
// since the node started.
type NodeSample struct {
	// Node is the node's id (the node label of its series); URL is the
	// origin scraped.
	Node string `json:"node"`
	URL  string `json:"url"`
	// RSS is process_resident_memory_bytes (of this process for the
	// in-process node: client included).
	RSS float64 `json:"rssBytes"`
	// Resident, SoftCap, RuntimeBytes and MemoryBudget are
	// mcpgrain_resident_runtimes, mcpgrain_resident_soft_cap,
	// mcpgrain_resident_runtime_bytes and
	// mcpgrain_resident_memory_budget_bytes.
	Resident     float64 `json:"residentRuntimes"`
	SoftCap      float64 `json:"softCap"`
	RuntimeBytes float64 `json:"runtimeBytes"`
	MemoryBudget float64 `json:"memoryBudgetBytes"`
	// Initializes counts initialize requests the node answered with 200
	// (mcpgrain_gateway_requests_total); Activations the runtimes it built
	// (mcpgrain_session_activations_total); CapEvictions and
	// IdleDisposals the runtimes it passivated
	// (mcpgrain_runtime_disposals_total, reason cap and idle).
	Initializes   float64 `json:"initializes"`
	Activations   float64 `json:"activations"`
	CapEvictions  float64 `json:"capEvictions"`
	IdleDisposals float64 `json:"idleDisposals"`
	// Error says why the scrape failed (the numbers are then zero).
	Error string `json:"error,omitempty"`
}

// nodeSample reads a NodeSample from a /metrics exposition of the node
// at url.
func nodeSample(url, exposition string) NodeSample {
	v := func(name string, match map[string]string) float64 {
		x, _ := SumMetric(exposition, name, match)
		return x
	}
	n := NodeSample{
		Node: MetricLabel(exposition, "mcpgrain_resident_runtimes", "node"), URL: url,
		RSS:           v("process_resident_memory_bytes", nil),
		Resident:      v("mcpgrain_resident_runtimes", nil),
		SoftCap:       v("mcpgrain_resident_soft_cap", nil),
		RuntimeBytes:  v("mcpgrain_resident_runtime_bytes", nil),
		MemoryBudget:  v("mcpgrain_resident_memory_budget_bytes", nil),
		Initializes:   v("mcpgrain_gateway_requests_total", map[string]string{"method": "initialize", "code": "200"}),
		Activations:   v("mcpgrain_session_activations_total", nil),
		CapEvictions:  v("mcpgrain_runtime_disposals_total", map[string]string{"reason": "cap"}),
		IdleDisposals: v("mcpgrain_runtime_disposals_total", map[string]string{"reason": "idle"}),
	}
	if n.Node == "" {
		n.Node = strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	}
	return n
}

// scaleRun is one scale scenario against mcpgrain.
type scaleRun struct {
	o     Options
	c     *rawClient
	urls  []string // endpoints
	bases []string // their distinct origins, for /metrics
	store string   // DSN to measure, or empty
	rss   rssSampler
}

// runScale runs the scale scenario: mcpgrain (the URLs or an in-process
// node), then the baseline if asked.
func runScale(ctx context.Context, o Options) (Report, error) {
	s := o.Scale
	rep := Report{Scenario: Scale, Sessions: s.Sessions, Concurrency: o.Concurrency, Duration: o.Duration, Requests: o.Requests}
	urls := Endpoints(o.URL)
	conns := o.Concurrency
	var t *target
	var err error
	if len(urls) > 0 {
		rep.External = true
		rep.Target = strings.Join(urls, ", ")
		t, err = newTarget(urls[0], o.Token, conns*len(urls))
	} else {
		budget := s.ResidentMemory
		if budget == 0 {
			budget = app.DefaultResidentMemory()
		}
		rep.Target = fmt.Sprintf("in-process node (soft cap derived from a %s memory budget)", humanize.IBytes(budget))
		t, err = startNode(ctx, NodeOptions{ResidentMemory: budget, Logger: o.NodeLogger}, conns)
		if err == nil {
			urls = []string{t.endpoint}
		}
	}
	if err != nil {
		return rep, err
	}
	r := &scaleRun{o: o, c: &rawClient{hc: t.hc}, urls: urls, store: s.Store, rss: rssSampler{start: time.Now(), phase: "before"}}
	if r.store == "" {
		r.store = t.store
	}
	for _, u := range urls {
		base, err := origin(u)
		if err != nil {
			t.close()
			return rep, err
		}
		if !slices.Contains(r.bases, base) {
			r.bases = append(r.bases, base)
		}
	}
	sr, created, err := r.run(ctx)
	t.close()
	rep.Mcpgrain, rep.Scale = created, sr
	if err != nil {
		return rep, fmt.Errorf("mcpgrain: %w", err)
	}
	if !o.Baseline {
		return rep, nil
	}
	bres, err := scaleBaseline(ctx, o, sr)
	if err != nil {
		return rep, fmt.Errorf("baseline: %w", err)
	}
	rep.Baseline = &bres
	ratios := Compare(created, bres)
	if rep.External {
		ratios.CPU = math.NaN() // the server runs elsewhere: this process is the client alone
	}
	rep.Ratios = &ratios
	return rep, nil
}

// run creates the sessions, revisits them and takes the snapshots,
// sampling the nodes' memory meanwhile.
func (r *scaleRun) run(ctx context.Context) (*ScaleReport, Result, error) {
	s := r.o.Scale
	sr := &ScaleReport{URLs: r.urls, Revisit: s.Revisit, Distribution: s.Distribution, Seed: s.Seed}
	if s.Distribution == DistZipf {
		sr.ZipfS, sr.ZipfV = s.ZipfS, s.ZipfV
	}
	if r.store != "" {
		sr.Store = store.Redact(r.store)
	}
	if s.SampleEvery > 0 {
		sr.SampleEvery = s.SampleEvery
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go r.rss.run(sctx, s.SampleEvery, r.scrapeNodes)
	}
	defer func() {
		sr.RSSSamples = r.rss.all()
		sr.Peaks = Peaks(sr.RSSSamples)
	}()
	sr.Snapshots = append(sr.Snapshots, r.snapshot(ctx, "before"))
	r.rss.setPhase(phaseCreate)
	sessions, d := createSessions(ctx, r.o, r.c, r.urls, s.Sessions, s.CreateFor, "mcpgrain")
	created := d.result()
	sr.Created, sr.CreateErrors, sr.CreateRestores = len(sessions), nonEmpty(d.kinds), len(d.lat[coldAnswer])
	if err := ctx.Err(); err != nil {
		return sr, created, err
	}
	if len(sessions) == 0 {
		return sr, created, fmt.Errorf("none of %d sessions could be created, the first failure: %s", s.Sessions, firstOr(created.ErrorSamples, "none"))
	}
	sr.Snapshots = append(sr.Snapshots, r.snapshot(ctx, "created"))
	if err := r.revisit(ctx, sr, sessions); err != nil {
		return sr, created, err
	}
	last := r.snapshot(ctx, "revisited")
	sr.Snapshots = append(sr.Snapshots, last)
	for _, n := range last.Nodes {
		sr.Resident += n.Resident
	}
	sr.NodeActivations = activationsBetween(sr.Snapshots[1], last)
	sr.StoreBytesPerSession = storePerSession(sr.Snapshots[0].Store, sr.Snapshots[1].Store, sr.Created)
	return sr, created, nil
}

// revisit runs the revisit phase over sessions, picked by the options'
// distribution, each through a random URL.
func (r *scaleRun) revisit(ctx context.Context, sr *ScaleReport, sessions []rawSession) error {
	s := r.o.Scale
	pick, err := newPicker(s.Distribution, len(sessions), s.ZipfS, s.ZipfV, s.Seed)
	if err != nil {
		return err
	}
	var deadline time.Time
	if r.o.Duration > 0 {
		deadline = time.Now().Add(r.o.Duration)
	}
	r.rss.setPhase(phaseRevisit)
	d := drive(ctx, r.o, Progress{Scenario: Scale, Target: "mcpgrain", Phase: phaseRevisit}, NewBudget(deadline, r.o.Requests, time.Now), 2,
		func(ctx context.Context) (int, error) {
			sess := sessions[pick.next()]
			cold, err := r.c.revisit(ctx, r.urls[rand.IntN(len(r.urls))], sess, s.Revisit)
			if cold {
				return coldAnswer, err
			}
			return warmAnswer, err
		})
	sr.Revisits, sr.Warm, sr.Cold, sr.RevisitErrors = d.result(), d.class(warmAnswer), d.class(coldAnswer), nonEmpty(d.kinds)
	sr.ColdFraction = ColdFraction(sr.Warm.Requests, sr.Cold.Requests)
	sr.RestoresPerSecond, sr.Distinct = sr.Cold.Throughput, pick.Distinct()
	return ctx.Err()
}

// activationsBetween is the runtimes the nodes built from one snapshot to
// the next (-1 when a node failed either scrape).
func activationsBetween(before, after Snapshot) float64 {
	if len(before.Nodes) != len(after.Nodes) {
		return -1
	}
	var n float64
	for i := range after.Nodes {
		if before.Nodes[i].Error != "" || after.Nodes[i].Error != "" {
			return -1
		}
		n += after.Nodes[i].Activations - before.Nodes[i].Activations
	}
	return n
}

// createSessions creates n sessions from o.Concurrency workers, session
// i at urls[i mod len(urls)] (a round robin, as a load balancer spreads
// new connections), and returns those created; none is started after
// createFor (zero: no bound). The driven classes are warm and cold
// creations (restored before notifications/initialized).
func createSessions(ctx context.Context, o Options, c *rawClient, urls []string, n int, createFor time.Duration, name string) ([]rawSession, driven) {
	sessions := make([]rawSession, n)
	var next atomic.Int64
	var deadline time.Time
	if createFor > 0 {
		deadline = time.Now().Add(createFor)
	}
	d := drive(ctx, o, Progress{Scenario: Scale, Target: name, Phase: phaseCreate}, NewBudget(deadline, n, time.Now), 2,
		func(ctx context.Context) (int, error) {
			i := int(next.Add(1) - 1)
			s, cold, err := c.create(ctx, urls[i%len(urls)])
			sessions[i] = s
			if cold {
				return coldAnswer, err
			}
			return warmAnswer, err
		})
	out := sessions[:0]
	for _, s := range sessions {
		if s.id != "" {
			out = append(out, s)
		}
	}
	return out, d
}

// scaleBaseline creates the baseline's sessions on the plain go-sdk
// server with the same client, measuring this process's live heap around
// it.
func scaleBaseline(ctx context.Context, o Options, sr *ScaleReport) (Result, error) {
	bt, err := startBaseline(ctx, false, o.Concurrency)
	if err != nil {
		return Result{}, err
	}
	defer bt.close()
	heap0 := liveHeap()
	sessions, d := createSessions(ctx, o, &rawClient{hc: bt.hc}, []string{bt.endpoint}, o.Scale.BaselineSessions, 0, "baseline")
	heap1 := liveHeap()
	res := d.result()
	sr.BaselineCreateErrors = nonEmpty(d.kinds)
	if len(sessions) >= minHeapSessions && heap1 > heap0 {
		sr.BaselineHeapPerSession = float64(heap1-heap0) / float64(len(sessions))
	}
	runtime.KeepAlive(sessions)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(sessions) == 0 {
		return res, fmt.Errorf("none of %d sessions could be created, the first failure: %s", o.Scale.BaselineSessions, firstOr(res.ErrorSamples, "none"))
	}
	return res, nil
}

// minHeapSessions is the fewest baseline sessions whose heap growth is
// reported: what the stopped in-process node leaves behind is collected
// while they are created (a few hundred KiB), which would hide a small
// sample.
const minHeapSessions = 1000

// liveHeap is this process's heap after full collections (two: the
// first only moves sync.Pool contents to the pools' victim caches).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// snapshot scrapes every node and measures the store; the nodes' memory
// joins the RSS samples.
func (r *scaleRun) snapshot(ctx context.Context, phase string) Snapshot {
	snap := Snapshot{Phase: phase}
	var wg sync.WaitGroup
	wg.Go(func() { snap.Nodes = r.scrapeNodes(ctx) })
	if r.store != "" {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		st := sampleStore(sctx, r.store, time.Now())
		cancel()
		snap.Store = &st
	}
	wg.Wait()
	r.rss.add(phase, snap.Nodes)
	return snap
}

// scrapeNodes scrapes every node's /metrics at once.
func (r *scaleRun) scrapeNodes(ctx context.Context) []NodeSample {
	nodes := make([]NodeSample, len(r.bases))
	var wg sync.WaitGroup
	for i, base := range r.bases {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			text, err := scrape(sctx, r.c.hc, base+"/metrics")
			if err != nil {
				nodes[i] = NodeSample{Node: base, URL: base, Error: shortError(err)}
				return
			}
			nodes[i] = nodeSample(base, text)
		})
	}
	wg.Wait()
	return nodes
}

// ColdFraction is cold / (warm + cold), or 0 when both are 0.
func ColdFraction(warm, cold int) float64 {
	if warm+cold == 0 {
		return 0
	}
	return float64(cold) / float64(warm+cold)
}

// storePerSession is the store's growth from before to after divided by
// sessions (0 when either sample is missing or failed).
func storePerSession(before, after *StoreSample, sessions int) float64 {
	if before == nil || after == nil || before.Error != "" || after.Error != "" || sessions == 0 {
		return 0
	}
	return float64(after.Bytes-before.Bytes) / float64(sessions)
}

// Endpoints splits a comma-separated list of URLs (empty entries
// dropped).
func Endpoints(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// MetricLabel returns the value of label on the first sample of metric
// name in a Prometheus text exposition ("" if there is none).
func MetricLabel(exposition, name, label string) string {
	for line := range strings.Lines(exposition) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+"{")
		if !ok {
			continue
		}
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			continue
		}
		if labels, ok := parseLabels(rest[:end]); ok {
			return labels[label]
		}
	}
	return ""
}

func nonEmpty(m map[string]int) map[string]int {
	if len(m) == 0 {
		return nil
	}
	return m
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}
