package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/actors/tasks/taskstore"
	"github.com/mcpgrain/mcpgrain/cluster/store"
	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// tasksExtension is the MCP tasks extension's identifier (SEP-2663), which
// the task worker declares in every request's client capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskPoll is the task worker's polling pace (the server suggests 500 ms;
// faster here, to see more of each task's life).
const taskPoll = 250 * time.Millisecond

// tasks is the task worker: 2026-07-28 (sessionless) requests that declare
// the tasks extension, through the balancer, as raw JSON-RPC (go-sdk has
// no client side of the extension). Each worker creates a task (the
// read-only slow_compute, which a survivor runs again after its node was
// lost, or failing_job, which fails), follows it with tasks/get — each
// request to whichever gateway the balancer picks — until it is terminal,
// and cancels a quarter of them while they work. Every acknowledged task
// and every answer about it is recorded for chaos.TaskOnce.
type tasks struct {
	api *http.Client
	// bound is how long after its creation a task may take to be seen
	// terminal: the longest fault plus the rounds' recovery wait.
	bound time.Duration

	mu      sync.Mutex
	history map[string]*chaos.TaskHistory
	// lost holds the tasks whose status message said their work was
	// lost: resumed on another activation, or failed for it.
	lost map[string]loss

	created, completed, failed, cancelled atomic.Int64
	seq                                   atomic.Int64
}

func newTasks(lb http.RoundTripper, bound time.Duration) *tasks {
	return &tasks{api: &http.Client{Transport: bearer{lb}}, bound: bound, history: map[string]*chaos.TaskHistory{}, lost: map[string]loss{}}
}

// counts describes the tasks created and the ends seen so far, for the
// round's log line.
func (w *tasks) counts() string {
	w.mu.Lock()
	resumed, failedLost := 0, 0
	for _, l := range w.lost {
		if l.how == "resumed" {
			resumed++
		} else {
			failedLost++
		}
	}
	w.mu.Unlock()
	return fmt.Sprintf("%d tasks created, %d completed, %d failed, %d cancelled (work lost with its node: %d resumed, %d failed)",
		w.created.Load(), w.completed.Load(), w.failed.Load(), w.cancelled.Load(), resumed, failedLost)
}

// rpcAnswer is a JSON-RPC answer of the gateway.
type rpcAnswer struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call posts one 2026-07-28 request with the routing headers a client
// sends (Mcp-Method; Mcp-Name: the tool or the task id). It returns the
// answer and the HTTP status (0: no answer).
func (w *tasks) call(ctx context.Context, method, name string, params map[string]any) (rpcAnswer, int, error) {
	caps := map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}
	status, raw, err := mcpclient.PostModern(ctx, w.api, "http://gateway/mcp", w.seq.Add(1), method, name, "chaos-tasks", caps, params)
	var a rpcAnswer
	if err == nil && status == http.StatusOK {
		err = json.Unmarshal(raw, &a)
	}
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d: %.200s", status, raw)
	}
	return a, status, err
}

// taskOutcome turns an answer into the worker's outcome: retryable when the
// request has no answer, 5xx, 429, or an error that says to retry.
func taskOutcome(what, kind string, began time.Time, a rpcAnswer, status int, err error) chaos.Outcome {
	o := chaos.Outcome{What: what, Kind: kind, Took: time.Since(began), OK: err == nil && a.Error == nil}
	switch {
	case err != nil:
		o.Err, o.Retryable = err.Error(), status == 0 || status >= 500 || status == http.StatusTooManyRequests
	case a.Error != nil:
		o.Err = fmt.Sprintf("%d %s", a.Error.Code, a.Error.Message)
		o.Retryable = strings.Contains(a.Error.Message, "retry")
	}
	return o
}

// notFound reports whether an answer is the extension's "task not found".
func notFound(a rpcAnswer) bool {
	return a.Error != nil && a.Error.Code == -32602 && a.Error.Message == "task not found"
}

// run creates and follows tasks until ctx is done.
func (w *tasks) run(ctx context.Context, rec *recorder) {
	for ctx.Err() == nil {
		h := w.create(ctx, rec)
		if h == nil {
			time.Sleep(100 * time.Millisecond) // retry backoff
			continue
		}
		w.follow(ctx, rec, h.ID, rand.IntN(4) == 0, time.Now().Add(w.bound))
	}
}

// create starts a task: slow_compute for 0.5–4 s (seven in ten; a
// completed task), failing_job (a second, then a tool error: completed
// too) or protocol_error_job (failed at once). It returns the task's history once its creation was
// acknowledged (nil otherwise).
func (w *tasks) create(ctx context.Context, rec *recorder) *chaos.TaskHistory {
	tool, args := "slow_compute", map[string]any{"seconds": 0.5 + 3.5*rand.Float64(), "label": fmt.Sprintf("chaos-%d", w.seq.Add(1))}
	switch rand.IntN(10) {
	case 0, 1:
		tool, args = "failing_job", map[string]any{}
	case 2:
		tool, args = "protocol_error_job", map[string]any{}
	}
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	a, status, err := w.call(cctx, "tools/call", tool, map[string]any{"name": tool, "arguments": args})
	cancel()
	if ctx.Err() != nil {
		return nil // cut by the end of the run: unknown, and not acknowledged
	}
	o := taskOutcome("create a "+tool+" task", chaos.KindTaskCreate, began, a, status, err)
	id, _ := a.Result["taskId"].(string)
	ttl, _ := a.Result["ttlMs"].(float64)
	if o.OK && (a.Result["resultType"] != "task" || id == "") {
		o.OK, o.Err = false, fmt.Sprintf("did not create a task: %v", a.Result)
	}
	rec.outcome(o)
	if !o.OK {
		return nil
	}
	h := &chaos.TaskHistory{ID: id, Tool: tool, Created: began, TTL: time.Duration(ttl) * time.Millisecond}
	w.mu.Lock()
	w.history[id] = h
	w.mu.Unlock()
	w.created.Add(1)
	return h
}

// follow polls task id with tasks/get until it is seen terminal, ctx is
// done or until passes; with cancel, it cancels the task once seen
// working (retrying until the cancel is acknowledged).
func (w *tasks) follow(ctx context.Context, rec *recorder, id string, cancel bool, until time.Time) {
	for ctx.Err() == nil && time.Now().Before(until) {
		time.Sleep(taskPoll) // the polling pace
		status, ok := w.get(ctx, rec, id)
		if chaos.TaskTerminal(status) {
			w.ended(status)
			return
		}
		if ok && cancel {
			cancel = !w.cancel(ctx, rec, id)
		}
	}
}

// ended counts a task's end.
func (w *tasks) ended(status string) {
	switch status {
	case chaos.TaskCompleted:
		w.completed.Add(1)
	case chaos.TaskFailed:
		w.failed.Add(1)
	case chaos.TaskCancelled:
		w.cancelled.Add(1)
	}
}

// get sends tasks/get for id through the balancer and records what it
// showed; it returns the status shown and whether the task was.
func (w *tasks) get(ctx context.Context, rec *recorder, id string) (string, bool) {
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	a, status, err := w.call(cctx, chaos.MethodTaskGet, id, map[string]any{"taskId": id})
	cancel()
	if ctx.Err() != nil {
		return "", false
	}
	ret := time.Now()
	o := taskOutcome("tasks/get "+id, chaos.KindTask, began, a, status, err)
	op := chaos.TaskOp{Method: chaos.MethodTaskGet, Call: began, Return: ret, NotFound: notFound(a)}
	if o.OK {
		op.Status, _ = a.Result["status"].(string)
		op.Outcome = taskEnd(a.Result)
		w.noteLoss(id, a.Result)
	}
	if o.OK || op.NotFound {
		w.record(id, op)
	}
	rec.outcome(o)
	return op.Status, o.OK
}

// noteLoss notes a task whose status message says its work was lost
// with its node (resumed on a survivor, or failed: the tool is not safe to
// run again).
func (w *tasks) noteLoss(id string, task map[string]any) {
	msg, _ := task["statusMessage"].(string)
	how := ""
	switch {
	case strings.Contains(msg, "resumed"):
		how = "resumed"
	case strings.Contains(msg, "was lost"):
		how = "failed"
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if l, seen := w.lost[id]; !seen || l.how != how {
		w.lost[id] = loss{how: how, seen: time.Now(), message: msg}
	}
}

// loss is how a task's lost work showed: how ("resumed" or "failed"),
// when a tasks/get first showed it so, and the status message.
type loss struct {
	how     string
	seen    time.Time
	message string
}

// logLosses logs the tasks whose work was lost — which, how, when first
// seen so (to tell the round) — and what the nodes logged about them.
func (w *tasks) logLosses(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := slices.Sorted(maps.Keys(w.lost))
	for _, id := range ids {
		l := w.lost[id]
		t.Logf("tasks: work lost: %s %s (%s, first seen %s: %q)", id, w.history[id].Tool, l.how, l.seen.Format("15:04:05.000"), l.message)
		for _, n := range c.Nodes() {
			for _, line := range n.LogLines(id, 8) {
				t.Logf("  %s: %.300s", n.ID, line)
			}
		}
	}
}

// taskEnd is the result or error a tasks/get showed, as JSON.
func taskEnd(task map[string]any) string {
	for _, k := range []string{"result", "error"} {
		if v, ok := task[k]; ok {
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	return ""
}

// cancel sends tasks/cancel for id and reports whether it was
// acknowledged (recorded for the check).
func (w *tasks) cancel(ctx context.Context, rec *recorder, id string) bool {
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	a, status, err := w.call(cctx, chaos.MethodTaskCancel, id, map[string]any{"taskId": id})
	cancel()
	if ctx.Err() != nil {
		return false
	}
	o := taskOutcome("tasks/cancel "+id, chaos.KindTask, began, a, status, err)
	if o.OK {
		w.record(id, chaos.TaskOp{Method: chaos.MethodTaskCancel, Call: began, Return: time.Now()})
	}
	rec.outcome(o)
	return o.OK
}

// record adds op to task id's history.
func (w *tasks) record(id string, op chaos.TaskOp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.history[id]
	h.Ops = append(h.Ops, op)
}

// settle follows, after the load stopped, every task not yet seen
// terminal, until it is or its bound passed (the recorder gets these
// requests' outcomes too).
func (w *tasks) settle(rec *recorder) {
	w.mu.Lock()
	var open []*chaos.TaskHistory
	for _, h := range w.history {
		if chaos.TaskEnd(*h) == "" {
			open = append(open, h)
		}
	}
	w.mu.Unlock()
	for _, h := range open {
		w.follow(context.Background(), rec, h.ID, false, h.Created.Add(w.bound).Add(time.Second))
	}
}

// check runs chaos.TaskOnce over every acknowledged task and, for each
// task with a violation, logs what the store and the nodes say about it.
// It returns the violations, the number of tasks per end seen and the
// number of answers checked per method and status ("tasks/get working").
func (w *tasks) check(t *testing.T, c *testcluster.Cluster, st store.Store) (violations []string, ends, answers map[string]int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	ends, answers = map[string]int{}, map[string]int{}
	for _, h := range w.history {
		ends[chaos.TaskEnd(*h)]++
		for _, op := range h.Ops {
			answers[strings.TrimSpace(op.Method+" "+op.Status)]++
		}
		v := chaos.TaskOnce(*h, h.Created.Add(w.bound))
		if len(v) == 0 {
			continue
		}
		violations = append(violations, v...)
		w.postMortem(t, c, st, h)
	}
	return violations, ends, answers
}

// postMortem logs a task's history, its row in the store and what the
// nodes logged about it.
func (w *tasks) postMortem(t *testing.T, c *testcluster.Cluster, st store.Store, h *chaos.TaskHistory) {
	t.Helper()
	for _, op := range h.Ops {
		t.Logf("  %s: %s %s→%s status %q notFound %v outcome %.200s", h.ID, op.Method, op.Call.Format("15:04:05.000"), op.Return.Format("15:04:05.000"), op.Status, op.NotFound, op.Outcome)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if row, err := taskstore.New(st).GetTask(ctx, h.ID, time.Now()); err == nil {
		t.Logf("  %s in the store: %s (%s), %d attempts, result %.200s error %.200s", h.ID, row.Status, row.StatusMessage, row.Attempts, row.Result, row.Error)
	} else {
		t.Logf("  %s in the store: %v", h.ID, err)
	}
	for _, n := range c.Nodes() {
		for _, l := range n.LogLines(h.ID, 15) {
			t.Logf("  %s: %s", n.ID, l)
		}
	}
}

// The task worker classifies answers the way its checks need: no answer,
// 5xx and 429 and errors that say to retry are retryable; "task not
// found" is a definite answer (chaos.TaskOnce judges it); anything else
// is a failure.
func TestTaskOutcomeClassifiesAnswers(t *testing.T) {
	rpcErr := func(code int, msg string) rpcAnswer {
		var a rpcAnswer
		_ = json.Unmarshal(fmt.Appendf(nil, `{"error":{"code":%d,"message":%q}}`, code, msg), &a)
		return a
	}
	for _, tc := range []struct {
		name                    string
		a                       rpcAnswer
		status                  int
		err                     error
		ok, retryable, notFound bool
	}{
		{"a task", rpcAnswer{Result: map[string]any{"status": "working"}}, 200, nil, true, false, false},
		{"no answer", rpcAnswer{}, 0, io.ErrUnexpectedEOF, false, true, false},
		{"503", rpcAnswer{}, 503, fmt.Errorf("status 503"), false, true, false},
		{"429", rpcAnswer{}, 429, fmt.Errorf("status 429"), false, true, false},
		{"400", rpcAnswer{}, 400, fmt.Errorf("status 400"), false, false, false},
		{"not found", rpcErr(-32602, "task not found"), 200, nil, false, false, true},
		{"an error that says to retry", rpcErr(-32001, "MCP session is restarting, please retry"), 200, nil, false, true, false},
		{"another error", rpcErr(-32603, "boom"), 200, nil, false, false, false},
	} {
		o := taskOutcome(tc.name, chaos.KindTask, time.Now(), tc.a, tc.status, tc.err)
		if o.OK != tc.ok || o.Retryable != tc.retryable || notFound(tc.a) != tc.notFound {
			t.Errorf("%s: ok %v retryable %v not found %v, want %v %v %v", tc.name, o.OK, o.Retryable, notFound(tc.a), tc.ok, tc.retryable, tc.notFound)
		}
	}
}
