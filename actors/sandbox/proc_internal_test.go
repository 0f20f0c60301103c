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
		{2, "panic: runtime error: index out of range [3] with length 3\n", false},
		{-1, "", false},
		{exitProtocol, "sandbox worker: bad frame", false},
	} {
		if got, sign := memoryDeath(tc.code, tc.stderr); got != tc.want {
			t.Errorf("code %d, stderr %q: memory death %v (%q), want %v", tc.code, tc.stderr, got, sign, tc.want)
		}
	}
}
