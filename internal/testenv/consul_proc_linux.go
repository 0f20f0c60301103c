//go:build linux

package testenv

import "syscall"

// procAttr makes the kernel kill the agent if the test binary dies without
// running its cleanups (panic, timeout), so no agent outlives the test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
