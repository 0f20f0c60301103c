package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// protocolOutput returns the worker's end of the frame stream: a private duplicate of stdout. fd 1
// itself is pointed at stderr, so that nothing else the process prints (a library, a panic) can
// corrupt the stream.
func protocolOutput() (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("duplicating stdout: %w", err)
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		return nil, fmt.Errorf("pointing stdout at stderr: %w", err)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "sandbox-frames"), nil
}

// protocolInput returns the worker's end of the parent's frame stream: stdin, switched to
// non-blocking mode so that reads park in the Go netpoller. A blocking read holds its thread and P in a
// system call, and the goroutine it wakes (the code waiting for a tool result) then waits for the
// runtime's sysmon to take that P back: measured, that added about 100µs to each tool call.
func protocolInput() (*os.File, error) {
	if err := syscall.SetNonblock(0, true); err != nil {
		return nil, fmt.Errorf("making stdin non-blocking: %w", err)
	}
	return os.NewFile(0, "sandbox-frames-in"), nil
}

// workerSysProcAttr makes a worker die with the node: the kernel sends it SIGKILL when the thread
// that started it exits (the Go runtime does not end its threads, except those of goroutines that
// exit while locked to one).
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// setDataLimit lowers the soft RLIMIT_DATA to bytes and returns the function that restores it. It is
// the OS backstop behind the memory watchdog: an allocation that would go past it fails, and the Go
// runtime then dies with "out of memory" instead of committing gigabytes between two watchdog
// samples. RLIMIT_DATA counts private writable mappings, which is what the Go heap commits (its
// PROT_NONE address-space reservations do not count, unlike under RLIMIT_AS, which the runtime's
// reservations would exhaust). Under the race detector it is left alone: the detector's shadow memory
// is mapped the same way.
func setDataLimit(bytes uint64) (restore func()) {
	if raceEnabled {
		return func() {}
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &old); err != nil {
		return func() {}
	}
	lim := old
	lim.Cur = min(bytes, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &lim); err != nil {
		return func() {}
	}
	return func() { _ = syscall.Setrlimit(syscall.RLIMIT_DATA, &old) }
}

// dataOffset returns how much of the process's VmData the Go runtime's mapped memory (goMapped,
// measured just before) does not account for: the binary's own data segments, mostly. It is
// measured once per worker, so that the per-execution limit needs no read of /proc.
func dataOffset(goMapped uint64) uint64 {
	data, err := mappedData()
	if err != nil || data < goMapped {
		return 0
	}
	return data - goMapped
}

// mappedData returns the process's VmData (the mappings RLIMIT_DATA counts) in bytes.
func mappedData() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmData:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmData %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmData in /proc/self/status")
}

// processCPU returns the CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// niceness is the priority a CPU-heavy worker lowers itself to.
const niceness = 10

// lowerPriority sets every thread of the process to the niceness (Linux keeps a nice value per
// thread; new threads inherit their creator's). It reports whether it succeeded for any.
func lowerPriority() bool {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false
	}
	ok := false
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if syscall.Setpriority(syscall.PRIO_PROCESS, tid, niceness) == nil {
			ok = true
		}
	}
	return ok
}
