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
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/engine"
	"github.com/mcpgrain/mcpgrain/actors/tools/demo"
	"github.com/mcpgrain/mcpgrain/cluster/store"
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
			if !slices.Contains([]string{"kill", "stop", "freeze", "consul", "postgres"}, f) {
				t.Fatalf("MCPGRAIN_CHAOS_FAULTS: unknown fault %q (want kill, stop, freeze, consul, postgres)", f)
			}
		}
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
}

func (r *recorder) outcome(o chaos.Outcome) {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	r.mu.Lock()
	r.outcomes = append(r.outcomes, o)
	r.mu.Unlock()
}

// retryable reports whether a client error is one a client is told to
// retry: the 503 restart envelope, 429, or an unavailable upstream.
func retryable(err error) bool {
	s := err.Error()
	for _, m := range []string{"502", "503", "429", "restarting", "Too many requests", "Service Unavailable", "Bad Gateway", "retry"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// TestChaos runs the chaos harness: a real Consul agent, Postgres and
// three node processes; MCP sessions doing tools/call through a health-
// checked balancer; fenced probe counters written through random nodes;
// reminders due across the run. Each round injects one fault (kill -9 and
// restart, graceful stop and restart, SIGSTOP/SIGCONT, Consul agent
// restart), then the checkers run: single owner, nothing lost, liveness,
// bounded growth. MCPGRAIN_CHAOS=1 enables it (CI runs a short round);
// MCPGRAIN_CHAOS_ROUNDS, _INTERVAL, _FAULTS and _SESSIONS tune it.
func TestChaos(t *testing.T) {
	if os.Getenv("MCPGRAIN_CHAOS") != "1" {
		t.Skip("chaos harness: set MCPGRAIN_CHAOS=1 (CI runs it as its own step)")
	}
	cfg := loadSettings(t)
	todos, todoFlag := testcluster.TodoAPI(t)
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--reminder-poll", "250ms", "--rate-limit", "0", "--openapi", todoFlag}})
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
	rec := &recorder{acks: map[string][]chaos.Ack{}, unknown: map[string]int{}}

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
	runFor := time.Duration(cfg.rounds)*cfg.interval + 5*time.Second
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

	// Load: session callers and probe writers until stop.
	var wg sync.WaitGroup
	// Approvals: executions that pause (a write), decided through the
	// balancer's approval API while the faults happen.
	ap := &approvals{acked: map[string]bool{}, tried: map[string]bool{}, ids: map[string]string{}}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ap.run(ctx, t, rec, lb, sessions[w*len(sessions)/2:w*len(sessions)/2+min(5, len(sessions)/2)], w)
		}()
	}
	// Sessionless (2026-07-28) approvals: the pause is an input_required
	// result, the decision comes in-band with the retry, which must
	// complete the execution wherever its continuation grain lives now.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ap.runSessionless(ctx, t, rec, lb)
	}()
	var calls, probeAcks atomic.Int64
	var (
		okMu    sync.Mutex
		okTimes []time.Time // when each tools/call succeeded
	)
	// longestGap is the longest time in [from, to] without a successful
	// tools/call: how long the fault stopped the service.
	longestGap := func(from, to time.Time) time.Duration {
		okMu.Lock()
		defer okMu.Unlock()
		prev, gap := from, time.Duration(0)
		for _, at := range okTimes {
			if at.Before(from) || at.After(to) {
				continue
			}
			gap = max(gap, at.Sub(prev))
			prev = at
		}
		return max(gap, to.Sub(prev))
	}
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
				o := chaos.Outcome{What: "tools/call " + cs.ID(), Took: time.Since(began), OK: err == nil}
				if err != nil {
					o.Err, o.Retryable = err.Error(), retryable(err)
				} else {
					calls.Add(1)
					okMu.Lock()
					okTimes = append(okTimes, time.Now())
					okMu.Unlock()
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
					time.Sleep(10 * time.Millisecond)
					continue
				}
				began := time.Now()
				hctx, hcancel := lb.whileHealthy(ctx, n.Index)
				pctx, cancel := context.WithTimeout(hctx, 15*time.Second)
				r, err := n.Probe(pctx, id, 1)
				cancel()
				hcancel()
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
					rec.mu.Unlock()
					return
				}
				o := chaos.Outcome{What: "probe " + id + " via " + n.ID, Took: time.Since(began), OK: err == nil}
				rec.mu.Lock()
				switch {
				case err == nil:
					rec.acks[id] = append(rec.acks[id], chaos.Ack{Count: r.Count, Epoch: r.Epoch, Node: r.Node})
					probeAcks.Add(1)
				case r.Status == http.StatusGatewayTimeout || r.Status == 0:
					rec.unknown[id]++ // may or may not have been applied
					o.Err, o.Retryable = err.Error(), true
				default:
					o.Err, o.Retryable = err.Error(), r.Retryable
				}
				rec.mu.Unlock()
				rec.outcome(o)
			}
		}()
	}

	// Rounds.
	type roundReport struct {
		fault    string
		node     string
		recovery time.Duration
		began    time.Time
	}
	var rounds []roundReport
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
	time.Sleep(2 * time.Second) // load settles before the first fault
	for round := range cfg.rounds {
		fault := cfg.faults[round%len(cfg.faults)]
		victim := rand.IntN(3)
		began := time.Now()
		before := calls.Load()
		switch fault {
		case "kill":
			c.Kill(victim)
			time.Sleep(time.Second)
			c.Restart(victim)
		case "stop":
			c.Stop(victim)
			c.Restart(victim)
		case "freeze":
			c.Freeze(victim)
			time.Sleep(cfg.freeze)
			c.Thaw(victim)
		case "consul":
			c.Consul.Restart(t)
		case "postgres":
			restartPostgres(t)
		}
		c.WaitMembers(3, 60*time.Second)
		// Recovery: the cluster serves again at its pre-fault rate.
		for calls.Load() < before+50 && time.Since(began) < 60*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		if rest := cfg.interval - time.Since(began); rest > 0 {
			time.Sleep(rest)
		}
		rounds = append(rounds, roundReport{fault: fault, node: c.Node(victim).ID, recovery: longestGap(began, time.Now()), began: began})
		sample()
		t.Logf("round %d: %s %s, longest stretch without a successful call %s; %d calls, %d probe writes acknowledged so far",
			round+1, fault, c.Node(victim).ID, rounds[len(rounds)-1].recovery.Round(time.Millisecond), calls.Load(), probeAcks.Load())
	}
	stop()
	wg.Wait()

	// Checkers.
	var violations []string
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
		for attempt := 0; ; attempt++ {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			final, err = c.Node(attempt%3).Probe(fctx, id, 0)
			cancel()
			if err == nil || attempt > 20 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			violations = append(violations, fmt.Sprintf("%s: unreadable after chaos: %v", id, err))
			continue
		}
		rec.mu.Lock()
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
		time.Sleep(500 * time.Millisecond)
	}
	// (b) every acknowledged approval decision was applied exactly once;
	// no execution ran its write twice.
	violations = append(violations, ap.check(t, todos, st)...)
	ap.postMortem(t, c, st)
	// (c) liveness; (d) growth.
	violations = append(violations, chaos.Liveness(rec.outcomes, 10*time.Second)...)
	violations = append(violations, chaos.Growth("goroutines (3 nodes)", goroutines, 1.5, 300)...)
	violations = append(violations, chaos.Growth("resident memory (3 nodes)", rss, 1.5, 64<<20)...)

	var retried, failed int
	var recov []time.Duration
	kinds := map[string]int{} // errors by kind of request and message start
	for _, o := range rec.outcomes {
		if !o.OK {
			if o.Retryable {
				retried++
			} else {
				failed++
			}
			what, _, _ := strings.Cut(o.What, " ")
			if strings.HasPrefix(o.What, "sessionless ") {
				what = strings.Join(strings.Fields(o.What)[:2], " ")
			}
			kinds[what+": "+o.Err[:min(len(o.Err), 90)]]++
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
	for i, r := range rounds {
		end := time.Now()
		if i+1 < len(rounds) {
			end = rounds[i+1].began
		}
		n := 0
		for _, o := range rec.outcomes {
			if !o.OK && !o.At.Before(r.began) && o.At.Before(end) {
				n++
			}
		}
		t.Logf("round %d (%s %s): %d errors", i+1, r.fault, r.node, n)
	}
	for _, k := range top[:min(8, len(top))] {
		t.Logf("errors: %6d × %s", k.n, k.kind)
	}
	for _, r := range rounds {
		recov = append(recov, r.recovery)
	}
	slices.Sort(recov)
	t.Logf("approvals: %d executions paused, %d decisions acknowledged (of which sessionless: %d paused, %d completed by their retry)",
		len(ap.tried), len(ap.acked), ap.slPaused.Load(), ap.slDone.Load())
	t.Logf("chaos: %d rounds (%v), %d sessions, %d tools/call ok, %d probe writes acknowledged over %d identities, %d reminders; "+
		"%d retryable errors, %d other errors; longest service gap %s; goroutines %v; rss MiB %v; violations %d",
		len(rounds), cfg.faults, len(sessions), calls.Load(), probeAcks.Load(), len(ids), len(reminders),
		retried, failed, recov[len(recov)-1].Round(time.Millisecond), goroutines, mib(rss), len(violations))
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

// restartPostgres restarts the local Postgres cluster (Debian's
// pg_ctlcluster, as .ci/run starts it). It disturbs every client of the
// server, so the harness runs only when nothing else does (its own CI step).
func restartPostgres(t *testing.T) {
	t.Helper()
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) == 0 {
		t.Fatalf("postgres fault: no /etc/postgresql/<version> (pg_ctlcluster): %v", err)
	}
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", versions[0].Name(), "main", "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctlcluster restart: %v: %s", err, out)
	}
}

// approvals pauses executions and decides them through the balancer.
type approvals struct {
	mu    sync.Mutex
	ids   map[string]string // execution id of each title's pause
	seq   atomic.Int64
	acked map[string]bool // titles whose accept was acknowledged
	tried map[string]bool // titles of every paused execution
	// sessionless executions paused, and completed by their approving retry
	slPaused, slDone atomic.Int64
	missed           []string // titles whose decision got 404
}

// postMortem logs what the store and the node logs say about executions
// whose decision got 404 (their pause was not found).
func (a *approvals) postMortem(t *testing.T, c *testcluster.Cluster, st store.Store) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, title := range a.missed {
		t.Logf("decide %s got 404: %s", title, a.trace(st, title))
		id := a.ids[title]
		sess := ""
		if row, err := st.GetExecution(context.Background(), id); err == nil {
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

func (a *approvals) run(ctx context.Context, t *testing.T, rec *recorder, lb http.RoundTripper, sessions []*mcp.ClientSession, w int) {
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
		o := chaos.Outcome{What: "execute " + title + " on " + cs.ID(), Took: time.Since(began), OK: err == nil}
		if err != nil {
			o.Err, o.Retryable = err.Error(), retryable(err)
			rec.outcome(o)
			continue
		}
		rec.outcome(o)
		sc := mcpclient.Structured(res)
		id, _ := sc["executionId"].(string)
		if sc["status"] != "waiting_for_interaction" || id == "" {
			rec.outcome(chaos.Outcome{What: "execute " + title + " on " + cs.ID(), Err: "did not pause: " + mcpclient.Text(res)})
			continue
		}
		a.mu.Lock()
		a.tried[title] = true
		a.ids[title] = id
		a.mu.Unlock()
		// Decide; retry what the API says to retry. A 409 after an attempt
		// whose answer was lost means that attempt recorded the decision.
		ambiguous := false
		for attempt := 0; attempt < 40 && ctx.Err() == nil; attempt++ {
			began := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://gateway/api/executions/"+id+"/resume", strings.NewReader(`{"action":"accept"}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := api.Do(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			if ctx.Err() != nil {
				break
			}
			o := chaos.Outcome{What: "decide " + title, Took: time.Since(began), OK: status == 200, Retryable: status == 0 || status >= 500 || status == 429}
			if !o.OK {
				o.Err = fmt.Sprintf("status %d %v", status, err)
			}
			if status == 409 {
				o.OK = true // already decided: by our own earlier attempt, or (if none was ambiguous) a violation below
			}
			rec.outcome(o)
			if status == 200 || (status == 409 && ambiguous) {
				a.mu.Lock()
				a.acked[title] = true
				a.mu.Unlock()
				break
			}
			if status == 404 {
				a.mu.Lock()
				a.missed = append(a.missed, title)
				a.mu.Unlock()
				break
			}
			if status == 409 {
				break
			}
			ambiguous = ambiguous || status == 0 || status >= 500
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// runSessionless pauses executions as a 2026-07-28 client (no session:
// the pause is an input_required result whose signed requestState names
// the continuation grain that holds it) and approves each in-band, by
// retrying with the decision through the balancer. The retry must complete
// the execution even if the grain's node died, stopped or froze meanwhile
// (the pause is durable and restored on demand); a miss or any other
// non-retryable answer is a liveness violation.
func (a *approvals) runSessionless(ctx context.Context, t *testing.T, rec *recorder, lb http.RoundTripper) {
	key, err := hex.DecodeString(testcluster.StateKey)
	if err != nil {
		t.Error(err)
		return
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-sessionless"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	var cs *mcp.ClientSession
	for cs == nil && ctx.Err() == nil {
		cs, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://gateway/mcp", HTTPClient: &http.Client{Transport: bearer{lb}}}, nil)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if cs == nil {
		return
	}
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
		o := chaos.Outcome{What: "sessionless execute " + title, Took: time.Since(began), OK: err == nil}
		if err != nil {
			o.Err, o.Retryable = err.Error(), retryable(err)
			rec.outcome(o)
			continue
		}
		rec.outcome(o)
		claims, err := requeststate.Verify(key, first.RequestState, time.Now())
		if !first.NeedsInput() || err != nil {
			rec.outcome(chaos.Outcome{What: "sessionless execute " + title, Err: fmt.Sprintf("did not pause (%v): %s", err, mcpclient.Text(first))})
			continue
		}
		a.slPaused.Add(1)
		a.mu.Lock()
		a.tried[title] = true
		a.ids[title] = claims.Inner // the execution id
		a.mu.Unlock()
		retry := &mcp.CallToolParams{Name: "execute", Arguments: args, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}}}
		for attempt := 0; attempt < 40 && ctx.Err() == nil; attempt++ {
			began := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			res, err := cs.CallTool(cctx, retry)
			cancel()
			if ctx.Err() != nil {
				break
			}
			o := chaos.Outcome{What: "sessionless approve " + title, Took: time.Since(began), OK: err == nil}
			if err != nil {
				// Retrying is safe: a retry after one that resumed the
				// execution replays its settled outcome.
				o.Err, o.Retryable = err.Error(), retryable(err)
				rec.outcome(o)
				if !o.Retryable {
					break
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			sc, _ := res.StructuredContent.(map[string]any)
			text := mcpclient.Text(res)
			switch {
			case sc["status"] == "completed":
				a.slDone.Add(1)
				a.mu.Lock()
				a.acked[title] = true
				a.mu.Unlock()
			case strings.Contains(text, engine.KindInterrupted):
				// Its write was in flight when its node died: the
				// documented contract (the checker verifies the run).
			default:
				o.OK, o.Err = false, "the approving retry did not complete the execution: "+text
			}
			rec.outcome(o)
			break
		}
	}
}

// check counts the side effects: an acknowledged accept created its to-do
// exactly once (waiting for executions still being restored); nothing
// created one twice.
// trace describes what the store holds about title's execution, for the
// post-mortem of a violation.
func (a *approvals) trace(st store.Store, title string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := a.ids[title]
	var b strings.Builder
	fmt.Fprintf(&b, "execution %s", id)
	if row, err := st.GetExecution(ctx, id); err == nil {
		fmt.Fprintf(&b, "; directory: session %s settled %v", row.Session, !row.Settled.IsZero())
		if own, err := st.Load(ctx, "session/"+row.Session); err == nil {
			var rec pb.SessionRecord
			_ = proto.Unmarshal(own.Record, &rec)
			fmt.Fprintf(&b, "; session grain: owner %q epoch %d, decision %v", own.Owner, own.Epoch, rec.GetDecisions()[id])
		}
	} else {
		fmt.Fprintf(&b, "; directory: %v", err)
	}
	runID, err := st.RunByPause(ctx, id)
	if err != nil {
		fmt.Fprintf(&b, "; run: %v", err)
		return b.String()
	}
	r, entries, err := st.GetRun(ctx, runID)
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

func (a *approvals) check(t *testing.T, api *demo.API, st store.Store) []string {
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
		runID, err := st.RunByPause(ctx, a.ids[title])
		if err != nil {
			return false
		}
		r, _, err := st.GetRun(ctx, runID)
		return err == nil && strings.Contains(r.Outcome, engine.KindInterrupted)
	}
	deadline := time.Now().Add(30 * time.Second)
	var out, cut []string
	for {
		n, missing := count(), 0
		out, cut = out[:0], cut[:0]
		for title := range a.tried {
			switch {
			case n[title] > 1:
				out = append(out, fmt.Sprintf("%s: the approved write ran %d times", title, n[title]))
			case a.acked[title] && n[title] == 0 && interrupted(title):
				cut = append(cut, title)
			case a.acked[title] && n[title] == 0:
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
		time.Sleep(500 * time.Millisecond)
	}
}
