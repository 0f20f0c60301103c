package sandbox

import "testing"

// A worker that died of its memory bounds is told from one that died of
// anything else by its exit code or by what the Go runtime wrote as it
// died — every way the runtime reports a refused allocation included.
func TestMemoryDeathIsToldFromOtherDeaths(t *testing.T) {
	for _, tc := range []struct {
		code   int
		stderr string
		want   bool
	}{
		{exitMemoryLimit, "", true},
		{2, "runtime: out of memory: cannot allocate 67108864-byte block (1073741824 in use)\nfatal error: out of memory\n", true},
		{2, "fatal error: out of memory allocating heap arena metadata\n\nruntime stack:\n", true},
		{2, "fatal error: out of memory allocating allArenas\n", true},
		{2, "runtime: mmap: cannot allocate memory\n", true},
		{2, "runtime: goroutine stack exceeds 67108864-byte limit\nfatal error: stack overflow", true},
		{2, "runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort\n", true},
		{2, "panic: runtime error: index out of range [3] with length 3\n", false},
		{-1, "", false},
		{exitProtocol, "sandbox worker: bad frame", false},
	} {
		if got, sign := memoryDeath(tc.code, tc.stderr); got != tc.want {
			t.Errorf("code %d, stderr %q: memory death %v (%q), want %v", tc.code, tc.stderr, got, sign, tc.want)
		}
	}
}

// An execution's memory went past its limit between two samples when the
// runtime's mapped memory grew by more than the limit and the runtime's
// margin; growth within that is not an overshoot.
func TestOvershootIsGrowthPastTheLimitAndItsMargin(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		mapped0, mapped, limit uint64
		want                   bool
	}{
		{100 * mib, 100*mib + 2048*mib, 256 * mib, true}, // a 2 GiB buffer made and dropped
		{100 * mib, 100*mib + 256*mib, 256 * mib, false}, // up to the limit
		{100 * mib, 100*mib + 380*mib, 256 * mib, false}, // the limit, a quarter and the slack
		{100 * mib, 100*mib + 390*mib, 256 * mib, true},
		{100 * mib, 90 * mib, 256 * mib, false}, // less mapped than before
	} {
		if _, got := overshot(tc.mapped0, tc.mapped, tc.limit); got != tc.want {
			t.Errorf("mapped %d → %d MiB, limit %d MiB: overshot %v, want %v", tc.mapped0/mib, tc.mapped/mib, tc.limit/mib, got, tc.want)
		}
	}
}
