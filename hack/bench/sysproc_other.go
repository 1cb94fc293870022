//go:build !linux

package main

import "syscall"

// sysProcAttr puts the controller in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
