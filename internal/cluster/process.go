package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	// defaultReadyPoll is how often WaitReady checks when Process.ReadyPoll
	// is zero.
	defaultReadyPoll = 100 * time.Millisecond
	// readyCheckTimeout bounds one call of WaitReady's ready function.
	readyCheckTimeout = 2 * time.Second
)

// Process runs one binary as a child process in its own process group, its
// stdout and stderr appended to a log file. The control plane's components
// are Processes; so is the controller the benchmark (hack/bench) measures.
//
// Stop signals the whole process group, so it also reaches anything the
// binary started. On Linux the kernel also kills the child when the process
// that started it dies, so an interrupted test or benchmark leaves no stray
// kube-apiserver behind.
//
// Once it has exited, a Process can be started again with the same
// settings, which is how RestartAPIServer restarts kube-apiserver. Start
// must not run concurrently with any other method; the other methods only
// read what Start set and may be called from any goroutine.
type Process struct {
	// Name names the process in error messages, for example "etcd".
	Name string
	// Path is the binary, as exec.Command takes it: a name without a slash
	// is looked up in PATH.
	Path string
	// Args are the arguments that follow the binary's name.
	Args []string
	// Env holds extra "KEY=value" variables, added after this process's own
	// environment; an entry there wins over an inherited one.
	Env []string
	// LogPath is the file that gets the output. Start creates it if needed
	// and appends a line "### <time> <command line>", then the output.
	LogPath string
	// ReadyPoll is how often WaitReady calls its ready function; zero means
	// every 100 ms.
	ReadyPoll time.Duration

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been reaped
	err    error         // cmd.Wait's result; read only after exited is closed
}

// Start starts the binary in its own process group and returns once it
// runs; it does not wait for it to be ready (see WaitReady). It fails if
// the process of an earlier Start still runs.
func (p *Process) Start() error {
	if p.cmd != nil && !p.hasExited() {
		return fmt.Errorf("run %s: already running as pid %d", p.Path, p.Pid())
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	// The child keeps its own copy of the descriptor; ours is not needed.
	defer logFile.Close()
	fmt.Fprintf(logFile, "### %s %s\n", time.Now().Format(time.RFC3339),
		strings.Join(slices.Concat([]string{p.Path}, p.Args), " "))

	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", p.Path, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.err = cmd, exited, nil
	go func() {
		p.err = cmd.Wait()
		close(exited)
	}()
	return nil
}

// Pid returns the process id of the last Start, or 0 before the first.
func (p *Process) Pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited returns a channel that is closed once the process of the last
// Start has exited and been reaped. Before the first Start it returns nil,
// a channel that is never ready.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err returns how the process of the last Start ended, as exec.Cmd.Wait
// reports it (nil for exit status 0), or nil while it runs.
func (p *Process) Err() error {
	if !p.hasExited() {
		return nil
	}
	return p.err
}

// hasExited reports whether the process of the last Start has exited; it
// is false before the first Start.
func (p *Process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, waits up to grace for the
// process to exit, then sends SIGKILL to whatever is left of the group, and
// returns once the process has been reaped. Stop before Start does nothing.
func (p *Process) Stop(grace time.Duration) {
	if p.cmd == nil {
		return
	}
	pgid := p.cmd.Process.Pid // Setpgid makes the process its group's leader
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
		}
	}
	// Also reaches children the binary may have started, which can outlive
	// it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
}

// WaitReady calls ready every ReadyPoll, each call bounded to 2 s, until it
// returns nil. It fails early, with the tail of the log, if the process
// exits, and also fails after timeout or when ctx ends; then the error
// wraps ctx's error and holds ready's last error.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	if p.cmd == nil {
		return fmt.Errorf("%s was not started", p.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := p.ReadyPoll
	if poll <= 0 {
		poll = defaultReadyPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var last error
	for {
		// A tick can come just after the deadline, before ctx.Done is
		// closed. A check bound to fail would only hide the last real
		// answer.
		if err := ended(ctx); err != nil && last != nil {
			return p.notReady(err, last)
		}
		checkCtx, cancelCheck := context.WithTimeout(ctx, readyCheckTimeout)
		last = ready(checkCtx)
		cancelCheck()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v); its log ends:\n%s", p.Name, p.err, p.LogTail())
		case <-ctx.Done():
			return p.notReady(ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// notReady is WaitReady's error once its context has ended with cause;
// last is ready's last error.
func (p *Process) notReady(cause, last error) error {
	return fmt.Errorf("%s not ready: %w (last check: %v); its log ends:\n%s", p.Name, cause, last, p.LogTail())
}

// ended returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed even if ctx does not say so yet.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// LogTail returns the last lines (at most 25, from the last 8 KiB) of the
// log file, for error messages.
func (p *Process) LogTail() string {
	const maxBytes, maxLines = 8 << 10, 25
	f, err := os.Open(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > maxBytes {
		_, _ = f.Seek(-maxBytes, io.SeekEnd)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct loopback TCP ports that are free right now.
// All listeners stay open until every port is chosen, so the n differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
