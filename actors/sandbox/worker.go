package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WorkerEnv is the environment variable that turns a process into a sandbox worker. The pool starts
// workers by re-executing the node's own binary (os.Executable) with WorkerEnv=WorkerEnvValue; the
// package's init function sees it and serves executions on stdin/stdout instead of letting the
// program start, so any binary that links this package — the node, a tool, a `go test` binary — can
// act as a worker without a TestMain. A program must never set it for itself.
const (
	WorkerEnv      = "MCPGRAIN_SANDBOX_WORKER"
	WorkerEnvValue = "1"
)

// Worker exit codes the parent interprets.
const (
	exitParentGone  = 0  // stdin ended or a write failed: the node is gone or retired the worker
	exitMemoryLimit = 86 // the memory watchdog fired
	exitProtocol    = 87 // the parent sent something this worker does not understand
)

// Worker tuning.
const (
	// watchdogInterval is how often a worker samples its heap while an execution runs.
	watchdogInterval = 5 * time.Millisecond
	// niceCheckEvery is how many watchdog ticks pass between two checks of the execution's CPU time.
	niceCheckEvery = 20
	// workerProcs is the worker's GOMAXPROCS: one for the code, one for the collector and the
	// watchdog. It bounds what one execution takes from the node's cores.
	workerProcs = 2
	// dataLimitSlack is added to the OS backstop (RLIMIT_DATA) beyond twice MaxHeapGrowth.
	dataLimitSlack = 64 << 20
)

func init() {
	if os.Getenv(WorkerEnv) != WorkerEnvValue {
		return
	}
	os.Exit(serveWorker())
}

// serveWorker is a worker process's whole life: it runs the executions the parent sends, one at a
// time, until its stdin ends.
func serveWorker() int {
	runtime.GOMAXPROCS(min(workerProcs, runtime.NumCPU()))
	out, err := protocolOutput()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		return exitProtocol
	}
	in, err := protocolInput()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		return exitProtocol
	}
	w := &workerSide{
		link:   &workerLink{out: newFrameWriter(out), results: make(chan frame, 1)},
		starts: make(chan frame, 1),
		heap:   newHeapGauge(),
	}
	w.link.send(frame{T: frameReady, Heap: w.heap.read()})
	w.dataOffset = dataOffset(w.heap.mapped())
	go w.readLoop(bufio.NewReaderSize(in, 64<<10))
	for f := range w.starts {
		w.execute(f)
	}
	return exitParentGone
}

// workerLink is the worker's end of the pipes, shared by the execution and the watchdog.
type workerLink struct {
	out     *frameWriter
	results chan frame // call results, in order
}

// send writes f to the parent; a failed write means the parent is gone, so the worker exits.
func (l *workerLink) send(f frame) {
	if err := l.out.write(f); err != nil {
		os.Exit(exitParentGone)
	}
}

// workerSide is the state of a worker process.
type workerSide struct {
	link   *workerLink
	starts chan frame
	heap   *heapGauge

	dataOffset uint64 // VmData beyond what the Go runtime maps (the binary's data), for setDataLimit

	mu          sync.Mutex
	current     *execution
	interrupted bool // an interrupt arrived for the execution being started
}

// readLoop dispatches the parent's frames. Interrupts act at once, from this goroutine; starts and
// call results go to the main goroutine.
func (w *workerSide) readLoop(in io.Reader) {
	for {
		f, err := readFrame(in)
		if err != nil {
			if errors.Is(err, io.EOF) {
				os.Exit(exitParentGone)
			}
			fmt.Fprintln(os.Stderr, "sandbox worker:", err)
			os.Exit(exitProtocol)
		}
		switch f.T {
		case frameStart:
			w.mu.Lock()
			w.interrupted = false
			w.mu.Unlock()
			w.starts <- f
		case frameResult:
			w.link.results <- f
		case frameInterrupt:
			w.mu.Lock()
			w.interrupted = true
			ex := w.current
			w.mu.Unlock()
			if ex != nil {
				ex.stop(errInterrupted)
			}
		default:
			fmt.Fprintf(os.Stderr, "sandbox worker: unexpected %q frame\n", f.T)
			os.Exit(exitProtocol)
		}
	}
}

// execute runs one execution and reports its end.
func (w *workerSide) execute(f frame) {
	for len(w.link.results) > 0 { // an answer to a call of an earlier, interrupted execution
		<-w.link.results
	}
	lim := wireLimits{}
	if f.Lim != nil {
		lim = *f.Lim
	}
	ex, err := newExecution(w.link, lim, f.Now)
	if err != nil {
		w.link.send(frame{T: frameDone, Err: err.Error()})
		return
	}
	ex.codeLines = strings.Count(f.Code, "\n") + 1
	ex.timer = newWorkerTimer(f)
	w.mu.Lock()
	w.current = ex
	if w.interrupted {
		ex.stop(errInterrupted)
	}
	w.mu.Unlock()

	dog := w.startWatchdog(lim.MaxHeapGrowth, time.Duration(lim.NiceAfterCPU))
	ex.waiting = dog.pause
	out := ex.run(f.Code)
	niced := dog.stop()
	if grown, over := overshot(dog.mapped0, w.heap.mapped(), lim.MaxHeapGrowth); over {
		w.link.out.tryWrite(frame{T: frameLimit, Kind: KindLimit, Limit: LimitHeap, Err: fmt.Sprintf(
			"memory limit exceeded: the execution's memory grew by %d MiB between two samples (limit %d MiB)", grown>>20, lim.MaxHeapGrowth>>20)})
		os.Exit(exitMemoryLimit)
	}

	w.mu.Lock()
	w.current = nil
	w.mu.Unlock()
	done := frame{T: frameDone, Heap: w.heap.read(), Niced: niced, Spans: ex.timer.done()}
	if out.value != "" {
		done.JSON = []byte(out.value)
	}
	if out.err != nil {
		done.Err = out.err.Error()
		var se *Error
		if errors.As(out.err, &se) {
			done.Kind, done.Limit, done.Err = se.Kind, se.Limit, se.Message
		}
	}
	w.link.send(done)
}

// watchdog bounds one execution's memory (and lowers the priority of a CPU-heavy one) from its own
// goroutine, which the Go scheduler runs even while the code is inside a long native built-in.
type watchdog struct {
	ticker  *time.Ticker
	quit    chan struct{}
	stopped atomic.Bool // set before quit is closed: the execution is over, nothing may be killed
	niced   atomic.Bool
	restore func()
	mapped0 uint64 // the runtime's mapped memory when the execution started
}

// overshot reports whether an execution allowed to grow the heap by limit went past it between two of
// the watchdog's samples — one giant allocation that was made, used and dropped within 5 ms: the
// memory the Go runtime mapped (which a collection does not shrink) grew from mapped0 to mapped by
// more than the limit and a margin for the runtime's own overhead. Where the OS backstop exists it
// refuses such an allocation first; a race build has none, nor do other systems.
func overshot(mapped0, mapped, limit uint64) (grown uint64, over bool) {
	if mapped <= mapped0 {
		return 0, false
	}
	grown = mapped - mapped0
	return grown, grown > limit+limit/4+dataLimitSlack
}

// startWatchdog arms the memory bounds for an execution allowed to grow the heap by limit bytes: the
// sampling watchdog (the precise bound, which reports and exits), the GC's soft memory limit (so
// garbage is collected before it counts) and the OS backstop (so an allocation larger than the
// headroom between two samples fails instead of being made).
func (w *workerSide) startWatchdog(limit uint64, niceAfter time.Duration) *watchdog {
	d := &watchdog{quit: make(chan struct{}), ticker: time.NewTicker(watchdogInterval), mapped0: w.heap.mapped()}
	base := w.heap.read()
	debug.SetMemoryLimit(int64(min(w.heap.footprint()+limit, math.MaxInt64)))
	debug.SetMaxStack(int(min(max(limit, 64<<20), 1<<30)))
	restoreData := setDataLimit(w.heap.mapped() + w.dataOffset + 2*limit + dataLimitSlack)
	d.restore = func() {
		restoreData()
		debug.SetMemoryLimit(math.MaxInt64)
	}
	cpu0 := processCPU()
	go func() {
		defer d.ticker.Stop()
		for tick := 1; ; tick++ {
			select {
			case <-d.quit:
				return
			case <-d.ticker.C:
			}
			if d.stopped.Load() {
				return
			}
			if now := w.heap.read(); now > base && now-base > limit {
				w.link.out.tryWrite(frame{T: frameLimit, Kind: KindLimit, Limit: LimitHeap, Err: fmt.Sprintf(
					"memory limit exceeded: the execution's heap grew by %d MiB (limit %d MiB)", (now-base)>>20, limit>>20)})
				os.Exit(exitMemoryLimit)
			}
			if !d.niced.Load() && niceAfter > 0 && tick%niceCheckEvery == 0 && processCPU()-cpu0 > niceAfter {
				d.niced.Store(lowerPriority())
			}
		}
	}()
	return d
}

// pause stops the sampling while the code waits for a tool result (it allocates nothing then, and a
// parked execution, waiting for an approval, must not cost the node 200 wake-ups a second), and
// returns the function that resumes it.
func (d *watchdog) pause() (resume func()) {
	d.ticker.Stop()
	return func() { d.ticker.Reset(watchdogInterval) }
}

// stop disarms the watchdog (without waiting for its goroutine, which exits at its next tick) and
// reports whether it lowered the worker's priority.
func (d *watchdog) stop() bool {
	d.stopped.Store(true)
	close(d.quit)
	d.restore()
	return d.niced.Load()
}

// heapGauge reads the worker's memory from runtime/metrics.
type heapGauge struct {
	mu      sync.Mutex
	samples [5]metrics.Sample
}

const (
	heapObjectsMetric  = "/memory/classes/heap/objects:bytes"
	heapStacksMetric   = "/memory/classes/heap/stacks:bytes"
	memoryTotalMetric  = "/memory/classes/total:bytes"
	heapReleasedMetric = "/memory/classes/heap/released:bytes"
)

func newHeapGauge() *heapGauge {
	g := &heapGauge{}
	for i, name := range []string{heapObjectsMetric, heapStacksMetric, memoryTotalMetric, heapReleasedMetric} {
		g.samples[i].Name = name
	}
	return g
}

func (g *heapGauge) readAll() (objects, stacks, total, released uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	metrics.Read(g.samples[:])
	v := func(i int) uint64 {
		if g.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return g.samples[i].Value.Uint64()
	}
	return v(0), v(1), v(2), v(3)
}

// read returns the bytes in heap objects (live or not yet collected) and goroutine stacks: what an
// execution's data structures and recursion occupy.
func (g *heapGauge) read() uint64 {
	objects, stacks, _, _ := g.readAll()
	return objects + stacks
}

// mapped returns all the memory the Go runtime has mapped, released to the OS or not (released pages
// stay mapped, and count in VmData).
func (g *heapGauge) mapped() uint64 {
	_, _, total, _ := g.readAll()
	return total
}

// footprint returns the memory the Go runtime's soft limit counts (everything mapped and not
// released to the OS).
func (g *heapGauge) footprint() uint64 {
	_, _, total, released := g.readAll()
	return total - released
}
