package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/examples/watch/watchtool"
	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
)

// Pace of the schedule worker: a schedule every schedulePace, due
// scheduleAfter ahead; after the load, the harness waits at most
// scheduleWait for the acknowledged ones to fire.
const (
	schedulePace  = 250 * time.Millisecond
	scheduleAfter = 2 * time.Second
	scheduleWait  = 60 * time.Second
)

// scheduleWorker drives examples/watch's remind_me (mcpgrain.ScheduleAt
// on the caller's session) through the balancer: a go-sdk session
// (2025-11-25) schedules reminders with keys unique in the run
// ("chaos-sw1-7"), due scheduleAfter ahead, one at a time; a call that
// fails is retried with the same key (the key makes it idempotent) until
// answered. The callback records each key once in the nodes' shared
// WATCH_DIR. After the run chaos.SchedulesOnce holds the records to the
// acknowledged schedules.
type scheduleWorker struct {
	api *http.Client
	dir string

	mu   sync.Mutex
	ops  []*chaos.ScheduleOp
	open []*mcp.ClientSession

	acked atomic.Int64
}

func newScheduleWorker(lb http.RoundTripper, dir string) *scheduleWorker {
	return &scheduleWorker{api: &http.Client{Transport: bearer{lb}}, dir: dir}
}

// counts describes the worker's progress, for the round's log line.
func (w *scheduleWorker) counts() string {
	return fmt.Sprintf("%d schedules acknowledged", w.acked.Load())
}

// run schedules one reminder after the other until ctx is done; id
// numbers the worker in the keys. Its sessions stay open until close:
// a schedule lives on its session.
func (w *scheduleWorker) run(ctx context.Context, rec *recorder, id int) {
	var cs *mcp.ClientSession
	for n := 0; ctx.Err() == nil; n++ {
		if cs == nil {
			if cs = w.connect(ctx, rec); cs == nil {
				return
			}
		}
		op := &chaos.ScheduleOp{Key: fmt.Sprintf("chaos-sw%d-%d", id, n)}
		w.mu.Lock()
		w.ops = append(w.ops, op)
		w.mu.Unlock()
		if w.schedule(ctx, rec, cs, op) {
			cs = nil // go-sdk closed it: a new session for the next one
		}
		time.Sleep(schedulePace) // the worker's pace
	}
}

// connect opens a session through the balancer, retrying what a client is
// told to retry; nil once ctx is done.
func (w *scheduleWorker) connect(ctx context.Context, rec *recorder) *mcp.ClientSession {
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-watch"}, nil)
	for ctx.Err() == nil {
		began := time.Now()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: "http://gateway/mcp", HTTPClient: w.api, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			w.mu.Lock()
			w.open = append(w.open, cs)
			w.mu.Unlock()
			return cs
		}
		if ctx.Err() != nil {
			return nil
		}
		rec.outcome(chaos.Outcome{What: "watch connect", Kind: "watch connect", Took: time.Since(began), Err: err.Error(), Retryable: retryable(err)})
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
	return nil
}

// schedule calls remind_me for op until it is answered with its key
// (bounded). It reports whether go-sdk closed the session.
func (w *scheduleWorker) schedule(ctx context.Context, rec *recorder, cs *mcp.ClientSession, op *chaos.ScheduleOp) bool {
	for range 30 {
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "remind_me", Arguments: map[string]any{
			"after": scheduleAfter.String(), "text": op.Key, "key": op.Key}})
		cancel()
		if ctx.Err() != nil {
			return false // cut by the end of the run: an unknown outcome
		}
		ret := time.Now()
		o := chaos.Outcome{What: "remind_me " + op.Key + " on " + cs.ID(), Kind: chaos.KindSchedule, Took: ret.Sub(began), At: ret}
		switch {
		case err != nil:
			o.Err, o.Retryable = err.Error(), retryable(err)
		case res.IsError:
			text := mcpclient.Text(res)
			o.Err, o.Retryable = "tool error: "+text, strings.Contains(text, "retry")
		case !strings.Contains(mcpclient.Text(res), op.Key):
			o.Err = "answered without its key: " + mcpclient.Text(res)
		default:
			w.mu.Lock()
			op.Acked = true
			w.mu.Unlock()
			w.acked.Add(1)
			o.OK = true
		}
		rec.outcome(o)
		if o.OK || !o.Retryable {
			return errors.Is(err, mcp.ErrConnectionClosed)
		}
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
	return false
}

// fired reads the callbacks' records in the worker's directory.
func (w *scheduleWorker) fired() (map[string]chaos.Fire, error) {
	out := map[string]chaos.Fire{}
	files, err := filepath.Glob(filepath.Join(w.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var f watchtool.Fired
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[f.Key] = chaos.Fire{Due: f.Due, At: f.At}
	}
	return out, nil
}

// check waits (at most scheduleWait, polling) for every acknowledged
// schedule to fire, closes the worker's sessions and runs
// chaos.SchedulesOnce; it returns the violations.
func (w *scheduleWorker) check(t *testing.T) []string {
	t.Helper()
	w.mu.Lock()
	ops := make([]chaos.ScheduleOp, 0, len(w.ops))
	for _, op := range w.ops {
		ops = append(ops, *op)
	}
	w.mu.Unlock()
	began := time.Now()
	var fired map[string]chaos.Fire
	var err error
	for {
		fired, err = w.fired()
		if err != nil {
			return []string{fmt.Sprintf("schedules: read the records: %v", err)}
		}
		if len(chaos.SchedulesOnce(ops, fired)) == 0 || time.Since(began) > scheduleWait {
			break
		}
		time.Sleep(250 * time.Millisecond) // poll the records
	}
	waited := time.Since(began)
	w.mu.Lock()
	for _, cs := range w.open {
		_ = cs.Close()
	}
	w.mu.Unlock()
	out := chaos.SchedulesOnce(ops, fired)
	worst, n := chaos.ScheduleLatency(ops, fired)
	t.Logf("schedules: %d scheduled, %d acknowledged, %d fired; waited %s after the load for the acknowledged ones (bound %s); largest delay past due %s; violations %d",
		len(ops), w.acked.Load(), n, waited.Round(time.Millisecond), scheduleWait, worst.Round(time.Millisecond), len(out))
	return out
}
