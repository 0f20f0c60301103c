package sandbox

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// frame is one message between the node (the parent) and a worker process, in either direction.
// Frames travel over the worker's stdin (parent → worker) and a private copy of its stdout
// (worker → parent), each as a 4-byte big-endian length followed by that many bytes of JSON.
//
// The exchange for one execution:
//
//	worker → parent  ready{heap}                       once, when the process is up
//	parent → worker  start{code, lim, now, trace?}
//	worker → parent  emit{json} | log{text}            as the code produces output
//	worker → parent  call{seq, path, json}             a tools.* call; the code waits for …
//	parent → worker  result{seq, json | err, now}      … its answer (calls never overlap)
//	parent → worker  interrupt                         the wall time ran out or the caller gave up
//	worker → parent  limit{kind, err}                  the memory watchdog fired; the worker exits
//	worker → parent  done{json?, kind?, err?, heap,    the execution ended; the worker waits for
//	                      spans?}
//	                                                   the next start
//
// Values (tool arguments and results, emitted values, the return value) are carried as the JSON
// text they already are on either side, never re-encoded in between.
type frame struct {
	T    string          `json:"t"`              // frame type: one of the frame* constants
	Seq  int             `json:"seq,omitempty"`  // call and result: the call's number in the execution, from 1
	Code string          `json:"code,omitempty"` // start: the TypeScript
	Path string          `json:"path,omitempty"` // call: the tool path after "tools."
	JSON json.RawMessage `json:"json,omitempty"` // call, result, emit, done: a JSON value (absent: undefined)
	Text string          `json:"text,omitempty"` // log: the line
	Kind string          `json:"kind,omitempty"` // done, limit: the *Error kind ("" with Err: an internal error)
	// Limit (done, limit) is the *Error's Limit: which limit stopped the execution.
	Limit string      `json:"limit,omitempty"`
	Err   string      `json:"err,omitempty"`  // result: the Host's error; done, limit: the error message
	Now   int64       `json:"now,omitempty"`  // start, result: Limits.Now in Unix nanoseconds (0: the worker's clock)
	Heap  uint64      `json:"heap,omitempty"` // ready, done: the worker's heap in bytes
	Lim   *wireLimits `json:"lim,omitempty"`  // start
	// Niced (done) reports that the worker lowered its own scheduling priority during the execution.
	Niced bool `json:"niced,omitempty"`
	// Trace (start) is the W3C traceparent of the parent's span of the execution: the worker times
	// its part (absent: tracing is off, nothing is timed).
	Trace string `json:"trace,omitempty"`
	// Spans (done) are the spans the worker timed, for the parent to record under Trace (trace.go).
	Spans []wireSpan `json:"spans,omitempty"`
}

// Frame types.
const (
	frameReady     = "ready"
	frameStart     = "start"
	frameEmit      = "emit"
	frameLog       = "log"
	frameCall      = "call"
	frameResult    = "result"
	frameInterrupt = "interrupt"
	frameLimit     = "limit"
	frameDone      = "done"
)

// wireLimits are the limits a worker enforces itself (the wall time is the parent's).
type wireLimits struct {
	MaxToolCalls  int    `json:"maxToolCalls"`
	MaxOutput     int    `json:"maxOutput"`
	MaxHeapGrowth uint64 `json:"maxHeapGrowth"`
	Seed          int64  `json:"seed,omitempty"`
	FixedClock    bool   `json:"fixedClock,omitempty"`   // Limits.Now is set: Date reads the Now of the last frame
	NiceAfterCPU  int64  `json:"niceAfterCPU,omitempty"` // PoolOptions.NiceAfterCPU in nanoseconds (<= 0: never)
}

// maxFrameSize bounds one frame. Output is bounded by MaxOutput, but tool arguments and results are
// not, so the bound is generous; a larger length is a protocol error (a corrupt or hostile stream).
const maxFrameSize = 256 << 20

// errFrameTooLarge is returned for a length prefix above maxFrameSize.
var errFrameTooLarge = errors.New("sandbox: protocol frame too large")

// readFrame reads one frame. It returns io.EOF only at a clean end between frames.
func readFrame(r io.Reader) (frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return frame{}, fmt.Errorf("sandbox: reading a frame header: %w", err)
		}
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrameSize {
		return frame{}, fmt.Errorf("%w: %d bytes", errFrameTooLarge, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, fmt.Errorf("sandbox: reading a %d-byte frame: %w", n, err)
	}
	var f frame
	if err := json.Unmarshal(body, &f); err != nil {
		return frame{}, fmt.Errorf("sandbox: decoding a frame: %w", err)
	}
	if f.T == "" {
		return frame{}, errors.New("sandbox: decoding a frame: no type")
	}
	return f, nil
}

// frameWriter writes frames, one at a time, each flushed at once.
type frameWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// write encodes and sends f.
func (fw *frameWriter) write(f frame) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.writeLocked(f)
}

// tryWrite sends f unless another write is in progress (a writer blocked on a full pipe); it reports
// whether f was sent. The memory watchdog uses it: it must exit promptly, whatever the pipe does.
func (fw *frameWriter) tryWrite(f frame) bool {
	if !fw.mu.TryLock() {
		return false
	}
	defer fw.mu.Unlock()
	return fw.writeLocked(f) == nil
}

func (fw *frameWriter) writeLocked(f frame) error {
	body, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("sandbox: encoding a %s frame: %w", f.T, err)
	}
	if len(body) > maxFrameSize {
		return fmt.Errorf("%w: a %s frame of %d bytes", errFrameTooLarge, f.T, len(body))
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, err := fw.w.Write(hdr[:]); err != nil {
		return fmt.Errorf("sandbox: writing a %s frame: %w", f.T, err)
	}
	if _, err := fw.w.Write(body); err != nil {
		return fmt.Errorf("sandbox: writing a %s frame: %w", f.T, err)
	}
	if err := fw.w.Flush(); err != nil {
		return fmt.Errorf("sandbox: writing a %s frame: %w", f.T, err)
	}
	return nil
}
