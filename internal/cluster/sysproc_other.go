//go:build unix && !linux

package cluster

import "syscall"

// sysProcAttr puts a component in its own process group, so that Stop can
// signal it with everything it started. Only Linux can also kill it when
// its parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
