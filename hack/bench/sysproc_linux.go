package main

import "syscall"

// sysProcAttr puts the controller in its own process group and has the
// kernel kill it if the benchmark dies without cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
