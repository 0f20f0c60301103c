//go:build !linux

package testenv

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
