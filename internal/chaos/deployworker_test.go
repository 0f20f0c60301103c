package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// deployWorker drives examples/deploy's tool (Ask, then a journaled Step)
// through the balancer: a go-sdk session (2025-11-25) calls deploy with a
// service unique in the run ("chaos-dw1-7"); while the call waits, the
// worker finds its pause in the HTTP approval API and accepts it (every
// fourth one it declines), then waits for the answer. A call that fails
// (its owner died, stopped or froze) is retried with the same arguments on
// the same session until answered: the retry finds the pause or the
// decision journaled. After the run chaos.DeployOnce holds the nodes'
// shared deployment log ($DEPLOY_LOG) to the answers.
type deployWorker struct {
	api *http.Client
	log string

	mu  sync.Mutex
	ops []*chaos.DeployOp
	// trace holds, by service, what the worker saw of a deploy that was
	// slow or never answered (calls, pause, decisions), for the report.
	trace map[string][]string
	slow  map[string]bool
	// ids holds, by service, the session and the execution of its calls,
	// to find the nodes' log lines about a slow one.
	ids map[string][]string

	sessions, answered atomic.Int64
	// reasked counts the pauses listed for a deploy after one of its
	// pauses had been decided (acknowledged): questions asked again.
	reasked atomic.Int64
}

// deployWorkers is how many deploy workers run: 2, or none with
// MCPGRAIN_CHAOS_DEPLOY=0 (the worker's check then sees no deploys and
// reports nothing, and the rounds do not wait for a deploy's progress).
func deployWorkers() int {
	if os.Getenv("MCPGRAIN_CHAOS_DEPLOY") == "0" {
		return 0
	}
	return 2
}

func newDeployWorker(lb http.RoundTripper, log string) *deployWorker {
	return &deployWorker{api: &http.Client{Transport: bearer{lb}}, log: log, trace: map[string][]string{}, slow: map[string]bool{}, ids: map[string][]string{}}
}

// counts describes the worker's progress, for the round's log line.
func (w *deployWorker) counts() string {
	w.mu.Lock()
	n := len(w.ops)
	w.mu.Unlock()
	return fmt.Sprintf("%d deploys asked (%d answered)", n, w.answered.Load())
}

// run deploys one service after the other until ctx is done; id numbers
// the worker in the services' names.
func (w *deployWorker) run(ctx context.Context, rec *recorder, id int) {
	var cs *mcp.ClientSession
	for d := 0; ctx.Err() == nil; d++ {
		if cs == nil {
			if cs = w.connect(ctx, rec); cs == nil {
				return
			}
		}
		op := &chaos.DeployOp{Service: fmt.Sprintf("chaos-dw%d-%d", id, d), Accept: d%4 != 3}
		w.mu.Lock()
		w.ops = append(w.ops, op)
		w.mu.Unlock()
		if w.deploy(ctx, rec, cs, op) {
			_ = cs.Close()
			cs = nil // go-sdk closed it: a new session for the next deploy
		}
	}
	if cs != nil {
		_ = cs.Close()
	}
}

// connect opens a session through the balancer, retrying what a client is
// told to retry; nil once ctx is done.
func (w *deployWorker) connect(ctx context.Context, rec *recorder) *mcp.ClientSession {
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-deploy"}, nil)
	for ctx.Err() == nil {
		began := time.Now()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: "http://gateway/mcp", HTTPClient: w.api, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			w.sessions.Add(1)
			return cs
		}
		if ctx.Err() != nil {
			return nil
		}
		rec.outcome(chaos.Outcome{What: "deploy connect", Kind: "deploy connect", Took: time.Since(began), Err: err.Error(), Retryable: retryable(err)})
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
	return nil
}

// deploy calls deploy for op until it is answered (bounded), deciding
// every pause of op while a call waits (a pause listed after an
// acknowledged decision, a question asked again, is decided too and
// counted). A call's outcome
// counts its time from the decision (the wait for the approver is not the
// cluster's). It reports whether go-sdk closed the session.
func (w *deployWorker) deploy(ctx context.Context, rec *recorder, cs *mcp.ClientSession, op *chaos.DeployOp) bool {
	decided := map[string]bool{} // the executions of op decided
	for range 30 {
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		done := make(chan struct{})
		var res *mcp.CallToolResult
		var err error
		go func() {
			defer close(done)
			res, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": op.Service, "version": "1"}})
		}()
		if id := w.decide(cctx, rec, op, done, decided); id != "" {
			decided[id] = true
			began = time.Now() // the call's time is what it took once decided
		}
		<-done
		cancel()
		ret := time.Now()
		o := chaos.Outcome{What: "deploy " + op.Service + " on " + cs.ID(), Kind: chaos.KindDeploy, Took: ret.Sub(began), At: ret}
		if err == nil && !res.IsError {
			w.mu.Lock()
			op.Answered, op.Result = true, mcpclient.Text(res)
			w.mu.Unlock()
			w.answered.Add(1)
			o.OK = true
			rec.outcome(o)
			return false
		}
		if ctx.Err() != nil {
			return false // cut by the end of the run: an unknown outcome
		}
		if err != nil {
			o.Err, o.Retryable = err.Error(), retryable(err)
		} else {
			text := mcpclient.Text(res)
			o.Err, o.Retryable = "tool error: "+text, strings.Contains(text, "retry")
		}
		rec.outcome(o)
		w.mu.Lock()
		w.ids[op.Service] = append(w.ids[op.Service], cs.ID())
		w.mu.Unlock()
		w.note(op.Service, fmt.Sprintf("call on %s failed after %s: %.200s", cs.ID(), o.Took.Round(time.Millisecond), o.Err))
		if o.Took > 10*time.Second {
			w.mu.Lock()
			w.slow[op.Service] = true
			w.mu.Unlock()
		}
		if errors.Is(err, mcp.ErrConnectionClosed) {
			return true
		}
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
	return false
}

// decide finds a pause of op in the approval API that is not one of
// decided and sends the worker's action until it is decided (200, or 409:
// an earlier attempt of unknown outcome decided it), and returns its
// execution id; "" if the call ended first (the next call pauses again,
// or finds the decision).
func (w *deployWorker) decide(ctx context.Context, rec *recorder, op *chaos.DeployOp, done <-chan struct{}, decided map[string]bool) string {
	action := "decline"
	if op.Accept {
		action = "accept"
	}
	id := ""
	for ctx.Err() == nil {
		select {
		case <-done:
			return ""
		case <-time.After(100 * time.Millisecond): // poll interval of the approver
		}
		if id == "" {
			if id = w.pauseOf(ctx, "Deploy "+op.Service+" 1?", decided); id != "" {
				w.note(op.Service, "paused as "+id)
				if len(decided) > 0 {
					w.reasked.Add(1)
					w.mu.Lock()
					w.slow[op.Service] = true // traced in the report
					w.mu.Unlock()
				}
				w.mu.Lock()
				w.ids[op.Service] = append(w.ids[op.Service], id)
				w.mu.Unlock()
			}
			continue
		}
		began := time.Now()
		status, err := w.post(ctx, "http://gateway/api/executions/"+id+"/resume", fmt.Sprintf(`{"action":%q}`, action))
		ret := time.Now()
		o := chaos.Outcome{What: "decide " + action + " deploy " + op.Service, Kind: chaos.KindApproval, Took: ret.Sub(began), At: ret,
			OK: status == http.StatusOK || status == http.StatusConflict, Retryable: status == 0 || status >= 500 || status == http.StatusTooManyRequests}
		if !o.OK {
			o.Err = fmt.Sprintf("status %d %v", status, err)
		}
		w.note(op.Service, fmt.Sprintf("%s %s: status %d %v", action, id, status, err))
		if ctx.Err() == nil {
			rec.outcome(o)
		}
		if o.OK {
			return id
		}
		if !o.Retryable {
			w.mu.Lock()
			w.slow[op.Service] = true // traced in the report
			w.mu.Unlock()
			return ""
		}
	}
	return ""
}

// note adds a line to a deploy's trace.
func (w *deployWorker) note(service, line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace[service] = append(w.trace[service], time.Now().Format("15:04:05.000 ")+line)
}

// pauseOf returns the id of a listed paused execution whose message is
// message and that is not one of skip, or "".
func (w *deployWorker) pauseOf(ctx context.Context, message string, skip map[string]bool) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gateway/api/executions", nil)
	resp, err := w.api.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var got struct {
		Executions []struct {
			ID      string `json:"executionId"`
			Message string `json:"message"`
		} `json:"executions"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil {
		return ""
	}
	for _, e := range got.Executions {
		if e.Message == message && !skip[e.ID] {
			return e.ID
		}
	}
	return ""
}

// post sends body to url and returns the status (0: no answer).
func (w *deployWorker) post(ctx context.Context, url, body string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.api.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// check runs chaos.DeployOnce over the worker's deploys and the
// deployment log; it returns the violations.
func (w *deployWorker) check(t *testing.T, c *testcluster.Cluster) []string {
	t.Helper()
	b, err := os.ReadFile(w.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return []string{fmt.Sprintf("deploy: read the deployment log: %v", err)}
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	w.mu.Lock()
	defer w.mu.Unlock()
	ops := make([]chaos.DeployOp, 0, len(w.ops))
	for _, op := range w.ops {
		ops = append(ops, *op)
	}
	out := chaos.DeployOnce(ops, lines)
	sent, accepted, declined, unanswered := chaos.DeployCounts(ops)
	requested := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "requested ") {
			requested++
		}
	}
	for _, op := range ops {
		if w.slow[op.Service] || (!op.Answered && len(out) > 0) {
			t.Logf("deploy %s (answered %v): %q", op.Service, op.Answered, w.trace[op.Service])
			for _, id := range slices.Compact(slices.Sorted(slices.Values(w.ids[op.Service]))) {
				for _, n := range c.Nodes() {
					for _, l := range n.LogLines(id, 40) {
						if !strings.Contains(l, "level=DEBUG") {
							t.Logf("  %s: %.400s", n.ID, l)
						}
					}
				}
			}
		}
	}
	t.Logf("deploy: %d deploys on %d sessions; %d answered deployed, %d answered declined, %d unanswered; %d handler runs (requested lines); %d questions asked again after an acknowledged decision; violations %d",
		sent, w.sessions.Load(), accepted, declined, unanswered, requested, w.reasked.Load(), len(out))
	return out
}
