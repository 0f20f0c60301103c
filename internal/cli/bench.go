package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/bench"
)

// benchCommand is `mcpgrain bench`'s flags.
type benchCommand struct {
	url, token, scenarios                 string
	sessions, concurrency, requests       int
	duration, warmup, timeout             time.Duration
	baseline, asJSON, progress            bool
	restoreCap                            int
	scaleSessions, scaleBaseline          int
	scaleRevisit, scaleStore, scaleMemory string
	scaleDist                             string
	scaleZipfS, scaleZipfV                float64
	scaleSeed                             uint64
	scaleSampleEvery, scaleCreateFor      time.Duration
	nodeLog, cpuProfile, serveBaseline    string
}

// flags registers the bench command's flags.
func (b *benchCommand) flags(stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("bench", "Load-tests an MCP endpoint with the go-sdk client and prints latency percentiles, throughput and errors per scenario.\n"+
		"Without --url it starts a single node in this process (as mcpgrain dev does) for each scenario.\n"+
		"Scenarios: call (tools/call round trips), churn (initialize + call + DELETE), restore (calls that force cold restores), approve (execute → approve → resume);\n"+
		"scale (creates --scale-sessions sessions over raw Streamable HTTP, then revisits random ones — uniformly, or a few hot and a long cold tail with --scale-distribution zipf — warm and cold apart, sampling the nodes' RSS; only when named, not part of all);\n"+
		"overload (measures the closed-loop capacity with --concurrency workers, then offers open-loop echo calls at 0.5, 1, 1.5, 2 and 3 times it for --duration each: served, shed, p99, memory; only when named).", stderr)
	fs.StringVar(&b.url, "url", "", "MCP endpoint under load, e.g. "+defaultMCPURL+" (default: an in-process node); scale takes a comma-separated list, one URL per node, and spreads sessions over it")
	fs.StringVar(&b.token, "token", "", "bearer token for --url (ignored without --url: the in-process node generates one)")
	fs.StringVar(&b.scenarios, "scenario", "call", "scenarios to run: call, churn, restore, approve, scale, overload, a comma-separated list, or all (all but scale and overload)")
	fs.IntVar(&b.sessions, "sessions", bench.DefaultSessions, "MCP sessions opened up front (call, restore, approve)")
	fs.IntVar(&b.concurrency, "concurrency", bench.DefaultConcurrency, "concurrent workers issuing requests")
	fs.DurationVar(&b.duration, "duration", 10*time.Second, "length of each measured phase (0: only --requests ends it)")
	fs.IntVar(&b.requests, "requests", 0, "end each measured phase after this many requests (0: only --duration ends it)")
	fs.DurationVar(&b.warmup, "warmup", time.Second, "load run before measuring, not counted (0: none)")
	fs.BoolVar(&b.baseline, "baseline", false, "also run each scenario against a plain go-sdk server in this process and print mcpgrain/baseline ratios")
	fs.BoolVar(&b.asJSON, "json", false, "print the results as JSON")
	fs.IntVar(&b.restoreCap, "restore-cap", bench.DefaultRestoreCap, "resident soft cap of the in-process node in the restore scenario (must be below --sessions)")
	fs.IntVar(&b.scaleSessions, "scale-sessions", bench.DefaultScaleSessions, "sessions the scale scenario creates (--duration and --requests bound its revisits; --warmup does not apply)")
	fs.IntVar(&b.scaleBaseline, "scale-baseline-sessions", 0, "sessions the scale scenario creates on the plain go-sdk server with --baseline (0: as many as --scale-sessions)")
	fs.StringVar(&b.scaleRevisit, "scale-revisit", string(bench.RevisitEcho), "what a scale revisit sends: echo (tools/call of the demo echo tool) or ping")
	fs.StringVar(&b.scaleStore, "scale-store", "", "store the scale scenario measures for bytes per session and the reminder backlog: sqlite:PATH or postgres://… (default: the in-process node's own; none with --url)")
	fs.StringVar(&b.scaleMemory, "scale-resident-memory", "auto", "memory budget of the in-process node's resident runtimes in the scale scenario, from which it derives its soft cap, as mcpgrain node --resident-memory (auto: half the cgroup's or machine's memory)")
	fs.StringVar(&b.scaleDist, "scale-distribution", string(bench.DistUniform), "how a scale revisit picks its session: uniform, or zipf (most revisits to a few hot sessions, a long cold tail; see --scale-zipf-s)")
	fs.Float64Var(&b.scaleZipfS, "scale-zipf-s", bench.DefaultZipfS, "the Zipf exponent s of --scale-distribution zipf, above 1: the session of rank k is revisited in proportion to 1/(v+k)^s (larger: hotter head)")
	fs.Float64Var(&b.scaleZipfV, "scale-zipf-v", bench.DefaultZipfV, "the Zipf offset v of --scale-distribution zipf, at least 1")
	fs.Uint64Var(&b.scaleSeed, "scale-seed", bench.DefaultZipfSeed, "seed of the scale revisits' choice of sessions (the same seed revisits the same sequence)")
	fs.DurationVar(&b.scaleCreateFor, "scale-create-for", 0, "stop starting scale creations after this long and revisit the sessions created by then (0: create all --scale-sessions)")
	fs.DurationVar(&b.scaleSampleEvery, "scale-sample-every", bench.DefaultScaleSampleEvery, "how often the scale scenario samples every node's RSS and resident runtimes during creation and revisits (negative: only at the snapshots)")
	fs.DurationVar(&b.timeout, "timeout", bench.DefaultRequestTimeout, "longest one request may take before it counts as an error")
	fs.StringVar(&b.nodeLog, "node-log-level", "", "log level of the in-process node's log on stderr: debug, info, warn, error (default: no log)")
	fs.StringVar(&b.cpuProfile, "cpu-profile", "", "write a CPU profile of this process (client, in-process node and baseline) to this file")
	fs.BoolVar(&b.progress, "progress", isTerminal(stderr), "draw a progress bar on stderr (default when stderr is a terminal; otherwise one progress line every "+progressLineEvery.String()+")")
	fs.StringVar(&b.serveBaseline, "serve-baseline", "", "instead of benchmarking, serve the plain go-sdk baseline server (demo pack and code mode) on this address until interrupted, to load it from another process — e.g. pinned to cores of its own like the nodes it is compared with (127.0.0.1:0 picks a port)")
	addSecretFiles(fs)
	return fs
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var b benchCommand
	fs := b.flags(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if b.serveBaseline != "" {
		return bench.ServeBaseline(ctx, b.serveBaseline, func(u string) { fmt.Fprintf(stdout, "plain go-sdk baseline: %s (Ctrl-C stops it)\n", u) })
	}
	if err := resolveSecrets(fs, stderr, "bench", true); err != nil {
		return err
	}
	o, err := b.options(stderr)
	if err != nil {
		return err
	}
	if b.cpuProfile != "" {
		stop, err := startCPUProfile(b.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	reports, err := bench.Run(ctx, o)
	if len(reports) > 0 {
		werr := writeBenchReports(stdout, reports, b.asJSON)
		if err == nil {
			err = werr
		}
	}
	return err
}

// options translates the flags into the run's options, checked.
func (b *benchCommand) options(stderr io.Writer) (bench.Options, error) {
	scs, err := bench.ParseScenarios(b.scenarios)
	if err != nil {
		return bench.Options{}, fmt.Errorf("%w: --scenario: %v", errUsage, err)
	}
	if b.url == "" {
		b.token = "" // the in-process node makes its own (MCPGRAIN_TOKEN may be set for dev)
	}
	if err := b.check(); err != nil {
		return bench.Options{}, err
	}
	scaleBudget, err := app.ParseResidentMemory(b.scaleMemory)
	if err != nil || scaleBudget == 0 && b.scaleMemory != "auto" {
		return bench.Options{}, fmt.Errorf("%w: --scale-resident-memory %q: want a size such as 4GiB, or auto", errUsage, b.scaleMemory)
	}
	nodeLogger, err := b.nodeLogger(stderr)
	if err != nil {
		return bench.Options{}, err
	}
	o := bench.Options{
		URL: b.url, Token: b.token, Scenarios: scs, Sessions: b.sessions, Concurrency: b.concurrency,
		Duration: b.duration, Requests: b.requests, Warmup: b.warmup, Baseline: b.baseline,
		RestoreCap: b.restoreCap, RequestTimeout: b.timeout, NodeLogger: nodeLogger,
		Scale: bench.ScaleOptions{Sessions: b.scaleSessions, BaselineSessions: b.scaleBaseline, Revisit: bench.Revisit(b.scaleRevisit),
			Store: b.scaleStore, ResidentMemory: scaleBudget, Distribution: bench.Distribution(b.scaleDist),
			ZipfS: b.scaleZipfS, ZipfV: b.scaleZipfV, Seed: b.scaleSeed, SampleEvery: b.scaleSampleEvery, CreateFor: b.scaleCreateFor},
	}
	if err := o.Validate(); err != nil {
		return bench.Options{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	o.ProgressEvery, o.Progress = progressPrinter(stderr, b.progress)
	return o, nil
}

// check checks the counts and lengths of the run.
func (b *benchCommand) check() error {
	switch {
	case b.timeout <= 0:
		return fmt.Errorf("%w: --timeout must be positive", errUsage)
	case b.sessions < 1 || b.concurrency < 1:
		return fmt.Errorf("%w: --sessions and --concurrency must be at least 1", errUsage)
	case b.duration < 0 || b.warmup < 0 || b.requests < 0:
		return fmt.Errorf("%w: --duration, --warmup and --requests must not be negative", errUsage)
	case b.duration == 0 && b.requests == 0:
		return fmt.Errorf("%w: --duration 0 needs --requests (something must end the run)", errUsage)
	case b.restoreCap < 1:
		return fmt.Errorf("%w: --restore-cap must be at least 1", errUsage)
	case b.scaleSessions < 1 || b.scaleBaseline < 0:
		return fmt.Errorf("%w: --scale-sessions must be at least 1 and --scale-baseline-sessions not negative", errUsage)
	}
	return nil
}

// nodeLogger is the in-process node's logger of --node-log-level (nil:
// no log).
func (b *benchCommand) nodeLogger(stderr io.Writer) (*slog.Logger, error) {
	if b.nodeLog == "" {
		return nil, nil
	}
	level, err := parseLevel(b.nodeLog)
	if err != nil {
		return nil, fmt.Errorf("%w: --node-log-level: %v", errUsage, err)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})), nil
}

// How often bench reports its progress: a progress bar is redrawn, or a
// line printed (without a terminal).
const (
	progressBarEvery  = 200 * time.Millisecond
	progressLineEvery = 2 * time.Second
)

// progressPrinter reports progress on stderr: a bar (bar), else lines.
func progressPrinter(stderr io.Writer, bar bool) (time.Duration, func(bench.Progress)) {
	var mu sync.Mutex
	if bar {
		return progressBarEvery, func(p bench.Progress) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprint(stderr, bench.FormatProgress(p, true))
			if p.Final {
				fmt.Fprintln(stderr)
			}
		}
	}
	return progressLineEvery, func(p bench.Progress) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stderr, bench.FormatProgress(p, false))
	}
}

// startCPUProfile profiles this process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --cpu-profile: %v", errUsage, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeBenchReports prints the reports as text or JSON.
func writeBenchReports(w io.Writer, reports []bench.Report, asJSON bool) error {
	if asJSON {
		return bench.WriteJSON(w, reports)
	}
	return bench.WriteText(w, reports)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
