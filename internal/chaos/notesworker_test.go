package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgrain/mcpgrain/actors/session"
	"github.com/mcpgrain/mcpgrain/internal/chaos"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// Pace of the notes worker: each session adds notesPerSession notes, one
// request at a time with notesPace between requests, reads its notes back
// after every third add, then reads them a last time and is deleted; the
// worker goes on with a new session. Halfway, the session stays idle for
// notesIdle, longer than the cluster's --session-timeout
// (sessionTimeout), so that its node passivates it (record kept) and the
// next request restores it. 100 notes of about 12 bytes stay far below
// the example's 4 KiB MaxBytes.
const (
	notesPerSession = 100
	notesPace       = 100 * time.Millisecond
	notesIdle       = sessionTimeout + 2*time.Second
)

// notesWorker drives examples/notes — an SDK program's tools with durable
// per-session State — through the balancer: go-sdk sessions (2025-11-25)
// add notes with ids unique in the run ("w1-s2-n17": worker, session,
// note) and read them back with list_notes. The balancer sends each
// request to the next healthy gateway, so most reach the session through
// a node that does not own it. Every request is recorded for
// chaos.NotesOnce: no acknowledged note lost, none shown twice, the notes
// never going backwards.
type notesWorker struct {
	api *http.Client

	mu        sync.Mutex
	histories []*chaos.NotesHistory
	// open holds the sessions in use when the load stopped, for their
	// last read.
	open map[*chaos.NotesHistory]*mcp.ClientSession
	// unread are the sessions whose last read never got an answer.
	unread []string
	// failed holds the error of every add of unknown outcome, by note.
	failed map[string]string
	// via counts the requests sent to each notes session by the node the
	// balancer sent them to (session id → node id → requests).
	via map[string]map[string]int

	sessions, acked, idled atomic.Int64
}

func newNotesWorker(lb http.RoundTripper) *notesWorker {
	return &notesWorker{api: &http.Client{Transport: bearer{lb}}, open: map[*chaos.NotesHistory]*mcp.ClientSession{}, failed: map[string]string{}, via: map[string]map[string]int{}}
}

// counts describes the worker's progress, for the round's log line.
func (w *notesWorker) counts() string {
	return fmt.Sprintf("%d notes sessions (%d left idle past the session timeout), %d notes acknowledged", w.sessions.Load(), w.idled.Load(), w.acked.Load())
}

// run drives sessions one after the other until ctx is done; w numbers
// the worker in the notes' ids.
func (w *notesWorker) run(ctx context.Context, rec *recorder, id int) {
	for s := 0; ctx.Err() == nil; s++ {
		cs := w.connect(ctx, rec)
		if cs == nil {
			return
		}
		h := &chaos.NotesHistory{Session: fmt.Sprintf("w%d-s%d (%s)", id, s, cs.ID())}
		w.mu.Lock()
		w.histories = append(w.histories, h)
		w.mu.Unlock()
		lost := false
		for n := 0; n < notesPerSession && ctx.Err() == nil && !lost; n++ {
			lost = w.call(ctx, rec, cs, h, fmt.Sprintf("w%d-s%d-n%d", id, s, n))
			if n%3 == 2 && !lost && ctx.Err() == nil {
				time.Sleep(notesPace) // the worker's pace
				lost = w.call(ctx, rec, cs, h, "")
			}
			time.Sleep(notesPace) // the worker's pace
			if n == notesPerSession/2 {
				w.idled.Add(1)
				time.Sleep(notesIdle) // idle past the session timeout: passivated
			}
		}
		switch {
		case lost:
			// go-sdk closed the session (a violation: Liveness reports the
			// non-retryable error, the session check the loss); its
			// history ends here, the worker goes on with a new one.
		case ctx.Err() != nil:
			w.mu.Lock()
			w.open[h] = cs
			w.mu.Unlock()
			return
		default:
			w.lastRead(ctx, rec, cs, h)
			_ = cs.Close() // deletes the session: its notes go with it
		}
	}
}

// served counts a POST the balancer sends to a notes session (the
// balancer's served hook).
func (w *notesWorker) served(r *http.Request, node string) {
	id := r.Header.Get("Mcp-Session-Id")
	if r.Method != http.MethodPost || id == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.via[id]; ok {
		n[node]++
	}
}

// viaOthers counts the POSTs sent to notes sessions, and those sent
// through a node that does not own the session (by the placement of the
// whole cluster: while a node is down or out of the view its sessions
// live elsewhere, so this is an estimate).
func (w *notesWorker) viaOthers(c *testcluster.Cluster) (all, others int) {
	table := c.Placement(session.KindName, 0, 1, 2)
	for id, nodes := range w.via {
		owner, _ := table.Owner(session.KindName, id)
		for node, n := range nodes {
			all += n
			if node != owner.ID {
				others += n
			}
		}
	}
	return all, others
}

// connect opens a session through the balancer, retrying what a client is
// told to retry; nil once ctx is done.
func (w *notesWorker) connect(ctx context.Context, rec *recorder) *mcp.ClientSession {
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-notes"}, nil)
	for ctx.Err() == nil {
		began := time.Now()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: "http://gateway/mcp", HTTPClient: w.api, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			w.sessions.Add(1)
			w.mu.Lock()
			w.via[cs.ID()] = map[string]int{}
			w.mu.Unlock()
			return cs
		}
		if ctx.Err() != nil {
			return nil
		}
		rec.outcome(chaos.Outcome{What: "notes connect", Kind: "notes connect", Took: time.Since(began), Err: err.Error(), Retryable: retryable(err)})
		time.Sleep(200 * time.Millisecond) // retry backoff
	}
	return nil
}

// call sends add_note with note (list_notes when note is "") on cs and
// records it in h and, unless the load stopped under it, as an outcome.
// It reports whether go-sdk closed the session.
func (w *notesWorker) call(ctx context.Context, rec *recorder, cs *mcp.ClientSession, h *chaos.NotesHistory, note string) bool {
	tool, args := "list_notes", map[string]any{}
	if note != "" {
		tool, args = "add_note", map[string]any{"text": note}
	}
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	cancel()
	op, o := notesAnswer(res, err)
	op.Add, op.Return = note, time.Now()
	o.What, o.Took, o.At = strings.TrimSpace(tool+" "+note)+" on "+cs.ID(), op.Return.Sub(began), op.Return
	w.mu.Lock()
	h.Ops = append(h.Ops, op)
	if !op.OK && note != "" {
		w.failed[note] = fmt.Sprintf("at %s after %s: %s", op.Return.Format("15:04:05.000"), o.Took.Round(time.Millisecond), o.Err)
		if ctx.Err() != nil {
			w.failed[note] = "cut by the end of the load"
		}
	}
	w.mu.Unlock()
	if op.OK && note != "" {
		w.acked.Add(1)
	}
	if ctx.Err() == nil {
		rec.outcome(o) // a request cut by the end of the run is only an unknown outcome
	}
	return errors.Is(err, mcp.ErrConnectionClosed)
}

// notesAnswer classifies a notes tool's answer: OK with the session's
// notes; a tool error that says to retry (the SDK's ErrRetry: the save was
// fenced or the store failed) or a client error a client is told to retry
// is retryable; anything else is not.
func notesAnswer(res *mcp.CallToolResult, err error) (chaos.NoteOp, chaos.Outcome) {
	o := chaos.Outcome{Kind: chaos.KindNotes}
	switch {
	case err != nil:
		o.Err, o.Retryable = err.Error(), retryable(err)
	case res.IsError:
		text := mcpclient.Text(res)
		o.Err, o.Retryable = "tool error: "+text, strings.Contains(text, "retry the request")
	default:
		notes, ok := mcpclient.Structured(res)["notes"].([]any)
		var op chaos.NoteOp
		for _, n := range notes {
			s, isString := n.(string)
			ok = ok && isString
			op.Notes = append(op.Notes, s)
		}
		if !ok {
			o.Err = fmt.Sprintf("answer without notes: %v", res.StructuredContent)
			return chaos.NoteOp{}, o
		}
		op.OK, o.OK = true, true
		return op, o
	}
	return chaos.NoteOp{}, o
}

// lastRead reads a session's notes until an answer comes (bounded), so
// that its history ends with what the session holds; a session never
// read is reported by check.
func (w *notesWorker) lastRead(ctx context.Context, rec *recorder, cs *mcp.ClientSession, h *chaos.NotesHistory) {
	for range 40 {
		if w.call(ctx, rec, cs, h, "") || ctx.Err() != nil {
			break
		}
		w.mu.Lock()
		read := h.Ops[len(h.Ops)-1].OK
		w.mu.Unlock()
		if read {
			return
		}
		time.Sleep(250 * time.Millisecond) // retry backoff
	}
	w.mu.Lock()
	w.unread = append(w.unread, h.Session)
	w.mu.Unlock()
}

// settle reads, after the load stopped, every session still in use a last
// time and deletes it.
func (w *notesWorker) settle(rec *recorder) {
	w.mu.Lock()
	open := w.open
	w.open = nil
	w.mu.Unlock()
	for h, cs := range open {
		w.lastRead(context.Background(), rec, cs, h)
		_ = cs.Close()
	}
}

// check runs chaos.NotesOnce over every session's history; it returns the
// violations and logs what the histories show.
func (w *notesWorker) check(t *testing.T, c *testcluster.Cluster) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	hs := make([]chaos.NotesHistory, 0, len(w.histories))
	for _, h := range w.histories {
		hs = append(hs, *h)
		out = append(out, chaos.NotesOnce(*h)...)
	}
	for _, s := range w.unread {
		out = append(out, fmt.Sprintf("notes session %s: no answer to its last read", s))
	}
	w.logApplied(t, c, hs)
	sent, acked, unknown, applied := chaos.NotesCounts(hs)
	all, others := w.viaOthers(c)
	t.Logf("notes: %d sessions; %d notes sent, %d acknowledged, %d of unknown outcome (%d of them applied); %d of %d requests through a node that does not own the session; violations %d",
		len(hs), sent, acked, unknown, applied, others, all, len(out))
	return out
}

// logApplied logs every add of unknown outcome that a later answer of its
// session showed (it was applied after all), with the error its client
// got — whether an answer that says to retry (nothing ran) ever came for
// one that ran — and the nodes' warnings and restart envelopes about its
// session.
func (w *notesWorker) logApplied(t *testing.T, c *testcluster.Cluster, hs []chaos.NotesHistory) {
	t.Helper()
	for _, h := range hs {
		var last []string
		for _, op := range h.Ops {
			if op.OK {
				last = op.Notes
			}
		}
		for _, op := range h.Ops {
			if !op.OK && op.Add != "" && slices.Contains(last, op.Add) {
				t.Logf("notes: %s of unknown outcome was applied (session %s): %.200s", op.Add, h.Session, w.failed[op.Add])
				logSession(t, c, h.Session)
			}
		}
	}
}

// logSession logs what the nodes logged about a notes session
// ("w0-s1 (ID)") at level INFO or above: restart envelopes, failed
// requests, saves.
func logSession(t *testing.T, c *testcluster.Cluster, session string) {
	t.Helper()
	id := strings.TrimSuffix(session[strings.LastIndexByte(session, '(')+1:], ")")
	for _, n := range c.Nodes() {
		for _, l := range n.LogLines(id, 400) {
			if !strings.Contains(l, "level=DEBUG") {
				t.Logf("  %s: %.300s", n.ID, l)
			}
		}
	}
}

// The notes worker classifies answers the way NotesOnce needs: the notes
// of an answer are what it showed; a tool error wrapping the SDK's
// ErrRetry and a client error a client is told to retry are retryable (an
// unknown outcome), a lost session and any other tool error are not, and
// an answer without its notes is a failure.
func TestNotesAnswerClassifiesAnswers(t *testing.T) {
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	for _, tc := range []struct {
		name          string
		res           *mcp.CallToolResult
		err           error
		ok, retryable bool
		notes         []string
	}{
		{"the notes", &mcp.CallToolResult{StructuredContent: map[string]any{"notes": []any{"a", "b"}}}, nil, true, false, []string{"a", "b"}},
		{"no notes yet", &mcp.CallToolResult{StructuredContent: map[string]any{"notes": []any{}}}, nil, true, false, nil},
		{"a save that was fenced", &mcp.CallToolResult{IsError: true, Content: text(`mcpgrain: session S: save state "notes": mcpgrain: the session moved or the store failed; retry the request (fenced)`)}, nil, false, true, nil},
		{"another tool error", &mcp.CallToolResult{IsError: true, Content: text("mcpgrain: state value too large")}, nil, false, false, nil},
		{"no notes in the answer", &mcp.CallToolResult{StructuredContent: map[string]any{"other": 1}}, nil, false, false, nil},
		{"a note that is not a string", &mcp.CallToolResult{StructuredContent: map[string]any{"notes": []any{"a", 2}}}, nil, false, false, nil},
		{"503", nil, errors.New(`calling "tools/call": rejected by transport: sending "tools/call": Service Unavailable`), false, true, nil},
		{"the session lost", nil, fmt.Errorf("calling: %w", mcp.ErrConnectionClosed), false, false, nil},
	} {
		op, o := notesAnswer(tc.res, tc.err)
		if o.OK != tc.ok || op.OK != tc.ok || o.Retryable != tc.retryable || !slices.Equal(op.Notes, tc.notes) || o.Kind != chaos.KindNotes {
			t.Errorf("%s: ok %v/%v retryable %v notes %q kind %q; want ok %v retryable %v notes %q", tc.name, o.OK, op.OK, o.Retryable, op.Notes, o.Kind, tc.ok, tc.retryable, tc.notes)
		}
	}
}
