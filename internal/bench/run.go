package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of [Options], used where a field is zero; `mcpgrain bench`
// flags default to them.
const (
	// DefaultSessions is Options.Sessions when unset.
	DefaultSessions = 10
	// DefaultConcurrency is Options.Concurrency when unset.
	DefaultConcurrency = 4
	// DefaultRestoreCap is Options.RestoreCap when unset.
	DefaultRestoreCap = 4
	// DefaultRequestTimeout is Options.RequestTimeout when unset.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultProgressEvery is Options.ProgressEvery when unset.
	DefaultProgressEvery = time.Second
)

// Options configure [Run]. Zero values get the defaults noted.
type Options struct {
	// URL is the MCP endpoint under load. Empty: Run starts a single node
	// in this process for each scenario (as `mcpgrain dev` does). The
	// scale scenario takes a comma-separated list and spreads sessions
	// over it ([Endpoints]); the others need exactly one.
	URL string
	// Token is the bearer token for URL (empty: none).
	Token string
	// Scenarios run in this order (default: call).
	Scenarios []Scenario
	// Sessions is how many MCP sessions to open up front (default
	// [DefaultSessions]; churn opens its own).
	Sessions int
	// Concurrency is how many workers issue requests at once (default
	// [DefaultConcurrency]).
	Concurrency int
	// Duration bounds each measured phase (0: only Requests does).
	Duration time.Duration
	// Requests, when positive, ends a measured phase after that many
	// requests.
	Requests int
	// Warmup runs the load this long before measuring (0: none).
	Warmup time.Duration
	// Baseline also runs each scenario against a plain go-sdk server in
	// this process and reports ratios.
	Baseline bool
	// RestoreCap is the soft cap of the in-process node in the restore
	// scenario (default [DefaultRestoreCap]); Sessions must exceed it.
	RestoreCap int
	// Scale configures the scale scenario, whose revisit phase Duration
	// and Requests bound (it has no warm-up).
	Scale ScaleOptions
	// RequestTimeout bounds one request (default [DefaultRequestTimeout]).
	RequestTimeout time.Duration
	// Progress, if set, is called about every ProgressEvery during each
	// phase, and once at its end with Final set.
	Progress func(Progress)
	// ProgressEvery is the interval of Progress calls (default
	// [DefaultProgressEvery]).
	ProgressEvery time.Duration
	// NodeLogger receives the in-process node's log (nil: discarded).
	NodeLogger *slog.Logger
}

// Validate fills zero fields with their defaults, then checks o.
func (o *Options) Validate() error {
	o.fillDefaults()
	if err := o.checkCounts(); err != nil {
		return err
	}
	return o.checkScenarios()
}

// fillDefaults sets the zero fields of o to their defaults.
func (o *Options) fillDefaults() {
	if len(o.Scenarios) == 0 {
		o.Scenarios = []Scenario{Call}
	}
	setDefault(&o.Sessions, DefaultSessions)
	setDefault(&o.Concurrency, DefaultConcurrency)
	setDefault(&o.RestoreCap, DefaultRestoreCap)
	setDefault(&o.RequestTimeout, DefaultRequestTimeout)
	setDefault(&o.ProgressEvery, DefaultProgressEvery)
}

// setDefault sets *v to def if it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// checkCounts checks the sizes and lengths of the run.
func (o *Options) checkCounts() error {
	switch {
	case o.Sessions < 1:
		return errors.New("sessions must be at least 1")
	case o.Concurrency < 1:
		return errors.New("concurrency must be at least 1")
	case o.Duration < 0 || o.Warmup < 0 || o.Requests < 0:
		return errors.New("duration, warmup and requests must not be negative")
	case o.Duration == 0 && o.Requests == 0:
		return errors.New("set a duration or a request count (or both)")
	case o.RestoreCap < 1:
		return errors.New("the restore soft cap must be at least 1")
	}
	return nil
}

// checkScenarios checks each scenario against the rest of o.
func (o *Options) checkScenarios() error {
	urls := len(Endpoints(o.URL))
	for _, sc := range o.Scenarios {
		switch {
		case sc == Restore && o.URL == "" && o.Sessions <= o.RestoreCap:
			return fmt.Errorf("the restore scenario needs more sessions (%d) than the node's soft cap (%d): raise sessions or lower the cap", o.Sessions, o.RestoreCap)
		case sc == Overload && o.Duration == 0:
			return errors.New("the overload scenario needs a duration: each of its loads runs that long")
		case sc != Scale && urls > 1:
			return fmt.Errorf("the %s scenario drives one URL, not %d (only scale spreads over several)", sc, urls)
		case sc == Scale:
			if err := o.Scale.validate(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Progress is a snapshot of a running phase.
type Progress struct {
	// Scenario is the scenario running.
	Scenario Scenario
	// Target is "mcpgrain" or "baseline".
	Target string
	// Warmup is set during the warm-up phase.
	Warmup bool
	// Phase, when set, names the phase instead (scale: create, revisit).
	Phase string
	// Done counts finished requests; Errors the failed ones among them.
	Done, Errors int
	// Elapsed is the phase's time so far.
	Elapsed time.Duration
	// Fraction is how far the phase is, 0 to 1.
	Fraction float64
	// Final is set on the phase's last report.
	Final bool
}

// Report is one scenario's outcome.
type Report struct {
	// Scenario is what ran.
	Scenario Scenario `json:"scenario"`
	// Target describes the mcpgrain side: the URL, or the in-process node
	// and its soft cap.
	Target string `json:"target"`
	// Sessions, Concurrency, Duration, Requests and Warmup are the run's
	// settings (Options).
	Sessions    int           `json:"sessions"`
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"durationNs,omitempty"`
	Requests    int           `json:"requestLimit,omitempty"`
	Warmup      time.Duration `json:"warmupNs,omitempty"`
	// External is set when mcpgrain ran elsewhere (Options.URL): its
	// cpu/req is then the client's alone.
	External bool `json:"external,omitempty"`
	// Mcpgrain is the result against mcpgrain (URL or the in-process node).
	Mcpgrain Result `json:"mcpgrain"`
	// Baseline is the result against the plain go-sdk server (nil: not
	// run; BaselineNote says why when there is none for the scenario).
	Baseline *Result `json:"baseline,omitempty"`
	// Ratios are mcpgrain/baseline (nil without a baseline).
	Ratios       *Ratios `json:"ratios,omitempty"`
	BaselineNote string  `json:"baselineNote,omitempty"`
	// Scale holds what the scale scenario measured besides creation: its
	// creation phase is Mcpgrain (and Baseline), a request there being a
	// whole session creation (initialize + notifications/initialized).
	Scale *ScaleReport `json:"scale,omitempty"`
	// Overload holds the overload scenario's curve; its closed-loop
	// capacity phase is Mcpgrain.
	Overload *OverloadReport `json:"overload,omitempty"`
	// Restores (restore scenario) are the node's counter deltas over the
	// measured phase; RestoreNote says why they are missing.
	Restores    *Restores `json:"restores,omitempty"`
	RestoreNote string    `json:"restoreNote,omitempty"`
}

// noRestoreBaseline is why restore has no baseline.
const noRestoreBaseline = "a plain go-sdk server keeps every session in memory and has no passivation, so there is nothing to restore"

// Run runs every scenario of o and returns one report per scenario. It
// returns an error when a target cannot be started or sessions cannot be
// opened; failed requests are counted in the reports, not returned. A
// scale run that fails or is cancelled after creating sessions still
// returns its report, with what it measured so far.
func Run(ctx context.Context, o Options) ([]Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var reports []Report
	for _, sc := range o.Scenarios {
		r, err := runScenario(ctx, o, sc)
		if err != nil {
			if r.Scale != nil && r.Mcpgrain.Requests > 0 {
				reports = append(reports, r) // what a long scale run measured before it failed or was stopped
			}
			return reports, fmt.Errorf("scenario %s: %w", sc, err)
		}
		reports = append(reports, r)
	}
	return reports, nil
}

func runScenario(ctx context.Context, o Options, sc Scenario) (Report, error) {
	switch sc {
	case Scale:
		return runScale(ctx, o)
	case Overload:
		return runOverload(ctx, o)
	}
	rep := Report{Scenario: sc, Target: o.URL, External: o.URL != "", Sessions: o.Sessions, Concurrency: o.Concurrency, Duration: o.Duration, Requests: o.Requests, Warmup: o.Warmup}
	conns := o.Sessions + o.Concurrency
	var t *target
	var err error
	if o.URL != "" {
		t, err = newTarget(o.URL, o.Token, conns)
	} else {
		// Outside restore the cap stays out of the way, so no scenario
		// but restore measures cold restores.
		softCap := max(64, 2*o.Sessions+o.Concurrency)
		if sc == Restore {
			softCap = o.RestoreCap
		}
		rep.Target = fmt.Sprintf("in-process node (soft cap %d)", softCap)
		t, err = startNode(ctx, NodeOptions{SoftCap: softCap, Logger: o.NodeLogger}, conns)
	}
	if err != nil {
		return rep, err
	}
	res, restores, note, err := measure(ctx, o, sc, t, "mcpgrain")
	t.close()
	if err != nil {
		return rep, fmt.Errorf("mcpgrain: %w", err)
	}
	rep.Mcpgrain, rep.Restores, rep.RestoreNote = res, restores, note
	if !o.Baseline {
		return rep, nil
	}
	if sc == Restore {
		rep.BaselineNote = noRestoreBaseline
		return rep, nil
	}
	bt, err := startBaseline(ctx, sc == Approve, conns)
	if err != nil {
		return rep, err
	}
	bres, _, _, err := measure(ctx, o, sc, bt, "baseline")
	bt.close()
	if err != nil {
		return rep, fmt.Errorf("baseline: %w", err)
	}
	rep.Baseline = &bres
	r := Compare(res, bres)
	if o.URL != "" {
		// The server under --url runs elsewhere: this process's CPU is
		// only the client's there, but client and server here.
		r.CPU = math.NaN()
	}
	rep.Ratios = &r
	return rep, nil
}

// measure opens the sessions, warms up, runs the measured phase and
// closes the sessions. For restore on mcpgrain it also reads the node's
// counters around the measured phase.
func measure(ctx context.Context, o Options, sc Scenario, t *target, name string) (Result, *Restores, string, error) {
	var sessions []*mcp.ClientSession
	retried := 0
	if sc != Churn {
		var err error
		if sessions, retried, err = openSessions(ctx, t, o.Sessions, o.Concurrency); err != nil {
			return Result{}, nil, "", err
		}
	}
	p := newPool(t, sessions)
	defer func() { closeSessions(p.sessions(), o.Concurrency) }()
	op := operation(sc, t, p)
	if o.Warmup > 0 {
		phase(ctx, o, sc, name, true, op, NewBudget(time.Now().Add(o.Warmup), 0, time.Now))
	}
	var before Restores
	var scrapeErr error
	measureRestores := sc == Restore && name == "mcpgrain"
	if measureRestores {
		var text string
		if text, scrapeErr = scrape(ctx, t.hc, t.base+"/metrics"); scrapeErr == nil {
			before = restoreCounters(text)
		}
	}
	var deadline time.Time
	if o.Duration > 0 {
		deadline = time.Now().Add(o.Duration)
	}
	res := phase(ctx, o, sc, name, false, op, NewBudget(deadline, o.Requests, time.Now))
	res.SetupRetries = retried
	if err := ctx.Err(); err != nil {
		return res, nil, "", err
	}
	if !measureRestores {
		return res, nil, "", nil
	}
	if scrapeErr == nil {
		var text string
		if text, scrapeErr = scrape(ctx, t.hc, t.base+"/metrics"); scrapeErr == nil {
			d := restoreCounters(text).sub(before)
			return res, &d, "", nil
		}
	}
	return res, nil, "restores unknown: " + shortError(scrapeErr), nil
}

// phase runs op from o.Concurrency workers until budget ends.
func phase(ctx context.Context, o Options, sc Scenario, name string, warmup bool, op func(context.Context) error, budget *Budget) Result {
	d := drive(ctx, o, Progress{Scenario: sc, Target: name, Warmup: warmup}, budget, 1, func(ctx context.Context) (int, error) { return 0, op(ctx) })
	return d.result()
}

// driven is what [drive] collected.
type driven struct {
	// lat holds the latencies of successful requests, by class.
	lat [][]time.Duration
	// errs are the messages of failed requests, in order; kinds counts
	// them by [ErrorKind].
	errs  []string
	kinds map[string]int
	// elapsed is the phase's wall time, cpu the process CPU time it took.
	elapsed, cpu time.Duration
}

// result summarizes every request of the phase, with the CPU time per
// request.
func (d driven) result() Result {
	var all []time.Duration
	for _, l := range d.lat {
		all = append(all, l...)
	}
	r := Summarize(all, d.errs, d.elapsed)
	if r.Requests > 0 && d.cpu > 0 {
		r.CPUPerRequest = d.cpu / time.Duration(r.Requests)
	}
	return r
}

// class summarizes the successful requests of class c alone (their
// throughput over the whole phase; no errors, no CPU share).
func (d driven) class(c int) Result {
	return Summarize(slices.Clone(d.lat[c]), nil, d.elapsed)
}

// drive runs op from o.Concurrency workers until budget ends, reporting
// progress as p (Done, Errors, Elapsed, Fraction and Final filled in).
// op returns the class of a successful request (0 ≤ class < classes),
// by which drive keeps its latency, or an error.
func drive(ctx context.Context, o Options, p Progress, budget *Budget, classes int, op func(context.Context) (int, error)) driven {
	var done, failed atomic.Int64
	var mu sync.Mutex
	out := driven{lat: make([][]time.Duration, classes), kinds: map[string]int{}}
	start := time.Now()
	stopTicker := make(chan struct{})
	tickerDone := make(chan struct{})
	report := func(final bool) {
		if o.Progress != nil {
			p.Done, p.Errors, p.Elapsed, p.Fraction, p.Final = int(done.Load()), int(failed.Load()), time.Since(start), budget.Fraction(start), final
			o.Progress(p)
		}
	}
	go func() {
		defer close(tickerDone)
		tick := time.NewTicker(o.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopTicker:
				return
			case <-ctx.Done():
				budget.Stop()
				return
			case <-tick.C:
				report(false)
			}
		}
	}()
	cpu0 := processCPU()
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Go(func() {
			myLat := make([][]time.Duration, classes)
			var myErrs []string
			myKinds := map[string]int{}
			for budget.Take() {
				rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
				s := time.Now()
				class, err := op(rctx)
				d := time.Since(s)
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						break // cancelled: not the target's failure
					}
					myErrs = append(myErrs, shortError(err))
					myKinds[ErrorKind(err)]++
					failed.Add(1)
				} else {
					myLat[class] = append(myLat[class], d)
				}
				done.Add(1)
			}
			mu.Lock()
			for c := range myLat {
				out.lat[c] = append(out.lat[c], myLat[c]...)
			}
			out.errs = append(out.errs, myErrs...)
			for k, n := range myKinds {
				out.kinds[k] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	out.cpu = processCPU() - cpu0
	close(stopTicker)
	<-tickerDone
	report(true)
	return out
}

// setupAttempts is how often opening one session is tried before the
// run gives up.
const setupAttempts = 3

// openSessions initializes n sessions, conc at a time. A session that
// fails to open is tried again (up to setupAttempts times); retried
// counts those failures.
func openSessions(ctx context.Context, t *target, n, conc int) (sessions []*mcp.ClientSession, retried int, err error) {
	sessions = make([]*mcp.ClientSession, n)
	errs := make([]error, n)
	var retries atomic.Int64
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for attempt := 1; ; attempt++ {
				sessions[i], errs[i] = t.connect(ctx)
				if errs[i] == nil || attempt == setupAttempts || ctx.Err() != nil {
					return
				}
				retries.Add(1)
			}
		})
	}
	wg.Wait()
	failed, first := 0, error(nil)
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		closeSessions(sessions, conc)
		return nil, int(retries.Load()), fmt.Errorf("open %d sessions: %d failed (after %d attempts each), the first with: %w", n, failed, setupAttempts, first)
	}
	return sessions, int(retries.Load()), nil
}

func closeSessions(sessions []*mcp.ClientSession, conc int) {
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for _, cs := range sessions {
		if cs == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = cs.Close()
		})
	}
	wg.Wait()
}

// approveCode is the approve scenario's execution: one demo API write,
// which needs approval.
const approveCode = `return await tools.demo.createTodo({title: "bench"})`

// pool is the sessions a scenario reuses. A session that fails a request
// is replaced by a fresh one (as a client would reconnect after a 404),
// so one failure costs one error, not every later request on a session
// the go-sdk client has closed.
type pool struct {
	t     *target
	slots []atomic.Pointer[mcp.ClientSession]
	rr    *RoundRobin
	// replaced counts sessions opened to replace failed ones.
	replaced atomic.Int64
}

func newPool(t *target, sessions []*mcp.ClientSession) *pool {
	p := &pool{t: t, slots: make([]atomic.Pointer[mcp.ClientSession], len(sessions)), rr: NewRoundRobin(len(sessions))}
	for i, cs := range sessions {
		p.slots[i].Store(cs)
	}
	return p
}

// do runs f on the next session, replacing the session if f fails.
func (p *pool) do(ctx context.Context, f func(context.Context, *mcp.ClientSession) error) error {
	i := p.rr.Next()
	cs := p.slots[i].Load()
	err := f(ctx, cs)
	if err != nil && ctx.Err() == nil {
		if fresh, cerr := p.t.connect(ctx); cerr == nil {
			if p.slots[i].CompareAndSwap(cs, fresh) {
				p.replaced.Add(1)
				go func() { _ = cs.Close() }()
			} else {
				go func() { _ = fresh.Close() }()
			}
		}
	}
	return err
}

// sessions returns the current sessions.
func (p *pool) sessions() []*mcp.ClientSession {
	out := make([]*mcp.ClientSession, len(p.slots))
	for i := range p.slots {
		out[i] = p.slots[i].Load()
	}
	return out
}

// operation returns one request of scenario sc.
func operation(sc Scenario, t *target, p *pool) func(context.Context) error {
	switch sc {
	case Churn:
		return func(ctx context.Context) error {
			cs, err := t.connect(ctx)
			if err != nil {
				return err
			}
			callErr := echo(ctx, cs)
			closeErr := cs.Close()
			if callErr != nil {
				return callErr
			}
			if closeErr != nil {
				return fmt.Errorf("close (DELETE): %w", closeErr)
			}
			return nil
		}
	case Approve:
		return func(ctx context.Context) error {
			return p.do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error { return approveCycle(ctx, t, cs) })
		}
	default: // Call, Restore
		return func(ctx context.Context) error { return p.do(ctx, echo) }
	}
}

func echo(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}})
	if err != nil {
		return fmt.Errorf("tools/call echo: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("tools/call echo: tool error: %s", text(res))
	}
	return nil
}

// approveCycle is execute (pauses) → approve over HTTP → resume.
func approveCycle(ctx context.Context, t *target, cs *mcp.ClientSession) error {
	id, err := executePaused(ctx, cs)
	if err != nil {
		return err
	}
	if err := approveHTTP(ctx, t, id); err != nil {
		return err
	}
	return resumeApproved(ctx, cs, id)
}

// executePaused runs approveCode, which pauses for approval, and returns
// the paused execution's id.
func executePaused(ctx context.Context, cs *mcp.ClientSession) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"code": approveCode}})
	if err != nil {
		return "", fmt.Errorf("execute: %w", err)
	}
	sc := mcpclient.Structured(res)
	id, _ := sc["executionId"].(string)
	if res.IsError || sc["status"] != "waiting_for_interaction" || id == "" {
		return "", fmt.Errorf("execute: want a pause (waiting_for_interaction), got status %v: %s", sc["status"], text(res))
	}
	return id, nil
}

// approveHTTP accepts the paused execution id through the node's HTTP
// approval route.
func approveHTTP(ctx context.Context, t *target, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/api/executions/"+id+"/resume", strings.NewReader(`{"action":"accept"}`))
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("approve: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// resumeApproved is the model's resume of the approved execution id.
func resumeApproved(ctx context.Context, cs *mcp.ClientSession, id string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "resume", Arguments: map[string]any{"executionId": id, "action": "accept"}})
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if sc := mcpclient.Structured(res); res.IsError || sc["status"] != "completed" {
		return fmt.Errorf("resume: want completed, got status %v: %s", sc["status"], text(res))
	}
	return nil
}

func text(res *mcp.CallToolResult) string {
	return strings.Join(strings.Fields(mcpclient.Text(res)), " ")
}
