package chaos_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/engine/runstore"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/exchange/directory"
	"github.com/mcpgrain/mcpgrain/exchange/requeststate"
	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
	pb "github.com/mcpgrain/mcpgrain/proto/mcpgrain/v1"

	"google.golang.org/protobuf/proto"
)

// settings of one chaos run, from the environment.
type settings struct {
	rounds   int
	interval time.Duration
	faults   []string
	sessions int
	probes   int
	freeze   time.Duration
}

func loadSettings(t *testing.T) settings {
	s := settings{rounds: 2, interval: 12 * time.Second, faults: []string{"kill", "stop"}, sessions: 60, probes: 200, freeze: 15 * time.Second}
	if v := os.Getenv("MCPGRAIN_CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MCPGRAIN_CHAOS_ROUNDS=%q: want a positive integer", v)
		}
		s.rounds = n
	}
	if v := os.Getenv("MCPGRAIN_CHAOS_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Second {
			t.Fatalf("MCPGRAIN_CHAOS_INTERVAL=%q: want a duration of at least 5s", v)
		}
		s.interval = d
	}
	if v := os.Getenv("MCPGRAIN_CHAOS_FAULTS"); v != "" {
		s.faults = strings.Split(v, ",")
		for _, f := range s.faults {
			if !slices.Contains(chaos.Faults, f) {
				t.Fatalf("MCPGRAIN_CHAOS_FAULTS: unknown fault %q (want kill, stop, freeze, consul, postgres)", f)
			}
		}
	}
	if v := os.Getenv("MCPGRAIN_CHAOS_FREEZE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 2*membershipTTL {
			t.Fatalf("MCPGRAIN_CHAOS_FREEZE=%q: want a duration of at least %s (twice the membership TTL: the frozen node must leave the view)", v, 2*membershipTTL)
		}
		s.freeze = d
	}
	if v := os.Getenv("MCPGRAIN_CHAOS_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MCPGRAIN_CHAOS_SESSIONS=%q: want a positive integer", v)
		}
		s.sessions = n
	}
	return s
}

// balancer is the load balancer in front of the gateways: it sends each
// request to the next node that answered its last health check, and tries
// another node when a connection cannot be made (nothing was sent).
type balancer struct {
	c       *testcluster.Cluster
	next    atomic.Uint64
	healthy []atomic.Bool
	rt      http.RoundTripper
	// badRequest, when set, is told about every 400 a gateway answers
	// (diagnostics: the client only sees the status) and the session it
	// was for.
	badRequest func(session, what string)
	// synthetic, when set, is told about every answer the balancer makes
	// itself (502: the gateway died under the request; 503: no gateway
	// passed its health check), for the post-mortem of a lost session:
	// go-sdk's client closes its session on any non-2xx answer to a
	// stream resume (a GET with Last-Event-ID), even a transient one.
	synthetic func(r *http.Request, status int, why string)
	// served, when set, is told about every request the balancer sends
	// and the node it sends it to.
	served func(r *http.Request, node string)
}

func newBalancer(ctx context.Context, c *testcluster.Cluster) *balancer {
	b := &balancer{c: c, healthy: make([]atomic.Bool, len(c.Nodes())), rt: &http.Transport{MaxIdleConnsPerHost: 64}}
	check := func() {
		hc := &http.Client{Timeout: 300 * time.Millisecond}
		for i, n := range c.Nodes() {
			resp, err := hc.Get("http://" + n.HTTP + "/readyz")
			ok := err == nil && resp.StatusCode == http.StatusOK
			if resp != nil {
				resp.Body.Close()
			}
			b.healthy[i].Store(ok)
		}
	}
	check()
	go func() {
		tk := time.NewTicker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				check()
			}
		}
	}()
	return b
}

// whileHealthy returns a context cancelled when gateway i fails its health
// check: a load balancer stops waiting on a gateway it took out of
// rotation (a frozen process keeps its sockets open and never answers).
func (b *balancer) whileHealthy(parent context.Context, i int) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if !b.healthy[i].Load() {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	nodes := b.c.Nodes()
	var lastErr error
	for range 2 * len(nodes) {
		i := int(b.next.Add(1)) % len(nodes)
		if !b.healthy[i].Load() {
			continue
		}
		if b.served != nil {
			b.served(r, nodes[i].ID)
		}
		hctx, hcancel := b.whileHealthy(r.Context(), i)
		r2 := r.Clone(hctx)
		r2.URL.Host, r2.Host = nodes[i].HTTP, nodes[i].HTTP
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			r2.Body = body
		}
		resp, err := b.rt.RoundTrip(r2)
		if err == nil && resp.StatusCode == http.StatusBadRequest && b.badRequest != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			b.badRequest(r.Header.Get("Mcp-Session-Id"), fmt.Sprintf("%s %s via %s: 400 %s", r.Method, r.URL.Path, nodes[i].ID, body))
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		if err == nil {
			resp.Body = cancelOnClose{resp.Body, hcancel}
		} else {
			hcancel()
		}
		var op *net.OpError
		if err != nil && errors.As(err, &op) && op.Op == "dial" {
			lastErr = err
			continue
		}
		if err != nil && r.Context().Err() == nil {
			// The gateway died under the request (connection reset): a
			// load balancer answers 502, and cannot know whether the
			// request ran.
			if b.synthetic != nil {
				b.synthetic(r, http.StatusBadGateway, "gateway "+nodes[i].ID+" lost: "+err.Error())
			}
			return &http.Response{
				StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("upstream gateway lost: " + err.Error())),
				Request: r,
			}, nil
		}
		return resp, err
	}
	if lastErr == nil {
		// Every gateway failed its health check (e.g. the store is down
		// and /readyz says so): a balancer answers 503.
		if b.synthetic != nil {
			b.synthetic(r, http.StatusServiceUnavailable, "no healthy gateway")
		}
		return &http.Response{
			StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"1"}}, Body: io.NopCloser(strings.NewReader("no healthy gateway")),
			Request: r,
		}, nil
	}
	return nil, lastErr
}

// cancelOnClose releases the health watch of a response when its body is
// closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	c.cancel()
	return c.ReadCloser.Close()
}

// recorder collects what clients saw.
type recorder struct {
	mu       sync.Mutex
	outcomes []chaos.Outcome
	acks     map[string][]chaos.Ack
	unknown  map[string]int
	// counters and decisions are the histories the linearizability
	// checks read.
	counters  []chaos.CounterOp
	decisions []chaos.DecisionOp
	// lastOK is when each worker kind last succeeded; changed is closed
	// (and replaced) at every success, for waitProgress.
	lastOK  map[string]time.Time
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{acks: map[string][]chaos.Ack{}, unknown: map[string]int{}, lastOK: map[string]time.Time{}, changed: make(chan struct{})}
}

func (r *recorder) outcome(o chaos.Outcome) {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
	if o.OK && o.At.After(r.lastOK[o.Kind]) {
		r.lastOK[o.Kind] = o.At
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

func (r *recorder) decision(op chaos.DecisionOp) {
	r.mu.Lock()
	r.decisions = append(r.decisions, op)
	r.mu.Unlock()
}

// waitProgress waits until every kind has succeeded after since, or until
// deadline; it returns the kinds that had not.
func (r *recorder) waitProgress(since time.Time, kinds []string, deadline time.Time) []string {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		r.mu.Lock()
		var missing []string
		for _, k := range kinds {
			if !r.lastOK[k].After(since) {
				missing = append(missing, k)
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return missing
		}
	}
}

// retryable reports whether a client error is one a client is told to
// retry: the 503 restart envelope, 429, or an unavailable upstream. A call
// on a client session that go-sdk closed is not, whatever closed it (the
// message carries the cause, often a 503): the session is lost.
func retryable(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return false
	}
	s := err.Error()
	for _, m := range []string{"502", "503", "429", "restarting", "Too many requests", "Service Unavailable", "Bad Gateway", "retry"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// busy reports whether an execute result is the sandbox's "busy"
// refusal: a running-executions cap was full and nothing ran, so a retry
// may succeed (structured content errorKind "busy", retryable true).
func busy(res *mcp.CallToolResult) bool {
	r, _ := mcpclient.Structured(res)["retryable"].(bool)
	return r
}

// membershipTTL is the test cluster's membership TTL (--consul-ttl); the
// recovery bounds are derived from it.
const membershipTTL = 2 * time.Second

// sessionTimeout is the test cluster's --session-timeout: a session idle
// this long is passivated (its record kept; the next request restores
// it). Short, so that the notes worker's idle sessions are passivated
// during the run.
const sessionTimeout = 4 * time.Second

// timing is what the recovery bounds of the rounds derive from (see
// chaos.Timing and docs/reliability.md): the membership TTL, the gateway's
// 3 s departed-node silence (exchange), the balancer's health check (every
// 250 ms, 300 ms timeout), /readyz's store check (every 1 s), and a slack
// for the machine: 2.5 s, twice the largest excess of a measured gap over
// its mechanism in the recorded runs (1.17 s: a graceful stop's 1.72 s
// over the 0.55 s health check), rounded up.
var timing = chaos.Timing{
	TTL:         membershipTTL,
	Silence:     3 * time.Second,
	HealthCheck: 550 * time.Millisecond,
	StoreCheck:  time.Second,
	Slack:       2500 * time.Millisecond,
}

// progressWait bounds how long a round waits, after its fault is over, for
// every worker kind to succeed again: twice the liveness bound (an
// approval is an execute and a decision; each may take that long).
const progressWait = 20 * time.Second

// TestChaos runs the chaos harness: a real Consul agent, Postgres and
// three node processes of an SDK program (testdata/chaosnode: the tools
// of examples/notes, deploy and watch, with the built-in packs); MCP
// sessions doing tools/call through a health-checked balancer; fenced
// probe counters written through random nodes; reminders due across the
// run; approvals raced by two approvers; tasks (the tasks extension)
// created and followed to their end; sessions adding notes to the
// program's durable per-session State; deploys that ask (Ask), are
// decided through the approval API and deploy in a journaled Step;
// schedules with unique keys due shortly. Each
// round injects one fault (kill -9 and restart, graceful stop and
// restart, SIGSTOP/SIGCONT, Consul agent restart, Postgres restart), then
// the checkers run: single owner, nothing lost, liveness, recovery (per
// round: service gap within a bound derived from the TTL or the store's
// restart, every worker kind progressing, the error budget and the
// baseline), linearizability (porcupine), bounded growth, and every
// acknowledged task terminal exactly once, every acknowledged note shown
// exactly once by every later answer of its session, every answered
// accepted deploy deployed exactly once and no declined one, every
// acknowledged schedule fired.
// MCPGRAIN_CHAOS=1 enables it (CI runs a short round); MCPGRAIN_CHAOS_ROUNDS,
// _INTERVAL, _FAULTS, _FREEZE and _SESSIONS tune it.
func TestChaos(t *testing.T) {
	if os.Getenv("MCPGRAIN_CHAOS") != "1" {
		t.Skip("chaos harness: set MCPGRAIN_CHAOS=1 (CI runs it as its own step)")
	}
	cfg := loadSettings(t)
	baseText, err := os.ReadFile("testdata/baseline.txt")
	if err != nil {
		t.Fatal(err)
	}
	baseline, err := chaos.ParseBaseline(string(baseText))
	if err != nil {
		t.Fatal(err)
	}
	todos, todoFlag := testcluster.TodoAPI(t)
	// The nodes run testdata/chaosnode, an SDK program with the tools of
	// examples/notes, deploy and watch, with the built-in packs beside
	// its own: conformance has the tasks fixtures the task worker calls,
	// chaosnode the tools the notes, deploy and schedule workers call.
	deployLog := filepath.Join(t.TempDir(), "deployments.log")
	t.Setenv("DEPLOY_LOG", deployLog) // the nodes' shared deployment log
	watchDir := t.TempDir()
	t.Setenv("WATCH_DIR", watchDir) // the nodes' shared schedule records
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ConsulTTL: membershipTTL, Binary: testcluster.Build(t, "./internal/chaos/testdata/chaosnode"),
		ExtraArgs: []string{"--reminder-poll", "250ms", "--rate-limit", "0", "--openapi", todoFlag, "--tools", "code,demo,conformance,chaosnode",
			"--session-timeout", sessionTimeout.String()}})
	c.WaitMembers(3, 30*time.Second)
	st, err := store.Open(context.Background(), c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	lb := newBalancer(ctx, c)
	// A 400 ends a go-sdk client's session when it answers a stream
	// resume; the gateway never answers a resume so (exchange/eventid.go).
	// Logged for the post-mortem; a session lost this way is a violation
	// below.
	lb.badRequest = func(_, what string) { t.Logf("gateway answered %s", what) }
	var synthetic sync.Map // answers the balancer made itself, by kind
	lb.synthetic = func(r *http.Request, status int, why string) {
		kind := fmt.Sprintf("%s %d", r.Method, status)
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			kind = fmt.Sprintf("stream resume %d", status)
			t.Logf("balancer answered %d to a stream resume of session %s (%s)", status, r.Header.Get("Mcp-Session-Id"), why)
		}
		n, _ := synthetic.LoadOrStore(kind, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	rec := newRecorder()

	// MCP sessions, opened before the faults start.
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos"}, nil)
	sessions := make([]*mcp.ClientSession, cfg.sessions)
	for i := range sessions {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: "http://gateway/mcp", HTTPClient: &http.Client{Transport: bearer{lb}}, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("open session %d: %v", i, err)
		}
		sessions[i] = cs
	}
	// Reminders due across the whole run, registered up front.
	runFor := time.Duration(cfg.rounds)*max(cfg.interval, cfg.freeze) + 5*time.Second
	reminders := map[string]int64{}
	for g := range 20 {
		id := fmt.Sprintf("chaos-rem-%d", g)
		var specs []testcluster.ReminderSpec
		for k := range 5 {
			due := time.Now().Add(3*time.Second + runFor*time.Duration(g*5+k)/100)
			specs = append(specs, testcluster.ReminderSpec{Name: fmt.Sprintf("r%d", k), DueAtMs: due.UnixMilli()})
			reminders[id+"/"+fmt.Sprintf("r%d", k)] = due.UnixMilli()
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if err := c.Node(g%3).Remind(rctx, id, specs); err != nil {
			t.Fatal(err)
		}
		cancel()
	}

	// Load: session callers, probe writers and approvers until stop.
	var wg sync.WaitGroup
	// Approvals: executions that pause (a write), decided through the
	// balancer's approval API by two racing approvers while the faults
	// happen.
	ap := &approvals{ids: map[string]string{}, titles: map[string]string{}, sessionless: map[string]bool{}}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ap.run(ctx, rec, lb, sessions[w*len(sessions)/2:w*len(sessions)/2+min(5, len(sessions)/2)], w)
		}()
	}
	// Sessionless (2026-07-28) approvals: the pause is an input_required
	// result, the decision comes in-band with the retry, which must
	// settle the execution wherever its continuation grain lives now.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ap.runSessionless(ctx, t, rec, lb)
	}()
	// Tasks (2026-07-28, the tasks extension): created through the
	// balancer and followed to their end through any gateway. A task may
	// take the longest fault (the freeze) plus a round's recovery wait to
	// be seen terminal.
	tw := newTasks(lb, cfg.freeze+progressWait)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tw.run(ctx, rec)
		}()
	}
	// Notes (examples/notes: an SDK program's durable per-session State):
	// sessions adding notes and reading them back through any gateway.
	nw := newNotesWorker(lb)
	lb.served = nw.served
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nw.run(ctx, rec, w)
		}()
	}
	// Deploys (examples/deploy: an SDK program's Ask and Step): calls
	// that pause for an approver, decided through the approval API,
	// retried until answered; each deployed at most once
	// (MCPGRAIN_CHAOS_DEPLOY=0 switches them off).
	dw := newDeployWorker(lb, deployLog)
	workers := chaos.Workers // the worker kinds that run
	if deployWorkers() == 0 {
		workers = slices.DeleteFunc(slices.Clone(workers), func(k string) bool { return k == chaos.KindDeploy })
	}
	for w := range deployWorkers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dw.run(ctx, rec, w)
		}()
	}
	// Schedules (examples/watch: an SDK program's durable schedules):
	// reminders with unique keys due shortly, each to fire.
	sw := newScheduleWorker(lb, watchDir)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw.run(ctx, rec, w)
		}()
	}
	var calls, probeAcks atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cs := sessions[rand.IntN(len(sessions))]
				began := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprintf("w%d", w)}})
				cancel()
				if ctx.Err() != nil {
					return
				}
				o := chaos.Outcome{What: "tools/call " + cs.ID(), Kind: chaos.KindCall, Took: time.Since(began), OK: err == nil}
				if err != nil {
					o.Err, o.Retryable = err.Error(), retryable(err)
				} else {
					calls.Add(1)
				}
				rec.outcome(o)
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				id := fmt.Sprintf("chaos-%d", rand.IntN(cfg.probes))
				nodes := c.Nodes()
				n := nodes[rand.IntN(len(nodes))]
				if !lb.healthy[n.Index].Load() {
					time.Sleep(10 * time.Millisecond) // pick another node soon
					continue
				}
				began := time.Now()
				hctx, hcancel := lb.whileHealthy(ctx, n.Index)
				pctx, cancel := context.WithTimeout(hctx, 15*time.Second)
				r, err := n.Probe(pctx, id, 1)
				cancel()
				hcancel()
				ret := time.Now()
				op := chaos.CounterOp{Identity: id, Call: began, Return: ret, Delta: 1, Count: r.Count, Known: err == nil}
				if ctx.Err() != nil {
					// Cut short by the end of the run: it may have been
					// applied, so it counts as an unknown outcome (or an
					// ack), never for liveness.
					rec.mu.Lock()
					if err == nil {
						rec.acks[id] = append(rec.acks[id], chaos.Ack{Count: r.Count, Epoch: r.Epoch, Node: r.Node})
					} else {
						rec.unknown[id]++
					}
					rec.counters = append(rec.counters, op)
					rec.mu.Unlock()
					return
				}
				o := chaos.Outcome{What: "probe " + id + " via " + n.ID, Kind: chaos.KindProbe, Took: ret.Sub(began), At: ret, OK: err == nil}
				rec.mu.Lock()
				switch {
				case err == nil:
					rec.acks[id] = append(rec.acks[id], chaos.Ack{Count: r.Count, Epoch: r.Epoch, Node: r.Node})
					rec.counters = append(rec.counters, op)
					probeAcks.Add(1)
				case r.Status == http.StatusGatewayTimeout || r.Status == 0:
					rec.unknown[id]++ // may or may not have been applied
					rec.counters = append(rec.counters, op)
					o.Err, o.Retryable = err.Error(), true
				default:
					// A definite refusal: not applied (the counter and
					// linearizability checks hold the node to that).
					o.Err, o.Retryable = err.Error(), r.Retryable
				}
				rec.mu.Unlock()
				rec.outcome(o)
			}
		}()
	}

	// Rounds.
	var rounds []chaos.Round
	var goroutines, rss []float64
	sample := func() {
		var g, m float64
		for _, n := range c.Nodes() {
			v, _ := n.Metric("go_goroutines")
			g += v
			r, _ := n.Metric("process_resident_memory_bytes")
			m += r
		}
		goroutines, rss = append(goroutines, g), append(rss, m)
	}
	// The load is running before the first fault: every worker kind has
	// succeeded once.
	loadStart := time.Now()
	if missing := rec.waitProgress(loadStart.Add(-time.Hour), workers, loadStart.Add(30*time.Second)); len(missing) > 0 {
		stop()
		wg.Wait()
		t.Fatalf("no successful %v within 30s of starting the load, before any fault (%s)", missing, ap.connectErr())
	}
	for round := range cfg.rounds {
		fault := cfg.faults[round%len(cfg.faults)]
		victim := rand.IntN(3)
		r := chaos.Round{N: round + 1, Fault: fault, Node: c.Node(victim).ID, Began: time.Now(), Kinds: workers}
		switch fault {
		case "kill":
			c.Kill(victim)
			time.Sleep(time.Second) // the node stays dead for a second
			c.Restart(victim)
		case "stop":
			c.Stop(victim)
			c.Restart(victim)
		case "freeze":
			c.Freeze(victim)
			time.Sleep(cfg.freeze) // the node stays frozen this long
			c.Thaw(victim)
		case "consul":
			r.Node = "the Consul agent"
			c.Consul.Restart(t)
		case "postgres":
			r.Node = "the Postgres server"
			restartPostgres(t, c.DSN)
		}
		r.Outage = time.Since(r.Began)
		c.WaitMembers(3, 60*time.Second)
		r.Healed = time.Now()
		// Recovery: every worker kind succeeds again. Bounded; a kind that
		// does not is a violation of the round (chaos.CheckRound).
		missing := rec.waitProgress(r.Healed, workers, r.Healed.Add(progressWait))
		if rest := cfg.interval - time.Since(r.Began); rest > 0 {
			time.Sleep(rest) // hold the round's interval under load
		}
		r.Ended = time.Now()
		rounds = append(rounds, r)
		sample()
		t.Logf("round %d: %s %s at %s (outage %s), cluster whole again after %s; %d calls, %d probe writes acknowledged, %s so far; no progress yet: %v",
			r.N, fault, r.Node, r.Began.Format("15:04:05.000"), r.Outage.Round(time.Millisecond), r.Healed.Sub(r.Began).Round(time.Millisecond), calls.Load(), probeAcks.Load(), tw.counts()+"; "+nw.counts()+"; "+dw.counts()+"; "+sw.counts(), missing)
	}
	stop()
	wg.Wait()
	settleStart := time.Now()
	tw.settle(rec)
	t.Logf("tasks: the ones open at the end of the load followed to their end in %s", time.Since(settleStart).Round(time.Millisecond))
	settleStart = time.Now()
	nw.settle(rec)
	t.Logf("notes: the sessions open at the end of the load read a last time in %s", time.Since(settleStart).Round(time.Millisecond))

	// Checkers.
	var violations []string
	// (a)+(b) every acknowledged task reached a terminal status exactly
	// once, and was found until its TTL.
	taskViolations, taskEnds, taskAnswers := tw.check(t, c, st)
	violations = append(violations, taskViolations...)
	t.Logf("tasks: %s; ends seen per task: %v; answers checked: %v; violations %d", tw.counts(), taskEnds, taskAnswers, len(taskViolations))
	tw.logLosses(t, c)
	// (a)+(b) every acknowledged note shown exactly once by every later
	// answer of its session, no note twice, none going backwards.
	violations = append(violations, nw.check(t, c)...)
	// (a)+(b) every answered accepted deploy happened exactly once, none
	// twice, no declined one.
	violations = append(violations, dw.check(t, c)...)
	// (b) every acknowledged schedule fired, none early, none unasked.
	violations = append(violations, sw.check(t)...)
	var idle float64
	for _, n := range c.Nodes() {
		v, _ := n.Metric(fmt.Sprintf(`mcpgrain_runtime_disposals_total{node=%q,reason="idle"}`, n.ID))
		idle += v
	}
	t.Logf("notes: %s; sessions passivated idle: %.0f (the nodes' counters since their last start)", nw.counts(), idle)
	rec.mu.Lock()
	ids := make([]string, 0, len(rec.acks))
	for id := range rec.acks {
		ids = append(ids, id)
	}
	for id, acks := range rec.acks {
		violations = append(violations, chaos.SingleOwner(id, acks)...)
	}
	rec.mu.Unlock()
	// (a)+(b) every acknowledged probe write landed, once.
	for _, id := range ids {
		var final testcluster.ProbeResult
		var began time.Time
		for attempt := 0; ; attempt++ {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			began = time.Now()
			final, err = c.Node(attempt%3).Probe(fctx, id, 0)
			cancel()
			if err == nil || attempt > 20 {
				break
			}
			time.Sleep(200 * time.Millisecond) // retry backoff
		}
		if err != nil {
			violations = append(violations, fmt.Sprintf("%s: unreadable after chaos: %v", id, err))
			continue
		}
		rec.mu.Lock()
		rec.counters = append(rec.counters, chaos.CounterOp{Identity: id, Call: began, Return: time.Now(), Count: final.Count, Known: true})
		if v := chaos.Counter(id, final.Count, len(rec.acks[id]), rec.unknown[id]); len(v) > 0 {
			violations = append(violations, v...)
			acks := slices.Clone(rec.acks[id])
			slices.SortFunc(acks, func(a, b chaos.Ack) int { return int(a.Count - b.Count) })
			t.Logf("%s acknowledged (count/epoch/node): %v", id, acks)
			for _, o := range rec.outcomes {
				if !o.OK && strings.HasPrefix(o.What, "probe "+id+" ") {
					t.Logf("%s: %s after %s: %s", id, o.What, o.Took.Round(time.Millisecond), o.Err)
				}
			}
		}
		rec.mu.Unlock()
	}
	// (e) linearizability of the counters (porcupine), final reads
	// included: each identity's increments and reads as one register.
	linStart := time.Now()
	violations = append(violations, chaos.LinearizableCounters(rec.counters, 30*time.Second)...)
	t.Logf("linearizability (porcupine): %d counter operations over %d identities checked in %s",
		len(rec.counters), len(ids), time.Since(linStart).Round(time.Millisecond))
	// (b) every session created and not deleted still answers.
	for _, cs := range sessions {
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cs.ListTools(lctx, nil)
		cancel()
		if err != nil {
			violations = append(violations, fmt.Sprintf("session %s lost: %v", cs.ID(), err))
			// Post-mortem: the store's view and what the nodes logged.
			if o, err := st.Load(context.Background(), "session/"+cs.ID()); err == nil {
				var rec pb.SessionRecord
				_ = proto.Unmarshal(o.Record, &rec)
				t.Logf("lost session %s in the store: owner %q epoch %d record %d bytes, runtime state %d bytes, tombstone %v",
					cs.ID(), o.Owner, o.Epoch, len(o.Record), len(rec.GetRuntimeState()), rec.GetTombstone())
			} else {
				t.Logf("lost session %s in the store: %v", cs.ID(), err)
			}
			for _, n := range c.Nodes() {
				for _, l := range n.LogLines(cs.ID(), 25) {
					t.Logf("  %s: %s", n.ID, l)
				}
			}
		}
	}
	// (b) no reminder lost.
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := missingReminders(t, st, reminders)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			violations = append(violations, fmt.Sprintf("%d reminders never fired: %v", len(missing), missing[:min(5, len(missing))]))
			break
		}
		time.Sleep(500 * time.Millisecond) // poll the store
	}
	// (a) one decision per execution, visible to every later request:
	// hand-written and porcupine, over the same histories.
	byExec := map[string][]chaos.DecisionOp{}
	for _, op := range rec.decisions {
		byExec[op.Execution] = append(byExec[op.Execution], op)
	}
	for id, ops := range byExec {
		violations = append(violations, chaos.Decisions(id, ops)...)
	}
	// 60 s an execution: porcupine's search over ~20 decisions, many of
	// unknown outcome (open to the end of the history), gave up at 10 s in
	// runs beside other work (load 26-37); a real violation is Illegal,
	// not slow, and the hand-written check above reads the same history.
	violations = append(violations, chaos.LinearizableDecisions(rec.decisions, 60*time.Second)...)
	// (b) every accept that won was applied exactly once, every decline
	// that won never; no execution ran its write twice.
	winners := map[string]string{}
	for id, ops := range byExec {
		if w, ok := chaos.Winner(ops); ok {
			winners[id] = w
		}
	}
	violations = append(violations, ap.check(t, todos, st, winners)...)
	ap.postMortem(t, c, st, byExec)
	// (c) liveness; (d) growth.
	violations = append(violations, chaos.Liveness(rec.outcomes, 10*time.Second)...)
	violations = append(violations, chaos.Growth("goroutines (3 nodes)", goroutines, 1.5, 300)...)
	violations = append(violations, chaos.Growth("resident memory (3 nodes)", rss, 1.5, 64<<20)...)
	// (f) recovery, per round: the service gap within the bound derived
	// from the TTL or the store's restart and within the baseline, the
	// error budget, progress in every worker kind after the fault.
	var figures []string
	for _, r := range rounds {
		rep, v := chaos.CheckRound(r, rec.outcomes, timing, baseline)
		violations = append(violations, v...)
		t.Logf("round %d (%s %s): longest stretch without a successful tools/call %s (bound %s = %s; baseline limit %s); "+
			"%d failed of %d requests (budget %d); outage %s; after the fault: %v",
			r.N, r.Fault, r.Node, rep.Gap.Round(time.Millisecond), rep.GapBound.Round(time.Millisecond), rep.Derivation, rep.GapLimit.Round(time.Millisecond),
			rep.Errors, rep.Requests, rep.Budget, r.Outage.Round(time.Millisecond), rep.Progress)
		figures = append(figures, fmt.Sprintf("%s %s %d", r.Fault, rep.Gap.Round(10*time.Millisecond), rep.Errors))
	}
	t.Logf("figures (fault, longest gap, errors; testdata/baseline.txt keeps the worst of recorded runs): %s", strings.Join(figures, "; "))

	var retried, failed int
	kinds := map[string]int{} // errors by kind of request and message start
	for _, o := range rec.outcomes {
		if !o.OK {
			if o.Retryable {
				retried++
			} else {
				failed++
			}
			kinds[o.Kind+": "+o.Err[:min(len(o.Err), 90)]]++
		}
	}
	type kindCount struct {
		kind string
		n    int
	}
	var top []kindCount
	for k, n := range kinds {
		top = append(top, kindCount{k, n})
	}
	slices.SortFunc(top, func(a, b kindCount) int { return b.n - a.n })
	for _, k := range top[:min(8, len(top))] {
		t.Logf("errors: %6d × %s", k.n, k.kind)
	}
	synthetic.Range(func(k, v any) bool {
		t.Logf("balancer answered itself: %6d × %s", v.(*atomic.Int64).Load(), k)
		return true
	})
	won := map[string]int{}
	for _, w := range winners {
		won[w]++
	}
	slPaused, slDecided := ap.sessionlessCounts(winners)
	t.Logf("approvals: %d executions paused, %d decided with a known winner %v (sessionless: %d paused, %d decided); %d decision requests checked",
		len(ap.ids), len(winners), won, slPaused, slDecided, len(rec.decisions))
	t.Logf("chaos: %d rounds (%v), %d sessions, %d tools/call ok, %d probe writes acknowledged over %d identities, %d reminders; "+
		"%d retryable errors, %d other errors; goroutines %v; rss MiB %v; violations %d",
		len(rounds), cfg.faults, len(sessions), calls.Load(), probeAcks.Load(), len(ids), len(reminders),
		retried, failed, goroutines, mib(rss), len(violations))
	for i, v := range violations {
		if i == 20 {
			t.Errorf("... and %d more", len(violations)-20)
			break
		}
		t.Error(v)
	}
}

func mib(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x / (1 << 20))
	}
	return out
}

// missingReminders lists the reminders (grain/name) no probe recorded.
func missingReminders(t *testing.T, st store.Store, want map[string]int64) []string {
	t.Helper()
	fired := map[string]bool{}
	seen := map[string]bool{}
	for key := range want {
		grain := key[:strings.LastIndex(key, "/")]
		if seen[grain] {
			continue
		}
		seen[grain] = true
		o, err := st.Load(context.Background(), "probe/"+grain)
		if err != nil {
			continue
		}
		var rec pb.ProbeRecord
		if err := proto.Unmarshal(o.Record, &rec); err != nil {
			t.Fatal(err)
		}
		for _, f := range rec.GetFires() {
			fired[grain+"/"+f.GetName()] = true
		}
	}
	var missing []string
	for key := range want {
		if !fired[key] {
			missing = append(missing, key)
		}
	}
	slices.Sort(missing)
	return missing
}

// bearer adds the test cluster's token to requests through the balancer.
type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+testcluster.Token)
	return b.rt.RoundTrip(r)
}

// restartPostgres restarts the local Postgres cluster that serves dsn
// (Debian's pg_ctlcluster, as .ci/run starts it; pg_lsclusters finds the
// cluster listening on the DSN's port). It disturbs every client of that
// server, so the harness runs only when nothing else uses it (its own CI
// step; on a shared machine, point MCPGRAIN_TEST_POSTGRES_URL at a
// cluster of its own: docs/reliability.md).
func restartPostgres(t *testing.T, dsn string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("postgres fault: parse the store DSN: %v", err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	out, err := exec.Command("pg_lsclusters", "--no-header").CombinedOutput()
	if err != nil {
		t.Fatalf("postgres fault: pg_lsclusters (Debian's postgresql-common): %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // version cluster port status owner data log
		if len(f) < 3 || f[2] != port {
			continue
		}
		out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", f[0], f[1], "restart").CombinedOutput()
		if err != nil {
			t.Fatalf("pg_ctlcluster %s %s restart: %v: %s", f[0], f[1], err, out)
		}
		return
	}
	t.Fatalf("postgres fault: no local cluster listens on port %s (pg_lsclusters: %s)", port, out)
}

// approvals pauses executions and has them decided by racing approvers.
type approvals struct {
	mu          sync.Mutex
	ids         map[string]string // execution id of each title's pause
	titles      map[string]string // title of each execution id
	sessionless map[string]bool   // execution ids paused by the sessionless worker
	seq         atomic.Int64
	missed      []string // titles whose decision got 404
	// connected is set once the sessionless worker has its client;
	// lastConnErr is its last failure to connect.
	connected   atomic.Bool
	lastConnErr atomic.Value
}

// paused records a pause the check will hold to its decision.
func (a *approvals) paused(title, id string, sessionless bool) {
	a.mu.Lock()
	a.ids[title], a.titles[id] = id, title
	if sessionless {
		a.sessionless[id] = true
	}
	a.mu.Unlock()
}

// connectErr describes the sessionless worker's connection, for a report.
func (a *approvals) connectErr() string {
	if a.connected.Load() {
		return "the sessionless worker is connected"
	}
	return fmt.Sprintf("the sessionless worker never connected: %v", a.lastConnErr.Load())
}

// sessionlessCounts returns how many sessionless executions paused and how
// many of them were decided (a known winner).
func (a *approvals) sessionlessCounts(winners map[string]string) (paused, decided int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.sessionless {
		paused++
		if winners[id] != "" {
			decided++
		}
	}
	return paused, decided
}

// postMortem logs what the store and the node logs say about executions
// whose decision got 404 (their pause was not found).
func (a *approvals) postMortem(t *testing.T, c *testcluster.Cluster, st store.Store, ops map[string][]chaos.DecisionOp) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, title := range a.missed {
		t.Logf("decide %s got 404: %s", title, a.trace(st, title))
		id := a.ids[title]
		h := slices.Clone(ops[id])
		slices.SortFunc(h, func(a, b chaos.DecisionOp) int { return a.Call.Compare(b.Call) })
		for _, op := range h {
			t.Logf("  %s: %s %s → result %d %s, answered %s", id, op.Call.Format("15:04:05.000"), op.Action, op.Result, op.Saw, op.Return.Format("15:04:05.000"))
		}
		sess := ""
		if row, err := directory.New(st).GetExecution(context.Background(), id); err == nil {
			sess = row.Session
		}
		for _, n := range c.Nodes() {
			for _, l := range n.LogLines(id, 10) {
				t.Logf("  %s: %s", n.ID, l)
			}
			if sess == "" {
				continue
			}
			for _, l := range n.LogLines(sess, 30) {
				if !strings.Contains(l, id) && !strings.Contains(l, "level=DEBUG") {
					t.Logf("  %s: %s", n.ID, l)
				}
			}
		}
	}
}

// race runs decide with accept and decline at once (two approvers: the
// balancer sends them to different gateways), then once more with cancel
// (a later reader: whatever was decided must be visible to it).
func race(decide func(action string)) {
	var wg sync.WaitGroup
	for _, action := range []string{"accept", "decline"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decide(action)
		}()
	}
	wg.Wait()
	decide("cancel")
}

func (a *approvals) run(ctx context.Context, rec *recorder, lb http.RoundTripper, sessions []*mcp.ClientSession, w int) {
	api := &http.Client{Transport: bearer{lb}}
	for ctx.Err() == nil {
		cs := sessions[rand.IntN(len(sessions))]
		title := fmt.Sprintf("chaos-w%d-%d", w, a.seq.Add(1))
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{
			"code": fmt.Sprintf(`return await tools.todo.createTodo({title: %q})`, title)}})
		cancel()
		if ctx.Err() != nil {
			return
		}
		o := chaos.Outcome{What: "execute " + title + " on " + cs.ID(), Kind: chaos.KindExecute, Took: time.Since(began), OK: err == nil}
		if err != nil {
			o.Err, o.Retryable = err.Error(), retryable(err)
			rec.outcome(o)
			continue
		}
		sc := mcpclient.Structured(res)
		id, _ := sc["executionId"].(string)
		if sc["status"] != "waiting_for_interaction" || id == "" {
			text := mcpclient.Text(res)
			o.OK, o.Err, o.Retryable = false, "did not pause: "+text, busy(res)
			rec.outcome(o)
			continue
		}
		rec.outcome(o)
		a.paused(title, id, false)
		race(func(action string) { a.decide(ctx, rec, api, title, id, action) })
	}
}

// decide sends action on execution id through the balancer's approval API
// until it gets a definite answer (200 decided, 409 already decided, or a
// refusal), retrying what the API says to retry. Every attempt is an
// outcome and, unless refused (404, 4xx), a decision operation: 200 won,
// 409 already decided, no answer or 5xx unknown (the API says a decision
// may have been recorded). Whether a 409 was owed is the decision
// checkers' verdict (chaos.Decisions, chaos.LinearizableDecisions): a 409
// that no attempt of either approver could have caused is a violation.
func (a *approvals) decide(ctx context.Context, rec *recorder, api *http.Client, title, id, action string) {
	for attempt := 0; attempt < 40 && ctx.Err() == nil; attempt++ {
		began := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://gateway/api/executions/"+id+"/resume", strings.NewReader(fmt.Sprintf(`{"action":%q}`, action)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := api.Do(req)
		status := 0
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		ret := time.Now()
		op := chaos.DecisionOp{Execution: id, Call: began, Return: ret, Action: action}
		switch {
		case status == http.StatusOK:
			op.Result = chaos.DecisionWon
		case status == http.StatusConflict:
			op.Result = chaos.DecisionAlready
		case status == 0 || status >= 500:
			op.Result = chaos.DecisionUnknown
		}
		if status == 0 || status >= 500 || status == http.StatusOK || status == http.StatusConflict {
			rec.decision(op)
		}
		if ctx.Err() != nil {
			return // cut by the end of the run: an unknown outcome, recorded above
		}
		o := chaos.Outcome{What: "decide " + action + " " + title, Kind: chaos.KindApproval, Took: ret.Sub(began), At: ret,
			OK: status == http.StatusOK || status == http.StatusConflict, Retryable: status == 0 || status >= 500 || status == http.StatusTooManyRequests}
		if !o.OK {
			o.Err = fmt.Sprintf("status %d %v", status, err)
		}
		rec.outcome(o)
		if status == http.StatusNotFound {
			a.mu.Lock()
			a.missed = append(a.missed, title)
			a.mu.Unlock()
		}
		if !o.Retryable {
			return
		}
		time.Sleep(100 * time.Millisecond) // retry backoff
	}
}

// runSessionless pauses executions as a 2026-07-28 client (no session:
// the pause is an input_required result whose sealed requestState names
// the continuation grain that holds it) and has each decided in-band by
// two racing retries (accept, decline) through the balancer, then by a
// later one (cancel). Every retry must answer with the settled execution's
// outcome, showing the one decision recorded, even if the grain's node
// died, stopped or froze meanwhile (the pause is durable and restored on
// demand); a miss or any other non-retryable answer is a liveness
// violation.
func (a *approvals) runSessionless(ctx context.Context, t *testing.T, rec *recorder, lb http.RoundTripper) {
	key, err := hex.DecodeString(testcluster.StateKey)
	if err != nil {
		t.Error(err)
		return
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-sessionless"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	var cs *mcp.ClientSession
	for cs == nil && ctx.Err() == nil {
		began := time.Now()
		cs, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://gateway/mcp", HTTPClient: &http.Client{Transport: bearer{lb}}}, nil)
		if err != nil && ctx.Err() == nil {
			a.lastConnErr.Store(err)
			rec.outcome(chaos.Outcome{What: "sessionless connect", Kind: "sessionless connect", Took: time.Since(began), Err: err.Error(), Retryable: retryable(err)})
			time.Sleep(200 * time.Millisecond) // retry backoff
		}
	}
	if cs == nil {
		// Never connected: no sessionless approval was tried. A violation,
		// not a silent return (the progress checks also report it).
		rec.outcome(chaos.Outcome{What: "sessionless connect", Kind: "sessionless connect", Err: a.connectErr()})
		return
	}
	a.connected.Store(true)
	defer cs.Close()
	for ctx.Err() == nil {
		title := fmt.Sprintf("chaos-sl-%d", a.seq.Add(1))
		args := map[string]any{"code": fmt.Sprintf(`return await tools.todo.createTodo({title: %q})`, title)}
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		first, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute", Arguments: args})
		cancel()
		if ctx.Err() != nil {
			return
		}
		o := chaos.Outcome{What: "sessionless execute " + title, Kind: chaos.KindExecute, Took: time.Since(began), OK: err == nil}
		if err != nil {
			o.Err, o.Retryable = err.Error(), retryable(err)
			rec.outcome(o)
			continue
		}
		claims, err := requeststate.Verify(key, first.RequestState, time.Now())
		if !first.NeedsInput() || err != nil {
			text := mcpclient.Text(first)
			o.OK, o.Err, o.Retryable = false, fmt.Sprintf("did not pause (%v): %s", err, text), busy(first)
			rec.outcome(o)
			continue
		}
		rec.outcome(o)
		id := claims.Inner // the execution id
		a.paused(title, id, true)
		race(func(action string) { a.decideInBand(ctx, rec, cs, title, id, args, first.RequestState, action) })
	}
}

// decideInBand retries the paused call with action until it gets an
// answer: the settled execution's outcome, which shows the decision
// recorded (completed or interrupted: accept; "was declined": decline;
// "was cancelled": cancel). Retrying is safe: a retry after the one that
// resumed the execution replays its settled outcome.
func (a *approvals) decideInBand(ctx context.Context, rec *recorder, cs *mcp.ClientSession, title, id string, args map[string]any, state, action string) {
	retry := &mcp.CallToolParams{Name: "execute", Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: action, Content: map[string]any{}}}}
	for attempt := 0; attempt < 40 && ctx.Err() == nil; attempt++ {
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		res, err := cs.CallTool(cctx, retry)
		cancel()
		ret := time.Now()
		op := chaos.DecisionOp{Execution: id, Call: began, Return: ret, Action: action}
		if ctx.Err() != nil {
			rec.decision(op) // cut by the end of the run: unknown
			return
		}
		o := chaos.Outcome{What: "sessionless " + action + " " + title, Kind: chaos.KindSessionless, Took: ret.Sub(began), At: ret, OK: err == nil}
		if err != nil {
			o.Err, o.Retryable = err.Error(), retryable(err)
			rec.outcome(o)
			if !o.Retryable {
				return
			}
			rec.decision(op)                   // a retryable error: unknown
			time.Sleep(100 * time.Millisecond) // retry backoff
			continue
		}
		sc, _ := res.StructuredContent.(map[string]any)
		text := mcpclient.Text(res)
		switch {
		case sc["status"] == "completed", strings.Contains(text, engine.KindInterrupted):
			// Interrupted: accepted, and its write was in flight when its
			// node died (the documented contract; the check verifies it).
			op.Result, op.Saw = chaos.DecisionSaw, "accept"
		case strings.Contains(text, "was declined"):
			op.Result, op.Saw = chaos.DecisionSaw, "decline"
		case strings.Contains(text, "was cancelled"):
			op.Result, op.Saw = chaos.DecisionSaw, "cancel"
		default:
			o.OK, o.Err = false, "the retry did not answer with the settled execution: "+text
		}
		if o.OK {
			rec.decision(op)
		}
		rec.outcome(o)
		return
	}
}

// trace describes what the store holds about title's execution, for the
// post-mortem of a violation.
func (a *approvals) trace(st store.Store, title string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := a.ids[title]
	var b strings.Builder
	fmt.Fprintf(&b, "execution %s", id)
	if row, err := directory.New(st).GetExecution(ctx, id); err == nil {
		fmt.Fprintf(&b, "; directory: session %s settled %v", row.Session, !row.Settled.IsZero())
		if own, err := st.Load(ctx, "session/"+row.Session); err == nil {
			var rec pb.SessionRecord
			_ = proto.Unmarshal(own.Record, &rec)
			fmt.Fprintf(&b, "; session grain: owner %q epoch %d, decision %v", own.Owner, own.Epoch, rec.GetDecisions()[id])
		}
	} else {
		fmt.Fprintf(&b, "; directory: %v", err)
	}
	runID, err := runstore.New(st).RunByPause(ctx, id)
	if err != nil {
		fmt.Fprintf(&b, "; run: %v", err)
		return b.String()
	}
	r, entries, err := runstore.New(st).GetRun(ctx, runID)
	if err != nil {
		fmt.Fprintf(&b, "; run %s: %v", runID, err)
		return b.String()
	}
	fmt.Fprintf(&b, "; run %s: settled %v outcome %q; journal:", runID, !r.Settled.IsZero(), r.Outcome)
	for _, e := range entries {
		fmt.Fprintf(&b, " #%d %s pause=%q %s", e.Seq, e.State, e.PauseID, e.Data)
	}
	return b.String()
}

// check counts the side effects against the decisions that won: an
// accept created its to-do exactly once (waiting for executions still
// being restored), a decline or cancel none; nothing created one twice.
func (a *approvals) check(t *testing.T, api *demo.API, st store.Store, winners map[string]string) []string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	count := func() map[string]int {
		n := map[string]int{}
		for _, td := range api.Todos() {
			n[td.Title]++
		}
		return n
	}
	// interrupted reports whether the execution of title ended with
	// execution_interrupted: its write was in flight when its node died
	// and, not being idempotent, was not sent again (the documented
	// contract; whether it reached the API is unknown to the execution).
	interrupted := func(title string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		runID, err := runstore.New(st).RunByPause(ctx, a.ids[title])
		if err != nil {
			return false
		}
		r, _, err := runstore.New(st).GetRun(ctx, runID)
		return err == nil && strings.Contains(r.Outcome, engine.KindInterrupted)
	}
	deadline := time.Now().Add(30 * time.Second)
	var out, cut []string
	for {
		n, missing := count(), 0
		out, cut = out[:0], cut[:0]
		for title, id := range a.ids {
			w := winners[id]
			switch {
			case n[title] > 1:
				out = append(out, fmt.Sprintf("%s: the approved write ran %d times", title, n[title]))
			case (w == "decline" || w == "cancel") && n[title] > 0:
				out = append(out, fmt.Sprintf("%s: %sd, but its write ran (%s)", title, w, a.trace(st, title)))
			case w == "accept" && n[title] == 0 && interrupted(title):
				cut = append(cut, title)
			case w == "accept" && n[title] == 0:
				missing++
				out = append(out, fmt.Sprintf("%s: the acknowledged accept was never applied (%s)", title, a.trace(st, title)))
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			if len(cut) > 0 {
				t.Logf("approvals: %d accepted executions ended execution_interrupted (their write was in flight when their node died; not repeated): %v", len(cut), cut)
			}
			return out
		}
		time.Sleep(500 * time.Millisecond) // poll the to-do API
	}
}
