package cluster

import "syscall"

// sysProcAttr puts a component in its own process group, so that Stop can
// signal it with everything it started, and asks the kernel to kill it if
// the process that started it dies, so that an interrupted test leaves no
// stray kube-apiserver. (Strictly, Pdeathsig fires when the OS thread that
// started the child exits; Go ends a thread only when a goroutine exits with
// the thread locked, which nothing here does.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
