package app

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// DefaultResidentMemoryShare is the share of the node's memory (its cgroup
// limit, else the machine's) that --resident-memory auto gives resident
// session runtimes.
const DefaultResidentMemoryShare = 0.5

// DefaultResidentMemory is the budget --resident-memory auto gives
// resident session runtimes: [DefaultResidentMemoryShare] of
// [NodeMemory] (0 when that cannot be read).
func DefaultResidentMemory() uint64 {
	total, _ := NodeMemory()
	return uint64(float64(total) * DefaultResidentMemoryShare)
}

// ParseResidentMemory parses a --resident-memory value: "auto" (or empty)
// is [DefaultResidentMemory], "0" is no budget (a fixed soft cap), and
// anything else a size such as 4GiB or 512MB.
func ParseResidentMemory(v string) (uint64, error) {
	switch v = strings.TrimSpace(v); v {
	case "auto", "":
		return DefaultResidentMemory(), nil
	case "0":
		return 0, nil
	}
	n, err := humanize.ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("%q: want a size such as 4GiB or 512MB, auto or 0", v)
	}
	return n, nil
}

// NodeMemory returns the memory available to this process: its cgroup's
// limit (v2 memory.max, v1 memory.limit_in_bytes) if it has one, else the
// machine's (MemTotal), and where it read it; 0 if none can be read.
func NodeMemory() (bytes uint64, source string) {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if n, ok := readLimit(p); ok {
			return n, p
		}
	}
	if n, ok := memTotal("/proc/meminfo"); ok {
		return n, "/proc/meminfo"
	}
	return 0, ""
}

// readLimit reads a cgroup memory limit; "max" and v1's near-2^63 values
// mean none.
func readLimit(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n == 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseUint(fields[1], 10, 64)
			return kib << 10, err == nil && kib > 0
		}
	}
	return 0, false
}
