package mcpruntime

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgrain/mcpgrain/cluster/store"
)

// eventLog is the go-sdk EventStore of one session runtime: SSE events are
// kept in memory and written behind to the store in small batches, so a
// client can resume a dropped stream with Last-Event-ID on this node (from
// memory) or on any other node after the session moved (from the store).
//
// The standalone GET stream (id "") is not logged: go-sdk numbers its
// events from 0 again in every runtime incarnation, so its indices would
// collide across restores. Its notifications are not replayed after a
// dropped GET; responses to requests (POST streams, random ids) are.
//
// Write-behind means the last FlushInterval of events can be lost if the
// node dies; a clean passivation flushes everything first.
type eventLog struct {
	st store.Store
	// session is the grain's session id, under which events are stored:
	// go-sdk names the session by its own id, different in every runtime
	// incarnation, and the events must outlive the incarnation.
	session  string
	log      *slog.Logger
	every    time.Duration
	maxBytes int

	mu      sync.Mutex
	streams map[string]*memStream // by session + "\x00" + stream
	pending []store.Event
	bytes   int
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	closed  bool
}

type memStream struct {
	first   int      // index of data[0]
	data    [][]byte // events first.. (trimmed from the front once flushed)
	next    int      // next index to assign
	flushed int      // events with index < flushed are in the store
}

func newEventLog(st store.Store, session string, log *slog.Logger, every time.Duration, maxBytes int) *eventLog {
	l := &eventLog{st: st, session: session, log: log, every: every, maxBytes: maxBytes, streams: map[string]*memStream{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.run()
	return l
}

func streamKey(session, stream string) string { return session + "\x00" + stream }

// Open implements mcp.EventStore.
func (l *eventLog) Open(_ context.Context, _, stream string) error {
	session := l.session
	if stream == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.streams[streamKey(session, stream)]; !ok {
		l.streams[streamKey(session, stream)] = &memStream{}
	}
	return nil
}

// Append implements mcp.EventStore.
func (l *eventLog) Append(_ context.Context, _, stream string, data []byte) error {
	session := l.session
	if stream == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("mcpruntime: event log closed")
	}
	ms, ok := l.streams[streamKey(session, stream)]
	if !ok {
		ms = &memStream{}
		l.streams[streamKey(session, stream)] = ms
	}
	d := append([]byte(nil), data...)
	ms.data = append(ms.data, d)
	l.pending = append(l.pending, store.Event{Session: session, Stream: stream, Index: ms.next, Data: d})
	ms.next++
	l.bytes += len(d)
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

// After implements mcp.EventStore.
func (l *eventLog) After(ctx context.Context, _, stream string, index int) iter.Seq2[[]byte, error] {
	session := l.session
	return func(yield func([]byte, error) bool) {
		if stream == "" {
			return
		}
		l.mu.Lock()
		ms, ok := l.streams[streamKey(session, stream)]
		if ok && index+1 >= ms.first {
			out := append([][]byte(nil), ms.data[max(0, index+1-ms.first):]...)
			l.mu.Unlock()
			for _, d := range out {
				if !yield(d, nil) {
					return
				}
			}
			return
		}
		l.mu.Unlock()
		if ok {
			// Trimmed from memory: everything trimmed was flushed first.
			if err := l.flush(ctx); err != nil {
				yield(nil, err)
				return
			}
		}
		data, last, err := l.st.Events(ctx, session, stream, index)
		if err != nil {
			yield(nil, err)
			return
		}
		if last < index {
			yield(nil, fmt.Errorf("mcpruntime: no events after %d in stream %q", index, stream))
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore. go-sdk calls it whenever the
// server session closes, which for us includes passivation; the log must
// survive that, so events are deleted only when the session ends.
func (l *eventLog) SessionClosed(context.Context, string) error { return nil }

func (l *eventLog) run() {
	defer close(l.stopped)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
			// Batch appends that arrive together.
			select {
			case <-l.stop:
				return
			case <-time.After(l.every):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := l.flush(ctx); err != nil {
			l.log.Warn("mcpruntime: flush event log (will retry)", "err", err)
		}
		cancel()
	}
}

// flush writes pending events, then trims memory beyond maxBytes.
func (l *eventLog) flush(ctx context.Context) error {
	l.mu.Lock()
	batch := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := l.st.AppendEvents(ctx, batch); err != nil {
		l.mu.Lock()
		l.pending = append(batch, l.pending...)
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range batch {
		if ms, ok := l.streams[streamKey(e.Session, e.Stream)]; ok && e.Index+1 > ms.flushed {
			ms.flushed = e.Index + 1
		}
	}
	for l.bytes > l.maxBytes {
		trimmed := false
		for _, ms := range l.streams {
			if len(ms.data) > 0 && ms.first < ms.flushed {
				l.bytes -= len(ms.data[0])
				ms.data = ms.data[1:]
				ms.first++
				trimmed = true
			}
		}
		if !trimmed {
			break
		}
	}
	return nil
}

// close flushes everything and stops the writer.
func (l *eventLog) close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.stopped
	return l.flush(ctx)
}
