//go:build !linux

package sandbox

import (
	"os"
	"syscall"
	"time"
)

// protocolOutput returns the worker's end of the frame stream (stdout, on systems where it is not
// moved aside).
func protocolOutput() (*os.File, error) { return os.Stdout, nil }

// protocolInput returns the worker's end of the parent's frame stream (stdin).
func protocolInput() (*os.File, error) { return os.Stdin, nil }

// workerSysProcAttr has no parent-death signal outside Linux: a worker there exits when its stdin
// ends.
func workerSysProcAttr() *syscall.SysProcAttr { return nil }

// setDataLimit has no OS backstop outside Linux.
func setDataLimit(uint64) func() { return func() {} }

// dataOffset is not measured outside Linux.
func dataOffset(uint64) uint64 { return 0 }

// processCPU is not measured outside Linux.
func processCPU() time.Duration { return 0 }

// lowerPriority is not done outside Linux.
func lowerPriority() bool { return false }
