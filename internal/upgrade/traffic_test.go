package upgrade_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Kinds of request the recorder counts.
const (
	kindCall    = "tools/call echo"
	kindExecute = "execute (pause)"
	kindDecide  = "decide"
	kindTask    = "task create/get"
)

// outcome is one request's result as its client saw it.
type outcome struct {
	at   time.Time
	kind string
	ok   bool
	err  string
}

// recorder collects outcomes; progress is closed and replaced at every
// success, for waitCalls.
type recorder struct {
	mu       sync.Mutex
	outcomes []outcome
	okCalls  int
	progress chan struct{}
}

func newRecorder() *recorder { return &recorder{progress: make(chan struct{})} }

func (r *recorder) add(kind string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := outcome{at: time.Now(), kind: kind, ok: err == nil}
	if err != nil {
		o.err = err.Error()
	}
	r.outcomes = append(r.outcomes, o)
	if o.ok && kind == kindCall {
		r.okCalls++
		close(r.progress)
		r.progress = make(chan struct{})
	}
}

// waitCalls waits until n more echo calls than now succeeded, or until
// deadline; it reports whether they did.
func (r *recorder) waitCalls(n int, deadline time.Time) bool {
	r.mu.Lock()
	want := r.okCalls + n
	r.mu.Unlock()
	for {
		r.mu.Lock()
		got, ch := r.okCalls, r.progress
		r.mu.Unlock()
		if got >= want {
			return true
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			return false
		}
	}
}

// window summarises the outcomes between from and to: per kind, how many
// requests and how many failed, and a few of the errors.
func (r *recorder) window(from, to time.Time) (total, failed int, lines []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	type count struct{ n, failed int }
	by := map[string]*count{}
	errs := map[string]int{}
	for _, o := range r.outcomes {
		if o.at.Before(from) || o.at.After(to) {
			continue
		}
		c := by[o.kind]
		if c == nil {
			c = &count{}
			by[o.kind] = c
		}
		c.n++
		total++
		if !o.ok {
			c.failed++
			failed++
			errs[o.kind+": "+trim(o.err, 160)]++
		}
	}
	for _, k := range slices.Sorted(mapsKeys(by)) {
		lines = append(lines, fmt.Sprintf("%s: %d requests, %d failed (%.2f%%)", k, by[k].n, by[k].failed, pct(by[k].failed, by[k].n)))
	}
	for _, e := range slices.Sorted(mapsKeys(errs)) {
		lines = append(lines, fmt.Sprintf("  %d× %s", errs[e], e))
	}
	return total, failed, lines
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// session is one client session the callers share; closed is set when
// the client gave it up (go-sdk closes a session on some errors).
type session struct {
	cs     *mcp.ClientSession
	closed atomic.Bool
}

// openSessions opens n stateful (2025-11-25) sessions through lb.
func openSessions(ctx context.Context, lb http.RoundTripper, n int) ([]*session, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "upgrade", Version: "1"}, nil)
	var out []*session
	for i := range n {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: "http://gateway/mcp", HTTPClient: &http.Client{Transport: lb}, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			return nil, fmt.Errorf("open session %d: %w", i, err)
		}
		out = append(out, &session{cs: cs})
	}
	return out, nil
}

// echo calls the echo tool on s once.
func echo(ctx context.Context, s *session, text string) error {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if errors.Is(err, mcp.ErrConnectionClosed) {
		s.closed.Store(true)
	}
	if err == nil && res.IsError {
		err = fmt.Errorf("echo: tool error %s", mcpclient.Text(res))
	}
	if err == nil && !strings.Contains(mcpclient.Text(res), text) {
		err = fmt.Errorf("echo %q answered %q", text, mcpclient.Text(res))
	}
	return err
}

// callers call echo on random open sessions until ctx is done.
func callers(ctx context.Context, wg *sync.WaitGroup, rec *recorder, sessions []*session, n int) {
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				s := sessions[rand.IntN(len(sessions))]
				if s.closed.Load() {
					time.Sleep(10 * time.Millisecond) // another session soon
					continue
				}
				err := echo(ctx, s, fmt.Sprintf("w%d-%d", w, i))
				if ctx.Err() != nil {
					return
				}
				rec.add(kindCall, err)
			}
		}()
	}
}

// pause runs an execution on s that pauses for approval (a to-do write)
// and returns its execution id.
func pause(ctx context.Context, s *session, title string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{
		"code": fmt.Sprintf(`return await tools.todo.createTodo({title: %q})`, title)}})
	if err != nil {
		return "", fmt.Errorf("execute %s: %w", title, err)
	}
	sc := mcpclient.Structured(res)
	id, _ := sc["executionId"].(string)
	if sc["status"] != "waiting_for_interaction" || id == "" {
		return "", fmt.Errorf("execute %s did not pause: %.200s", title, mcpclient.Text(res))
	}
	return id, nil
}

// decide accepts execution id over the approval API through lb, retrying
// what the API says to retry (no answer, 5xx, 429); a 409 after an
// attempt of unknown outcome is that attempt's decision. It returns the
// final status.
func decide(ctx context.Context, rec *recorder, lb http.RoundTripper, id string) (int, error) {
	api := &http.Client{Transport: lb, Timeout: 20 * time.Second}
	unknown := false
	for attempt := 0; attempt < 60 && ctx.Err() == nil; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://gateway/api/executions/"+id+"/resume", strings.NewReader(`{"action":"accept"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := api.Do(req)
		status := 0
		var body []byte
		if err == nil {
			status = resp.StatusCode
			body, _ = io.ReadAll(io.LimitReader(resp.Body, 2048))
			resp.Body.Close()
		}
		switch {
		case status == http.StatusOK || (status == http.StatusConflict && unknown):
			rec.add(kindDecide, nil)
			return status, nil
		case status == 0 || status >= 500 || status == http.StatusTooManyRequests:
			unknown = true
			rec.add(kindDecide, fmt.Errorf("accept %s: status %d %v %.120s", id, status, err, body))
			time.Sleep(200 * time.Millisecond) // retry backoff
		default:
			err := fmt.Errorf("accept %s: status %d: %.200s", id, status, body)
			rec.add(kindDecide, err)
			return status, err
		}
	}
	return 0, fmt.Errorf("accept %s: no definite answer in 60 attempts", id)
}

// approvers pause executions on open sessions and accept them at once,
// until ctx is done; every accepted title goes to accepted.
func approvers(ctx context.Context, wg *sync.WaitGroup, rec *recorder, lb http.RoundTripper, sessions []*session, accepted chan<- string) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			s := sessions[rand.IntN(len(sessions))]
			if s.closed.Load() {
				time.Sleep(10 * time.Millisecond) // another session soon
				continue
			}
			title := fmt.Sprintf("roll-%d", i)
			id, err := pause(ctx, s, title)
			if ctx.Err() != nil {
				return
			}
			rec.add(kindExecute, err)
			if err != nil {
				continue
			}
			if _, err := decide(context.WithoutCancel(ctx), rec, lb, id); err == nil {
				accepted <- title
			}
		}
	}()
}

// tasks creates and follows tasks (the 2026-07-28 tasks extension,
// sessionless) through the balancer.
type tasks struct {
	api *http.Client
	seq atomic.Int64

	mu      sync.Mutex
	history map[string]*chaos.TaskHistory
}

func newTasks(lb http.RoundTripper) *tasks {
	return &tasks{api: &http.Client{Transport: lb}, history: map[string]*chaos.TaskHistory{}}
}

const tasksExtension = "io.modelcontextprotocol/tasks"

type rpcAnswer struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one sessionless JSON-RPC request.
func (w *tasks) call(ctx context.Context, method, name string, params map[string]any) (rpcAnswer, error) {
	caps := map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}
	status, raw, err := mcpclient.PostModern(ctx, w.api, "http://gateway/mcp", w.seq.Add(1), method, name, "upgrade-tasks", caps, params)
	var a rpcAnswer
	if err == nil && status == http.StatusOK {
		err = json.Unmarshal(raw, &a)
	}
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d: %.200s", status, raw)
	}
	if err == nil && a.Error != nil {
		err = fmt.Errorf("%s: error %d %s", method, a.Error.Code, a.Error.Message)
	}
	return a, err
}

// create starts a slow_compute task of the given length, retrying what
// can be retried until ctx is done; it returns the task's id.
func (w *tasks) create(ctx context.Context, rec *recorder, seconds float64) (string, error) {
	for ctx.Err() == nil {
		began := time.Now()
		args := map[string]any{"seconds": seconds, "label": fmt.Sprintf("upgrade-%d", w.seq.Add(1))}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		a, err := w.call(cctx, "tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": args})
		cancel()
		id, _ := a.Result["taskId"].(string)
		ttl, _ := a.Result["ttlMs"].(float64)
		if err == nil && (a.Result["resultType"] != "task" || id == "") {
			err = fmt.Errorf("did not create a task: %v", a.Result)
		}
		rec.add(kindTask, err)
		if err == nil {
			w.mu.Lock()
			w.history[id] = &chaos.TaskHistory{ID: id, Tool: "slow_compute", Created: began, TTL: time.Duration(ttl) * time.Millisecond}
			w.mu.Unlock()
			return id, nil
		}
		if !retryableText(err.Error()) {
			return "", err
		}
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
	return "", ctx.Err()
}

// get polls task id once and records what it showed; it returns the
// status shown ("" when none).
func (w *tasks) get(ctx context.Context, rec *recorder, id string) string {
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	a, err := w.call(cctx, chaos.MethodTaskGet, id, map[string]any{"taskId": id})
	cancel()
	if ctx.Err() != nil {
		return ""
	}
	rec.add(kindTask, err)
	notFound := a.Error != nil && a.Error.Code == -32602 && a.Error.Message == "task not found"
	if err != nil && !notFound {
		return ""
	}
	op := chaos.TaskOp{Method: chaos.MethodTaskGet, Call: began, Return: time.Now(), NotFound: notFound}
	op.Status, _ = a.Result["status"].(string)
	for _, k := range []string{"result", "error"} {
		if v, ok := a.Result[k]; ok && op.Outcome == "" {
			b, _ := json.Marshal(v)
			op.Outcome = string(b)
		}
	}
	w.mu.Lock()
	w.history[id].Ops = append(w.history[id].Ops, op)
	w.mu.Unlock()
	return op.Status
}

// follow polls task id until it is seen terminal or until passes.
func (w *tasks) follow(ctx context.Context, rec *recorder, id string, until time.Time) string {
	for ctx.Err() == nil && time.Now().Before(until) {
		time.Sleep(250 * time.Millisecond) // the polling pace
		if st := w.get(ctx, rec, id); chaos.TaskTerminal(st) {
			return st
		}
	}
	return ""
}

// loop creates short tasks and follows each to its end, until ctx is done.
func (w *tasks) loop(ctx context.Context, wg *sync.WaitGroup, rec *recorder) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			id, err := w.create(ctx, rec, 0.5+1.5*rand.Float64())
			if err != nil {
				time.Sleep(200 * time.Millisecond) // retry backoff
				continue
			}
			w.follow(ctx, rec, id, time.Now().Add(90*time.Second))
		}
	}()
}

// check follows every task created to its end (through ctx) and returns
// what chaos.TaskOnce finds, and how the tasks ended.
func (w *tasks) check(ctx context.Context, rec *recorder, by time.Time) (violations []string, ends map[string]int) {
	w.mu.Lock()
	ids := slices.Sorted(mapsKeys(w.history))
	w.mu.Unlock()
	for _, id := range ids {
		w.mu.Lock()
		seen := chaos.TaskEnd(*w.history[id]) != ""
		w.mu.Unlock()
		// One more tasks/get after the end was seen: a terminal status
		// must stay what it was.
		if seen || w.follow(ctx, rec, id, by) != "" {
			w.get(ctx, rec, id)
		}
	}
	ends = map[string]int{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		h := *w.history[id]
		violations = append(violations, chaos.TaskOnce(h, by)...)
		ends[chaos.TaskEnd(h)]++
	}
	return violations, ends
}

// retryableText reports whether an error's text is one a client retries.
func retryableText(s string) bool {
	for _, m := range []string{"502", "503", "429", "restarting", "Too many requests", "Service Unavailable", "Bad Gateway", "retry", "EOF", "connection reset"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
