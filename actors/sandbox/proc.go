package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workerStartTimeout bounds how long a new worker may take to say it is ready (generous: a loaded
// machine, a race-detector binary).
const workerStartTimeout = 30 * time.Second

// stderrTail is how much of a worker's stderr is kept to explain its death.
const stderrTail = 4 << 10

// proc is the parent's handle on one worker process.
type proc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *frameWriter
	frames chan frame    // the worker's frames; closed when its output ends
	gone   chan struct{} // closed by kill: nobody reads frames any more
	exited chan struct{} // closed once the process was reaped (state and readErr are set)
	stderr *tailBuffer

	state   *os.ProcessState
	readErr error // why the frame stream ended, if not at a clean EOF

	killOnce sync.Once
	uses     int // executions run (the pool's, under its lock)
}

// startProc starts a worker process and waits for its ready frame.
func startProc() (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: locating the binary to run workers: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = workerEnviron(os.Environ())
	cmd.SysProcAttr = workerSysProcAttr()
	p := &proc{cmd: cmd, frames: make(chan frame, 16), gone: make(chan struct{}), exited: make(chan struct{}),
		stderr: &tailBuffer{max: stderrTail}}
	cmd.Stderr = p.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: worker stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: worker stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: starting a worker: %w", err)
	}
	p.in, p.out = in, newFrameWriter(in)
	go p.readLoop(stdout)

	t := time.NewTimer(workerStartTimeout)
	defer t.Stop()
	select {
	case f, ok := <-p.frames:
		if ok && f.T == frameReady {
			return p, nil
		}
		p.kill()
		<-p.exited
		return nil, fmt.Errorf("sandbox: a new worker did not start: %s", p.death())
	case <-t.C:
		p.kill()
		<-p.exited
		return nil, fmt.Errorf("sandbox: a new worker was not ready within %v", workerStartTimeout)
	}
}

// workerEnvKeys are the environment variables a worker inherits: the time zone Date uses and the Go
// runtime's own settings. Nothing else of the node's environment (credentials, say) reaches it.
var workerEnvKeys = map[string]bool{"TZ": true, "GODEBUG": true, "GOGC": true, "GOTRACEBACK": true, "GORACE": true, "GOCOVERDIR": true}

// workerEnviron returns a worker's environment: WorkerEnv and the workerEnvKeys of env.
func workerEnviron(env []string) []string {
	out := []string{WorkerEnv + "=" + WorkerEnvValue}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && workerEnvKeys[k] {
			out = append(out, kv)
		}
	}
	return out
}

// readLoop forwards the worker's frames until its output ends, then reaps the process.
func (p *proc) readLoop(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		f, err := readFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.readErr = err
				p.kill() // a corrupt stream: the worker is of no further use
			}
			break
		}
		select {
		case p.frames <- f:
		case <-p.gone:
		}
	}
	close(p.frames)
	_ = p.cmd.Wait()
	p.state = p.cmd.ProcessState
	close(p.exited)
}

// pid returns the worker's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// send writes a frame to the worker. An error means the worker is gone.
func (p *proc) send(f frame) error { return p.out.write(f) }

// kill ends the worker with SIGKILL (it cannot ignore it, whatever native code it is in). Reaping
// happens in readLoop; wait on exited for it.
func (p *proc) kill() {
	p.killOnce.Do(func() {
		close(p.gone)
		_ = p.cmd.Process.Kill()
		_ = p.in.Close()
	})
}

// alive reports whether the worker has not exited yet.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// maxRSS returns the worker's peak resident set in bytes, once it was reaped (0 before).
func (p *proc) maxRSS() uint64 {
	if p.state == nil {
		return 0
	}
	if ru, ok := p.state.SysUsage().(*syscall.Rusage); ok && ru != nil {
		return uint64(ru.Maxrss) << 10
	}
	return 0
}

// cpuTime returns the CPU time (user and system) the worker used, once it was reaped (0 before).
func (p *proc) cpuTime() time.Duration {
	if p.state == nil {
		return 0
	}
	return p.state.UserTime() + p.state.SystemTime()
}

// deathCause classifies how a reaped worker ended. memory is true when it died of its memory bounds: the
// watchdog's exit code, or the Go runtime failing an allocation that the OS backstop refused.
func (p *proc) deathCause() (memory bool, detail string) {
	code := -1
	if p.state != nil {
		code = p.state.ExitCode()
	}
	if memory, detail := memoryDeath(code, p.stderr.String()); memory {
		return true, detail
	}
	return false, p.death()
}

// runtimeOOM are what a Go process's stderr says when it dies for want of memory: the runtime's own
// reports ("runtime: out of memory: cannot allocate …" and every throw of "out of memory …", e.g.
// "out of memory allocating heap arena metadata", which an allocation needing a new heap arena gets
// from the OS backstop), a refused mapping, a goroutine stack past SetMaxStack, and a new OS
// thread whose stack the backstop refused (pthread_create's EAGAIN; a thread-count limit of the
// node's user would say the same, and would be reported as the memory limit too).
var runtimeOOM = []string{"runtime: out of memory", "fatal error: out of memory", "cannot allocate memory", "stack exceeds",
	"pthread_create failed: Resource temporarily unavailable"}

// memoryDeath reports whether a worker that exited with code (-1: killed by a signal) and wrote
// stderrTail died of its memory bounds, and which sign says so.
func memoryDeath(code int, stderrTail string) (bool, string) {
	if code == exitMemoryLimit {
		return true, "the memory watchdog stopped it"
	}
	for _, oom := range runtimeOOM {
		if strings.Contains(stderrTail, oom) {
			return true, oom
		}
	}
	return false, ""
}

// death describes how a reaped worker ended, for an internal error.
func (p *proc) death() string {
	var b strings.Builder
	if p.state != nil {
		b.WriteString(p.state.String())
	} else {
		b.WriteString("unknown exit")
	}
	if p.readErr != nil {
		fmt.Fprintf(&b, "; %v", p.readErr)
	}
	if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
		if i := strings.IndexByte(tail, '\n'); i > 0 && i < 300 {
			tail = tail[:i] // the first line says what happened; goroutine dumps follow
		}
		fmt.Fprintf(&b, "; stderr: %.300s", tail)
	}
	return b.String()
}

// tailBuffer keeps the first and last bytes written to it (a worker's stderr): the first line of a
// Go fatal error says what happened; a flood must not grow the parent.
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	head []byte
	tail []byte
}

// Write keeps up to max/2 bytes from the start and the last max/2 bytes.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.max/2 - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail = append(b.tail, p...)
	if over := len(b.tail) - b.max/2; over > 0 {
		b.tail = append(b.tail[:0], b.tail[over:]...)
	}
	return n, nil
}

// String returns what was kept.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.head) + string(b.tail)
}
